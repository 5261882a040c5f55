package storh

import "github.com/storhdb/storh-go/storh/uuidv7"

// Log is an append-only collection: records are immutable once written and
// there is no delete. Use it for events, audit trails and measurements, read
// back by cursor (After) and creation-time window (TimeRangeMs).
//
// Methods: Put, PutWithID, PutMany, PutStream, Get; Stream, Find, First,
// CountMatching, Explain; Count, Stats, Name; Indexes, DropIndex; Watch,
// WatchReady, Changes, LastSeq.
type Log struct{ coll }

// PutWithID appends data under id. An id already in the log fails with
// ErrExists (records are immutable); an id that is not a UUIDv7 fails with
// ErrInvalidID. Either way nothing is written.
func (l *Log) PutWithID(id uuidv7.UUID, data any) (Record, error) { return l.coll.PutWithID(id, data) }
