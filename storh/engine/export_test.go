package engine

import (
	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/engine/internal/blockindex"
	"github.com/storhdb/storh-go/storh/internal/plan"
)

// Internals the external tests of this package use.
var (
	SealValue    = sealValue
	ValidateName = validateName
	DecodeMap    = decodeMap
)

type Matcher = matcher

const (
	DefaultLockTimeout     = defaultLockTimeout
	DefaultInitialMmapSize = defaultInitialMmapSize
	DefaultMaxBatch        = defaultMaxBatch
)

func ScanColl(c *Coll, cur *Cursor, match Matcher, max, budget int, dst []Item) []Item {
	var examined int
	return scanColl(c, cur, match, max, budget, dst, &examined, nil)
}

func NewCursor(s *plan.Spec) Cursor {
	return Cursor{Lo: s.Lo, Hi: s.Hi, Reverse: s.Reverse, Done: s.Empty}
}

// BlockEntries returns the entries of the index block v stored under key.
func BlockEntries(key, v []byte) ([][]byte, error) { return blockindex.BlockEntries(key, v) }

// ForceLayoutMismatch makes the layout check of every Open, until restore
// runs, find why: as in a file whose layout the direct reader does not
// know.
func ForceLayoutMismatch(why string) (restore func()) {
	forcedLayoutMismatch = why
	return func() { forcedLayoutMismatch = "" }
}

// WithoutLockRelease makes every Open, until restore runs, find bbolt's
// locks out of reach, as with a bbolt whose Begin the release was not
// checked against.
func WithoutLockRelease() (restore func()) {
	reachLocks = func(*bolt.DB) *boltLocks { return nil }
	return func() { reachLocks = reachBoltLocks }
}

// BoltLocksReachable reports whether reachBoltLocks finds bdb's locks.
func BoltLocksReachable(bdb *bolt.DB) bool { return reachBoltLocks(bdb) != nil }
