package engine

import "os"

// fileSize returns the apparent size of the file at path (what ls shows).
func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// diskUsage returns the apparent size of the file at path and the space the
// file system has allocated for it. bbolt grows its file with truncate,
// which leaves the new tail unallocated until pages are written there, so a
// fresh database shows 16 MiB but occupies a few pages.
func diskUsage(path string) (size, allocated int64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	return fi.Size(), allocatedBytes(fi), nil
}
