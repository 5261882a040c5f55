package engine

import (
	"bytes"
	"fmt"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ProblemKind classifies what Verify found.
type ProblemKind string

const (
	ProblemFile     ProblemKind = "file"     // bbolt's own page consistency check
	ProblemLayout   ProblemKind = "layout"   // a collection's buckets or kind are missing or wrong
	ProblemKey      ProblemKind = "key"      // a record key that is not a 16-byte UUIDv7
	ProblemChecksum ProblemKind = "checksum" // a value whose header or CRC does not match
	ProblemDecode   ProblemKind = "decode"   // a value whose payload is not a valid record
	ProblemCounter  ProblemKind = "counter"  // count or bytes metadata disagree with the records
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
		s += " " + quote(p.Collection)
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
	Records     int64
	Problems    int
	Quarantined int // Repair only: records moved out of the collection
	Recounted   int // Repair only: collections whose counters were rewritten
}

// Verify checks the database in one transaction (a consistent view, which
// is what makes the counter check meaningful): bbolt's page check (skipped
// when colls names specific collections), then each collection's layout,
// every key, checksum and payload, and its counters. Problems are passed to
// report in the order found, once the transaction has ended: report is user
// code, and inside the transaction a call on the database would deadlock and
// a slow report would stall every writer. The caller must hold Enter.
//
// bbolt's page check reads the freelist, which writers change even while a
// read transaction is open, so on a writable database Verify runs in a write
// transaction that it rolls back: writers wait until it is done.
func (db *DB) Verify(colls []string, report func(Problem)) (VerifyReport, error) {
	var rep VerifyReport
	var found problems
	emit := func(p Problem) { rep.Problems++; found.add(p) }
	defer found.deliver(report)
	err := containPanic(func() error {
		btx, err := db.bolt.Begin(!db.opts.ReadOnly)
		if err != nil {
			return mapBoltErr(err)
		}
		defer btx.Rollback()
		return db.verifyTx(btx, colls, emit, &rep)
	})
	return rep, err
}

func (db *DB) verifyTx(btx *bolt.Tx, colls []string, emit func(Problem), rep *VerifyReport) error {
	names, err := collNames(btx, colls)
	if err != nil {
		return err
	}
	// Collections first, each walk with faults contained: a damaged page
	// becomes a problem of its collection and the others are still checked.
	damaged := false
	for _, name := range names {
		rep.Collections++
		err := containPanic(func() error {
			n, _ := verifyColl(btx, name, emit, nil)
			rep.Records += n
			return nil
		})
		if err != nil {
			damaged = true
			emit(Problem{Kind: ProblemFile, Collection: name, Detail: trim(err)})
		}
	}
	if len(colls) > 0 {
		return nil
	}
	// bbolt's page check runs in a goroutine of its own, beyond the reach of
	// containPanic, where reading a page past the end of the file is a fatal
	// fault. Run it only on a file that is long enough and whose pages the
	// walks above (and the one below, for buckets that are not collections)
	// could read without faulting.
	if size, err := fileSize(db.path); err == nil && size < btx.Size() {
		emit(Problem{Kind: ProblemFile, Detail: fmt.Sprintf("the file is damaged: truncated to %d bytes, but its pages need %d", size, btx.Size())})
		return nil
	}
	if err := containPanic(func() error { return walkAll(btx.Cursor(), 0) }); err != nil {
		emit(Problem{Kind: ProblemFile, Detail: trim(err)})
		damaged = true
	}
	if damaged {
		emit(Problem{Kind: ProblemFile, Detail: "bbolt's page check skipped: pages above are unreadable"})
		return nil
	}
	for err := range btx.Check() {
		emit(Problem{Kind: ProblemFile, Detail: err.Error()})
	}
	return nil
}

// walkAll reads every page reachable from c: keys, values and nested
// buckets, so that a fault shows up on this goroutine.
func walkAll(c *bolt.Cursor, depth int) error {
	if depth > 8 {
		return fmt.Errorf("%w: buckets nested deeper than storh ever writes", ErrCorrupt)
	}
	var sink byte
	for k, v := c.First(); k != nil; k, v = c.Next() {
		// bbolt's check compares keys byte by byte: a damaged element
		// header can point a key past the mapping, so touch both ends
		// here first (the mapping is contiguous, so the middle is mapped).
		if len(k) > 0 {
			sink ^= k[0] ^ k[len(k)-1]
		}
		if v == nil {
			if b := c.Bucket().Bucket(k); b != nil {
				if err := walkAll(b.Cursor(), depth+1); err != nil {
					return err
				}
			}
			continue
		}
		if len(v) > 0 {
			sink ^= v[0] ^ v[len(v)-1]
		}
	}
	walkSink.Store(uint32(sink)) // keeps the reads from being optimised away
	return nil
}

// walkSink is atomic because Verify may run on several databases at once.
var walkSink atomic.Uint32

// Repair moves every record that fails verification into the collection's
// quarantine bucket (kept for manual recovery, see Quarantined) and rewrites
// counters that disagree with the records, in one write transaction. The
// caller must hold Enter.
func (db *DB) Repair(colls []string, report func(Problem)) (VerifyReport, error) {
	var rep VerifyReport
	var found problems
	defer found.deliver(report)
	err := db.UpdateSafe(func(tx *Tx) error {
		found = problems{} // a retried transaction reports afresh
		names, err := collNames(tx.btx, colls)
		if err != nil {
			return err
		}
		for _, name := range names {
			rep.Collections++
			var bad [][]byte
			n, counters := verifyColl(tx.btx, name, func(p Problem) {
				rep.Problems++
				found.add(p)
			}, &bad)
			rep.Records += n
			root := tx.btx.Bucket([]byte(name))
			recs, meta := root.Bucket(bucketRecords), root.Bucket(bucketMeta)
			if recs == nil || meta == nil {
				continue // layout problems need a human: reported, not guessed at
			}
			if len(bad) > 0 {
				q, err := root.CreateBucketIfNotExists(bucketQuarantine)
				if err != nil {
					return mapBoltErr(err)
				}
				for _, k := range bad {
					if v := recs.Get(k); v != nil {
						if err := q.Put(k, append([]byte(nil), v...)); err != nil {
							return mapBoltErr(err)
						}
					}
					if err := recs.Delete(k); err != nil {
						return mapBoltErr(err)
					}
					rep.Quarantined++
				}
			}
			if len(bad) > 0 || !counters {
				var count, size int64
				c := recs.Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					if v == nil {
						continue // a stray bucket is not a record (verifyColl reports it)
					}
					count++
					size += int64(len(v))
				}
				if err := putInt(meta, keyCount, count); err != nil {
					return err
				}
				if err := putInt(meta, keyBytes, size); err != nil {
					return err
				}
				rep.Recounted++
			}
		}
		return nil
	})
	return rep, err
}

