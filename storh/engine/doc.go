// Package engine is storh's storage engine: the bbolt file and its bucket
// layout, the stored value format (version byte, CRC-32C over payload and
// key, msgpack with every map's keys sorted), group commit, chunked range
// scans, and verify, repair, backup and compaction.
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
