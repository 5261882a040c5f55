// Package api declares the values the engine fills and package storh shows
// as they are: verification findings and reports, compaction and copy
// reports, job states and the limits of a record. They live below both so
// that storh names them without naming the engine, and without converting
// what the engine hands out through callbacks (Problem, CopyProgress) or
// error chains. Package storh documents each, under its own name.
package api

import (
	"fmt"
	"strconv"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// MaxRecordSize bounds the msgpack payload of one record. bbolt could store
// values up to 2 GiB, but a record that large would be copied whole on every
// read and would stall every writer while its pages are written.
const MaxRecordSize = 16 << 20

// MaxDepth bounds nesting of maps and lists in a record (the top-level map
// is depth 1). It also stops cyclic maps before they exhaust the stack.
const MaxDepth = mpack.MaxDepth

// MaxNameLength bounds collection names (bytes of UTF-8).
const MaxNameLength = 200

// ProblemKind classifies what Verify found.
type ProblemKind string

const (
	ProblemFile     ProblemKind = "file"     // bbolt's own page consistency check
	ProblemLayout   ProblemKind = "layout"   // a collection's buckets or kind are missing or wrong
	ProblemKey      ProblemKind = "key"      // a record key that is not a 16-byte UUIDv7
	ProblemChecksum ProblemKind = "checksum" // a value whose header or CRC does not match
	ProblemDecode   ProblemKind = "decode"   // a value whose payload is not a valid record
	ProblemCounter  ProblemKind = "counter"  // count or bytes metadata disagree with the records
	// ProblemIndex: an index entry without its record (or the other way
	// round), two records sharing a value of a unique index, an entry
	// counter that disagrees, or a definition that cannot be read.
	ProblemIndex ProblemKind = "index"
	// ProblemQueue: a queue's job states, indexes, payloads or counters
	// disagree.
	ProblemQueue ProblemKind = "queue"
)

// Problem is one finding of Verify.
type Problem struct {
	Kind       ProblemKind
	Collection string      // empty for file-level problems
	ID         uuidv7.UUID // zero unless the problem is one record
	Key        []byte      // the raw key, for key problems
	Detail     string
}

func (p Problem) String() string {
	s := string(p.Kind)
	if p.Collection != "" {
		s += " " + strconv.Quote(p.Collection)
	}
	if !p.ID.IsZero() {
		s += " id " + p.ID.String()
	} else if p.Key != nil {
		s += fmt.Sprintf(" key %x", p.Key)
	}
	return s + ": " + p.Detail
}

// VerifyReport summarises a Verify or Repair run.
type VerifyReport struct {
	Collections int
	Records     int
	Problems    int
	Quarantined int // Repair only: records moved out of the collection
	Recounted   int // Repair only: collections whose counters were rewritten
	Reindexed   int // Repair only: indexes rebuilt from the records
}

// CompactReport says what Compact did, for the source and the copy alike:
// the apparent size (what ls shows), the space the file system allocated
// for it (what du shows: bbolt grows a file sparsely, so the two differ),
// and the bytes of pages that hold data rather than free space.
type CompactReport struct {
	SrcSize, SrcAllocated, SrcInUse int64
	DstSize, DstAllocated, DstInUse int64
}

// Reclaimed is the disk space the compacted copy saves: the difference in
// allocated space, never negative (a small, sparse source can take less
// space than its packed copy).
func (r CompactReport) Reclaimed() int64 { return max(0, r.SrcAllocated-r.DstAllocated) }

// CopyPhase says what a copy is doing.
type CopyPhase string

const (
	PhaseCopy   CopyPhase = "copy"
	PhaseVerify CopyPhase = "verify"
)

// CopyProgress counts a copy's work. In PhaseCopy the counts are of what
// this run wrote; in PhaseVerify, of what the verification compared.
type CopyProgress struct {
	Phase   CopyPhase
	Batches int
	Buckets int64 // nested buckets
	Keys    int64 // keys holding values
	Bytes   int64 // bytes of keys and values, bucket names included
	Records int64 // the records among Keys
	// TotalRecords is the source's records, from its collections'
	// counters; ResumedRecords those of them an earlier run copied, as far
	// as whole collections tell (the collection it stopped in counts as
	// not copied).
	TotalRecords   int64
	ResumedRecords int64
}

// CopyReport is what a copy did and found.
type CopyReport struct {
	Source, Destination string // the databases' paths (a URL without its password)
	// ResumedAt is the last entry an earlier run had copied, empty when
	// this run started the copy.
	ResumedAt string
	Copied    CopyProgress // what this run wrote
	// The store as verified, the same on both sides.
	Buckets, Keys, Bytes int64
	Collections          int
	Records              int64
	Checksum             [32]byte // SHA-256 of the ordered stream of entries
}

// JobState is where a job is in its life.
type JobState uint8

const (
	JobPending JobState = 1 // waiting to be claimed
	JobClaimed JobState = 2 // leased to a worker until LeaseUntil
	JobDone    JobState = 3 // completed; kept until purged
	JobDead    JobState = 4 // failed its last allowed attempt
)

func (s JobState) String() string {
	switch s {
	case JobPending:
		return "pending"
	case JobClaimed:
		return "claimed"
	case JobDone:
		return "done"
	case JobDead:
		return "dead"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}
