// Package engine is storh's storage engine: the bucket layout, the stored
// value format (version byte, CRC-32C over payload and key, msgpack with
// every map's keys sorted), group commit, chunked range scans, indexes, the
// queue's states, and verify and repair. All of it is written over package
// kv's ordered, transactional buckets, so it runs unchanged on any backend
// (OpenStore). The embedded backend, a bbolt file (Open), lives here too,
// with what only a file has: backup, compaction, and the direct reads and
// page-structure checks, whose reading of bbolt's pages is in
// internal/boltpage.
//
// Subsystems with data structures of their own live in internal packages,
// each with its own tests: internal/blockindex (the blocks, journal and
// cursors of blocked indexes) and internal/boltpage (bbolt's pages, read
// and checked). The DB's state is grouped by the subsystem that owns it:
// the file (dbFile), collections (collections), group commit
// (groupCommit), the lifecycle, callbacks, blocked indexes and watchers.
//
// Its exported names are exactly what the front door, package storh, needs
// to build the public API on top; applications use storh and never import
// this package. Every operation on a DB runs between Enter and Exit, which
// guard against use after Close and against database calls from inside a
// transaction callback (which would deadlock).
//
// # Caveats
//
// bbolt panics on some damaged pages and faults on a truncated mapping; the
// engine contains both (DB.ViewSafe, DB.UpdateSafe and Tx.Protect turn them
// into ErrCorrupt), but only on the goroutine that reads. Values bbolt
// returns are valid only inside their transaction: everything that leaves
// one is copied.
package engine
