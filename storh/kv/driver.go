package kv

import "context"

// Driver opens the stores of a backend by URL. storh.Open hands a Driver
// the URLs whose scheme it is registered for (storh.Register), so a program
// gets a backend by importing its package, as database/sql gets drivers.
type Driver interface {
	// OpenURL opens the store url names. An error should say what to fix;
	// the caller adds the operation and the URL, its passwords masked.
	OpenURL(ctx context.Context, url string, opts OpenOptions) (Store, error)
}

// OpenOptions are what storh.Open's options ask of a backend's store; the
// engine applies the rest itself (batching, the clock, and refusing writes
// when read-only).
type OpenOptions struct {
	// NoSync allows a commit to return before it is durable: a crash may
	// lose the last commits, never part of one (storh.WithoutSync).
	NoSync bool
	// ReadOnly opens an existing store without creating or changing
	// anything, where the engine will only read (storh.WithReadOnly): a
	// store that is not there is an error wrapping storh.ErrNotFound, and
	// a writable Begin fails with ErrTxNotWritable.
	ReadOnly bool
	// ReadURL names a copy of the store that read-only transactions may
	// read instead (storh.WithReadURL: a PostgreSQL hot standby). A
	// backend that has no such copies refuses it, wrapping
	// storh.ErrUnsupported.
	ReadURL string
	// FileOptions names the options given that set up a database file
	// (storh.WithLockTimeout, WithMaxSize, ...). A backend without a file
	// refuses them, wrapping storh.ErrUnsupported, rather than ignore what
	// the caller asked for.
	FileOptions []string
}

// SameStorer is implemented by a Driver that can tell whether two of its
// URLs name one store (one server, database and schema, spelt two ways):
// storh.Migrate refuses to copy a store onto itself. Without it, only equal
// URLs are the same store.
type SameStorer interface {
	SameStore(a, b string) bool
}