// problems collects findings for delivery after the transaction. Past
// maxListed it only counts, so a badly damaged file cannot exhaust memory.
type problems struct {
	list    []Problem
	dropped int
}

const maxListed = 100_000

func (ps *problems) add(p Problem) {
	if len(ps.list) < maxListed {
		ps.list = append(ps.list, p)
	} else {
		ps.dropped++
	}
}

func (ps *problems) deliver(report func(Problem)) {
	if report == nil {
		return
	}
	for _, p := range ps.list {
		report(p)
	}
	if ps.dropped > 0 {
		report(Problem{Kind: ProblemFile, Detail: fmt.Sprintf("%d more problems not listed", ps.dropped)})
	}
}

// bucketQuarantine holds records Repair moved out of a collection.
var bucketQuarantine = []byte("q")

// Quarantined returns the ids and raw stored values Repair moved out of
// collection name.
func (t *Tx) Quarantined(name string) (map[string][]byte, error) {
	root := t.btx.Bucket([]byte(name))
	if root == nil {
		return nil, fmt.Errorf("%w: collection %q does not exist", ErrNotFound, name)
	}
	out := map[string][]byte{}
	if q := root.Bucket(bucketQuarantine); q != nil {
		err := q.ForEach(func(k, v []byte) error {
			out[fmt.Sprintf("%x", k)] = append([]byte(nil), v...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func collNames(btx *bolt.Tx, want []string) ([]string, error) {
	if len(want) > 0 {
		for _, n := range want {
			if btx.Bucket([]byte(n)) == nil {
				return nil, fmt.Errorf("%w: collection %q does not exist", ErrNotFound, n)
			}
		}
		return want, nil
	}
	var names []string
	err := btx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		if !bytes.Equal(name, dbMetaBucket) {
			names = append(names, string(name))
		}
		return nil
	})
	return names, err
}

// verifyColl checks one collection, returning its record count and whether
// the counters agree. Keys of bad records are appended to bad when non-nil.
func verifyColl(btx *bolt.Tx, name string, emit func(Problem), bad *[][]byte) (int64, bool) {
	root := btx.Bucket([]byte(name))
	if root == nil {
		emit(Problem{Kind: ProblemLayout, Collection: name, Detail: "top-level key is not a bucket"})
		return 0, true
	}
	meta, recs := root.Bucket(bucketMeta), root.Bucket(bucketRecords)
	if meta == nil || recs == nil {
		emit(Problem{Kind: ProblemLayout, Collection: name, Detail: "missing its " + missing(meta, recs) + " bucket"})
		return 0, true
	}
	if k := meta.Get(keyKind); len(k) != 1 || Kind(k[0]) < KindDocs || Kind(k[0]) > KindQueue {
		emit(Problem{Kind: ProblemLayout, Collection: name, Detail: fmt.Sprintf("invalid kind %x", k)})
	}
	var n, size int64
	c := recs.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var id uuidv7.UUID
		switch {
		case len(k) != len(id):
			emit(Problem{Kind: ProblemKey, Collection: name, Key: append([]byte(nil), k...), Detail: fmt.Sprintf("key is %d bytes, not 16", len(k))})
		case v == nil:
			copy(id[:], k)
			emit(Problem{Kind: ProblemKey, Collection: name, ID: id, Detail: "a nested bucket where a record should be"})
			continue // a bucket cannot be moved like a value; report only
		default:
			copy(id[:], k)
			if !id.IsV7() {
				emit(Problem{Kind: ProblemKey, Collection: name, ID: id, Detail: "key is not a UUIDv7"})
				break
			}
			payload, err := Payload(k, v)
			if err != nil {
				emit(Problem{Kind: ProblemChecksum, Collection: name, ID: id, Detail: trim(err)})
				break
			}
			if err := mpack.ValidateRecord(payload); err != nil {
				emit(Problem{Kind: ProblemDecode, Collection: name, ID: id, Detail: err.Error()})
				break
			}
			n++
			size += int64(len(v))
			continue
		}
		// Only problem records reach here.
		n++
		size += int64(len(v))
		if bad != nil {
			*bad = append(*bad, append([]byte(nil), k...))
		}
	}
	count, bytesStored := getInt(meta, keyCount), getInt(meta, keyBytes)
	ok := count == n && bytesStored == size
	if !ok {
		emit(Problem{Kind: ProblemCounter, Collection: name,
			Detail: fmt.Sprintf("metadata says %d records / %d bytes, the records bucket holds %d / %d", count, bytesStored, n, size)})
	}
	return n, ok
}

func trim(err error) string {
	s := err.Error()
	if len(s) > 7 && s[:7] == "storh: " {
		return s[7:]
	}
	return s
}
