//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package engine

func fileSizeLimit() (int64, bool) { return 0, false }
