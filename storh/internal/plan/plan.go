// Package plan is the executable form of a query: what the storage engine
// needs to run one, and nothing a user writes. Package query owns the
// builder users see and compiles it into a Spec (it sets Compile when it is
// loaded), so that its public API stays the builder alone while the engine
// still reads everything it must. This package also holds what is pure
// about running a query: evaluating a condition on a stored record's raw
// bytes (Matcher) and choosing how to read (Choose, over the collection's
// indexes). It does no I/O.
package plan

import (
	"errors"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ErrInvalidQuery is query.ErrInvalidQuery, here so that the engine can
// fail a query that only shows itself invalid as it runs (an order path
// through a list).
var ErrInvalidQuery = errors.New("storh: invalid query")

// Spec is a validated, compiled query.
type Spec struct {
	// Lo and Hi bound the record ids, both inclusive: After and Before in
	// id order, and TimeRangeMs in every order. Empty means no id can be in
	// range: nothing is read at all.
	Lo, Hi uuidv7.UUID
	Empty  bool
	// Cond filters records; nil means every record in range matches.
	Cond *Cond
	// Order is the field path of OrderBy, nil for id order. Desc sorts
	// descending (the exact reverse of ascending, ties by id included).
	Order []string
	Desc  bool
	// After and Before are keyset cursors in the Order sequence: only
	// records strictly after (before) the cursor's position in it. Only
	// with Order; in id order After and Before narrow Lo and Hi instead.
	After, Before *Cursor
	// Reverse returns the sequence last to first.
	Reverse bool
	// Limit is the most records to return; 0 means no limit.
	Limit int
	// RequireIndex makes a plan that would read the whole collection fail
	// with ErrNoIndex instead.
	RequireIndex bool
	// OnError, when set, receives unreadable records instead of the stream
	// ending with their error.
	OnError func(id uuidv7.UUID, err error)
}

// Cursor is a position in an ordered sequence: a record id and the order
// key of its value at the Order path. Without Key (Lookup true) the engine
// reads the record to find it, and fails with ErrNotFound when the record
// is gone.
type Cursor struct {
	ID     uuidv7.UUID
	Key    []byte
	Lookup bool
}

// Compile turns a query.Query into its Spec, or reports why it cannot run
// (an error wrapping query.ErrInvalidQuery). Package query sets it.
var Compile = func(q any) (*Spec, error) {
	return nil, errors.New("storh: internal error: package query is not linked in")
}

// Next returns the smallest key greater than k, and false when k is the
// largest key. Chunked readers use it to resume after the last key seen.
func Next(k uuidv7.UUID) (uuidv7.UUID, bool) {
	for i := len(k) - 1; i >= 0; i-- {
		k[i]++
		if k[i] != 0 {
			return k, true
		}
	}
	return k, false
}

// Prev returns the largest key less than k, and false when k is zero.
func Prev(k uuidv7.UUID) (uuidv7.UUID, bool) {
	for i := len(k) - 1; i >= 0; i-- {
		k[i]--
		if k[i] != 0xff {
			return k, true
		}
	}
	return k, false
}
