//go:build windows || plan9 || solaris || aix || android

package engine

// lockHolderOf cannot tell who holds the file here: bbolt does not lock with
// flock(2) on these platforms.
func lockHolderOf(string) lockHolder { return holderUnknown }
