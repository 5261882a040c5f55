// Package plan is the executable form of a query: what the storage engine
// needs to run one, and nothing a user writes. Package query owns the
// query's representation and compiles it (it sets Compile when it is
// loaded), so that its public API stays the builder alone while the engine
// still reads everything it must. It imports nothing of storh but the id
// type.
package plan

import (
	"errors"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Plan says which records a query reads and how.
type Plan struct {
	// Lo and Hi bound the keys to read, both inclusive. Empty means no key
	// can match (an inverted window, After the largest id, ...): nothing
	// is read at all.
	Lo, Hi uuidv7.UUID
	Empty  bool
	// Reverse reads from Hi down to Lo.
	Reverse bool
	// Limit is the most records to return; 0 means no limit.
	Limit int
	// Match filters stored payloads; nil means every record in the range
	// matches. It reads the raw msgpack bytes and does not allocate for
	// scalar comparisons. An error means the payload is malformed.
	Match func(payload []byte) (bool, error)
	// OnError, when set, receives unreadable records instead of the stream
	// ending with their error.
	OnError func(id uuidv7.UUID, err error)
}

// Compile turns a query.Query into its plan, or reports why it cannot run
// (an error wrapping query.ErrInvalidQuery). Package query sets it.
var Compile = func(q any) (Plan, error) {
	return Plan{}, errors.New("storh: internal error: package query is not linked in")
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
