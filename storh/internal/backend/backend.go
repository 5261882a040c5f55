// Package backend is the registry of the URL schemes storh.Open takes: a
// backend package registers its schemes from its init, and storh.Register
// re-exports Register. It lives below both so that a backend in this module
// (storh/postgres) registers without importing storh, which imports it in
// tests.
package backend

import (
	"sync"

	"github.com/storhdb/storh-go/storh/kv"
)

var (
	mu      sync.RWMutex
	drivers = map[string]kv.Driver{}
)

// Register makes d open the URLs of scheme (the part before "://"). It
// panics if d is nil or scheme is empty or registered already, as
// database/sql.Register does: two backends claiming one scheme is a bug of
// the program's imports, which no caller could handle.
func Register(scheme string, d kv.Driver) {
	if d == nil {
		panic("storh: Register of a nil driver for scheme " + scheme)
	}
	if scheme == "" {
		panic("storh: Register of a driver for an empty scheme")
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := drivers[scheme]; dup {
		panic("storh: Register called twice for scheme " + scheme)
	}
	drivers[scheme] = d
}

// Lookup returns the driver registered for scheme.
func Lookup(scheme string) (kv.Driver, bool) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := drivers[scheme]
	return d, ok
}
