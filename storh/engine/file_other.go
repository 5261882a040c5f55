//go:build !unix

package engine

import "os"

// allocatedBytes falls back to the apparent size where the file system's
// allocation is not exposed through os.FileInfo.
func allocatedBytes(fi os.FileInfo) int64 { return fi.Size() }
