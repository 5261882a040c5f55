package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/storhdb/storh-go/storh/engine/internal/boltpage"
	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// pace checks a context while a long walk runs: every paceKeys steps or
// paceBytes bytes of values, whichever comes first, so a cancel takes effect
// within a few milliseconds of work while the check itself costs nothing
// measurable. Once the context is done every later step returns its error,
// so a walk that missed one check stops at the next. A nil *pace never
// stops (for callers that have no context, such as the invariant checks).
type pace struct {
	ctx         context.Context
	keys, bytes int
	err         error // ctx.Err() once seen
}

const (
	paceKeys  = 2048
	paceBytes = 4 << 20
)

func newPace(ctx context.Context) *pace { return &pace{ctx: ctx} }

// step counts one key of size value bytes and checks the context when
// enough work has passed since the last check.
func (p *pace) step(size int) error {
	if p == nil {
		return nil
	}
	if p.err != nil {
		return p.err
	}
	p.keys++
	p.bytes += size
	if p.keys < paceKeys && p.bytes < paceBytes {
		return nil
	}
	p.keys, p.bytes = 0, 0
	return p.check()
}

// check checks the context now.
func (p *pace) check() error {
	if p == nil {
		return nil
	}
	if p.err == nil {
		p.err = p.ctx.Err()
	}
	return p.err
}

// stopped reports whether err is the context's error that stopped the walk
// (and not a failure that happened to come first).
func (p *pace) stopped(err error) bool {
	return p != nil && p.err != nil && err != nil && errors.Is(err, p.err)
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
//
// Verify checks ctx before it starts, every few thousand keys (or few MiB
// of values) of its walks, and before bbolt's page check. A done ctx ends it
// with an error wrapping ctx.Err(): the report and the problems delivered
// cover what was checked until then. bbolt's page check cannot be
// interrupted (it runs on a goroutine of bbolt's that reads the
// transaction's pages until it is done): a cancel during it stops the
// reporting, and Verify waits for the check to end before it rolls back,
// so neither the goroutine nor the transaction outlives the call.
func (db *DB) Verify(ctx context.Context, colls []string, report func(api.Problem)) (api.VerifyReport, error) {
	var rep api.VerifyReport
	var found problems
	emit := func(p api.Problem) { rep.Problems++; found.add(p) }
	defer found.deliver(report)
	pace := newPace(ctx)
	err := pace.check()
	if err == nil && db.file.fd != nil {
		// A file cut short under the open database is not damage to
		// report: the DB has lost its file (file_failure.go).
		err = db.checkFile()
	}
	if err == nil {
		err = containPanic(func() error {
			ktx, err := db.store.Begin(!db.opts.ReadOnly && db.file.bolt != nil)
			if err != nil {
				return mapStoreErr(err)
			}
			defer ktx.Rollback()
			if err := db.verifyTx(ktx, colls, emit, &rep, pace); err != nil {
				return err
			}
			for _, f := range db.blocked.mems.foldFailures(colls) {
				emit(api.Problem{Kind: api.ProblemIndex, Collection: f.coll,
					Detail: fmt.Sprintf("index %q: its last fold in this process failed, and is tried again after the next write: %s", f.index, trim(f.err))})
			}
			return mapStoreErr(ktx.Err())
		})
	}
	if pace.stopped(err) {
		return rep, fmt.Errorf("cancelled before the end: the report covers what was checked until then: %w", err)
	}
	return rep, err
}

func (db *DB) verifyTx(ktx kv.Tx, colls []string, emit func(api.Problem), rep *api.VerifyReport, pace *pace) error {
	btx := boltOf(ktx)
	// The page structure first: a tree with a cycle or an element past its
	// page would hang or fault the walks below and bbolt's check.
	var broken map[string]bool
	if btx != nil {
		var err error
		broken, err = damagedTrees(db.file.fd, btx, colls, pace, emit)
		if err != nil || broken[""] {
			return err
		}
	}
	names, strays, err := topLevel(ktx, colls, pace)
	if err != nil {
		return err
	}
	for _, st := range strays {
		emit(st.problem)
	}
	// Collections first, each walk with faults contained: a damaged page
	// becomes a problem of its collection and the others are still checked.
	damaged := len(broken) > 0
	for _, name := range names {
		if broken[name] {
			rep.Collections++
			continue
		}
		err := containPanic(func() error {
			f, err := checkColl(ktx, name, emit, pace)
			rep.Records += int(f.records)
			if err != nil || !f.layoutOK {
				return err
			}
			if c, err := openColl(ktx, name); err == nil && c != nil {
				c.oldPending = db.oldPending
				if _, err := checkIndexesPaced(c, emit, pace); err != nil || c.Kind != KindQueue {
					return err
				}
				_, err := checkQueue(c, emit, pace)
				return err
			}
			return nil
		})
		if pace.stopped(err) {
			return err
		}
		rep.Collections++
		if err != nil {
			damaged = true
			emit(api.Problem{Kind: api.ProblemFile, Collection: name, Detail: trim(err)})
		}
	}
	if len(colls) > 0 || btx == nil {
		return nil
	}
	// bbolt's page check runs in a goroutine of its own, beyond the reach of
	// containPanic, where reading a page past the end of the file is a fatal
	// fault. Run it only on a file that is long enough and whose pages the
	// walks above (and the one below, for buckets that are not collections)
	// could read without faulting.
	if fi, err := db.file.fd.Stat(); err == nil && fi.Size() < btx.Size() {
		emit(api.Problem{Kind: api.ProblemFile, Detail: fmt.Sprintf("the file is damaged: truncated to %d bytes, but its pages need %d", fi.Size(), btx.Size())})
		return nil
	}
	if len(broken) > 0 {
		emit(api.Problem{Kind: api.ProblemFile, Detail: "bbolt's page check skipped: damaged pages above"})
		return nil
	}
	if err := containPanic(func() error { return walkAll(btx.Cursor(), 0, pace) }); err != nil {
		if pace.stopped(err) {
			return err
		}
		emit(api.Problem{Kind: api.ProblemFile, Detail: trim(err)})
		damaged = true
	}
	if damaged {
		emit(api.Problem{Kind: api.ProblemFile, Detail: "bbolt's page check skipped: pages above are unreadable"})
		return nil
	}
	if err := pace.check(); err != nil {
		return err
	}
	return pageCheck(btx.Check(), emit, pace)
}

// damagedTrees runs the structural page check (boltpage.Check) for Verify
// and Repair and reports each finding as a problem of the top-level bucket
// it lies under: of its collection when the bucket is one. It returns
// the top-level buckets whose pages are damaged ("" when the root tree
// itself is): nothing may walk them.
func damagedTrees(f io.ReaderAt, btx *bolt.Tx, only []string, pace *pace, emit func(api.Problem)) (map[string]bool, error) {
	var bad map[string]bool
	err := boltpage.Check(f, btx, only, pace.step, func(top, detail string) {
		if bad == nil {
			bad = map[string]bool{}
		}
		p := api.Problem{Kind: api.ProblemFile, Detail: "damaged pages: " + detail}
		if top != "" && validateName(top) == nil {
			p.Collection = top
		} else if top != "" {
			p.Key = []byte(top)
		}
		if !bad[top] {
			p.Detail += treeHint(top)
		}
		bad[top] = true
		emit(p)
	})
	return bad, err
}

func treeHint(top string) string {
	if top == "" {
		return "; the file's root is damaged, so nothing else is checked: restore a backup"
	}
	return "; its records are not checked and cannot be repaired in place: restore a backup, or export the records Get can still read"
}

// pageCheck reads bbolt's page check to its end: the check's goroutine
// reads the transaction's pages until it closes the channel, so the
// transaction must not end before that, and a channel left unread would
// block the goroutine forever. Once the context is done it stops reporting
// (checking it every few thousand findings, on a badly damaged file) and
// only drains; it returns the context's error if it saw one.
func pageCheck(found <-chan error, emit func(api.Problem), pace *pace) error {
	for err := range found {
		if pace.step(0) == nil {
			emit(api.Problem{Kind: api.ProblemFile, Detail: err.Error()})
		}
	}
	if pace == nil {
		return nil
	}
	return pace.err
}

// walkAll reads every page reachable from c: keys, values and nested
// buckets, so that a fault shows up on this goroutine.
func walkAll(c *bolt.Cursor, depth int, pace *pace) error {
	if depth > 8 {
		return fmt.Errorf("%w: buckets nested deeper than storh ever writes", errs.ErrCorrupt)
	}
	var sink byte
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := pace.step(len(v)); err != nil {
			return err
		}
		// bbolt's check compares keys byte by byte: a damaged element
		// header can point a key past the mapping, so touch both ends
		// here first (the mapping is contiguous, so the middle is mapped).
		if len(k) > 0 {
			sink ^= k[0] ^ k[len(k)-1]
		}
		if v == nil {
			if b := c.Bucket().Bucket(k); b != nil {
				if err := walkAll(b.Cursor(), depth+1, pace); err != nil {
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

// Repair moves every entry that fails verification out of its place into a
// quarantine bucket, kept in the file for manual recovery, and rewrites
// counters that disagree with the records, in one write transaction. Bad
// values and nested buckets inside a collection go to the collection's
// quarantine ("q"), under their own key; stray entries at the top level of
// the file go to the database's quarantine ("\x00quarantine"). Missing
// layout buckets are reported, not guessed at. The caller must hold Enter.
//
// Repair checks ctx as Verify does, and also between the moves, the
// recounts and each step of an index rebuild. A done ctx rolls the whole
// transaction back, so nothing of the repair is kept: the error wraps
// ctx.Err() and says so, and the report counts what was found until then
// and no repairs.
func (db *DB) Repair(ctx context.Context, colls []string, report func(api.Problem)) (api.VerifyReport, error) {
	var rep api.VerifyReport
	var found problems
	defer found.deliver(report)
	pace := newPace(ctx)
	err := pace.check()
	if err == nil {
		err = db.UpdateSafe(func(tx *Tx) error {
			rep, found = api.VerifyReport{}, problems{} // a retried transaction reports afresh
			return tx.repair(colls, func(p api.Problem) { rep.Problems++; found.add(p) }, &rep, pace)
		})
	}

	if pace.stopped(err) {
		rep.Quarantined, rep.Recounted, rep.Reindexed = 0, 0, 0
		return rep, fmt.Errorf("cancelled: the transaction rolled back and nothing was repaired: %w", err)
	}
	return rep, err
}

// repair is Repair's transaction.
func (t *Tx) repair(colls []string, emit func(api.Problem), rep *api.VerifyReport, pace *pace) error {
	var broken map[string]bool
	if t.btx != nil {
		var err error
		if broken, err = damagedTrees(t.db.file.fd, t.btx, colls, pace, emit); err != nil {
			return err
		}
	}
	if broken[""] {
		return fmt.Errorf("%w: the file's root pages are damaged: Repair cannot fix them in place; restore a backup", errs.ErrCorrupt)
	}
	names, strays, err := topLevel(t.ktx, colls, pace)
	if err != nil {
		return err
	}
	// Strays at the top level are what damage to a file leaves: only a
	// bbolt root holds values beside buckets.
	if len(strays) > 0 && t.btx != nil {
		q, err := t.ktx.CreateBucketIfNotExists(dbQuarantineBucket)
		if err != nil {
			return mapStoreErr(err)
		}
		for _, st := range strays {
			if err := pace.step(0); err != nil {
				return err
			}
			emit(st.problem)
			if broken[string(st.entry.key)] {
				continue // its pages are damaged: moving it would walk them
			}
			if err := quarantine(wrapBucket(t.btx.Cursor().Bucket()), st.entry, q); err != nil {
				return err
			}
			rep.Quarantined++
		}
	}
	for _, name := range names {
		if broken[name] {
			rep.Collections++
			continue // reported: its pages cannot be walked, let alone repaired
		}
		found, err := checkColl(t.ktx, name, emit, pace)
		rep.Records += int(found.records)
		if err != nil {
			return err
		}
		rep.Collections++
		if !found.layoutOK {
			continue // layout problems need a human: reported, not guessed at
		}
		root := t.ktx.Bucket([]byte(name))
		recs, meta := root.Bucket(bucketRecords), root.Bucket(bucketMeta)
		if len(found.bad)+len(found.strays) > 0 {
			q, err := root.CreateBucketIfNotExists(bucketQuarantine)
			if err != nil {
				return mapStoreErr(err)
			}
			// Recorded first, with the values as they are here: to the
			// feed, the values a put of them committed.
			if err := t.feedQuarantined(name, found.bad); err != nil {
				return err
			}
			for _, e := range found.bad {
				if err := pace.step(0); err != nil {
					return err
				}
				if err := quarantine(recs, e, q); err != nil {
					return err
				}
			}
			for _, e := range found.strays {
				if err := pace.step(0); err != nil {
					return err
				}
				if err := quarantine(root, e, q); err != nil {
					return err
				}
			}
			rep.Quarantined += len(found.bad) + len(found.strays)
		}
		if len(found.bad) > 0 || !found.countersOK {
			var count, size int64
			c := recs.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if err := pace.step(0); err != nil { // no values read: keys are what costs
					return err
				}
				if v != nil { // every value; nested buckets are not records
					count++
					size += int64(len(v))
				}
			}
			if err := putInt(meta, keyCount, count); err != nil {
				return err
			}
			if err := putInt(meta, keyBytes, size); err != nil {
				return err
			}
			for k := range readSlotRows(meta) {
				if strings.HasPrefix(k, string(collSlotPrefix)) {
					if err := meta.Delete([]byte(k)); err != nil {
						return mapStoreErr(err)
					}
				}
			}
			rep.Recounted++
		}
		if err := t.repairIndexes(name, emit, rep, pace); err != nil {
			return err
		}
		if err := t.checkRepairQueue(name, emit, rep, pace); err != nil {
			return err
		}
	}
	return nil
}

// feedQuarantined records in collection name's feed, if it has one, a
// delete of each record Repair moves out: to a reader of the feed the
// record is gone, as it is to every read. It runs before they are moved:
// a put of one before reads the value moved out, and reports it damaged.
func (t *Tx) feedQuarantined(name string, bad []entry) error {
	c, err := openColl(t.ktx, name)
	if err != nil || c == nil {
		return nil // its layout was checked: nothing to record in
	}
	for _, e := range bad {
		id, err := uuidv7.FromBytes(e.key)
		if e.bucket || err != nil {
			continue // not a record's key: no reader saw it as one
		}
		if err := t.recordChange(c, FeedDelete, id, c.records.Get(e.key), nil); err != nil {
			return err
		}
	}
	return c.flushFeed()
}

// checkRepairQueue checks a queue's jobs and rebuilds their indexes when
// they disagree with the states.
func (t *Tx) checkRepairQueue(name string, emit func(api.Problem), rep *api.VerifyReport, pace *pace) error {
	c, err := openColl(t.ktx, name)
	if err != nil || c == nil || c.Kind != KindQueue {
		return nil
	}
	c.oldPending = t.db != nil && t.db.oldPending
	bad, err := checkQueue(c, emit, pace)
	if err != nil || !bad {
		return err
	}
	if err := t.repairQueue(c, pace); err != nil {
		return err
	}
	rep.Reindexed++
	return nil
}

// repairIndexes rebuilds the indexes of collection name that fail their
// check. A unique index whose records now hold duplicate values cannot be
// rebuilt: it is dropped, and the problem says so.
func (t *Tx) repairIndexes(name string, emit func(api.Problem), rep *api.VerifyReport, pace *pace) error {
	c, err := openColl(t.ktx, name)
	if err != nil || c == nil {
		return nil // the layout problem is already reported
	}
	bad, err := checkIndexesPaced(c, emit, pace)
	if err != nil {
		return err
	}
	for _, ix := range bad {
		err := t.rebuildIndex(c, ix, pace)
		if errors.Is(err, errs.ErrUniqueViolation) {
			if err := t.DropIndex(c, ix.name); err != nil {
				return err
			}
			emit(api.Problem{Kind: api.ProblemIndex, Collection: name,
				Detail: fmt.Sprintf("index %q dropped: it cannot be rebuilt, %s; declare it again once the duplicates are gone", ix.name, trim(err))})
			continue
		}
		if err != nil {
			return err
		}
		rep.Reindexed++
		t.rebuilt = append(t.rebuilt, [2]string{name, ix.name})
	}
	return c.flushIndexes()
}

// entry is one key of a bucket that Repair moves: a value, or a nested
// bucket (bbolt reports a bucket as a key whose value is nil).
type entry struct {
	key    []byte
	bucket bool
}

// quarantine moves e out of src into q under the same key. A key that is
// already quarantined (an earlier Repair moved an entry of the same key)
// goes into the first overflow bucket "\x00<n>" inside q where it is free,
// so nothing quarantined is ever overwritten.
func quarantine(src kv.Bucket, e entry, q kv.Bucket) error {
	dst := q
	for n := 1; taken(dst, e.key); n++ {
		next, err := q.CreateBucketIfNotExists(fmt.Appendf(nil, "\x00%d", n))
		if err != nil {
			return mapStoreErr(err)
		}
		dst = next
	}
	if e.bucket {
		return mapStoreErr(moveBucket(src, e.key, dst))
	}
	if err := dst.Put(e.key, bytes.Clone(src.Get(e.key))); err != nil {
		return mapStoreErr(err)
	}
	return mapStoreErr(src.Delete(e.key))
}

// moveBucket moves the nested bucket key of src into dst under the same
// key: bbolt relinks its pages; elsewhere it is copied, then deleted.
func moveBucket(src kv.Bucket, key []byte, dst kv.Bucket) error {
	if s, ok := src.(boltBucket); ok {
		if d, ok := dst.(boltBucket); ok {
			return boltErr(s.b.MoveBucket(key, d.b))
		}
	}
	from := src.Bucket(key)
	if from == nil {
		return fmt.Errorf("%w: %x", kv.ErrBucketNotFound, key)
	}
	to, err := dst.CreateBucket(key)
	if err != nil {
		return err
	}
	if err := copyBucket(from, to); err != nil {
		return err
	}
	return src.DeleteBucket(key)
}

// copyBucket copies every key of from into the empty bucket to, nested
// buckets included.
func copyBucket(from, to kv.Bucket) error {
	c := from.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil {
			if err := to.Put(k, bytes.Clone(v)); err != nil {
				return err
			}
			continue
		}
		nested, err := to.CreateBucket(k)
		if err != nil {
			return err
		}
		if err := copyBucket(from.Bucket(k), nested); err != nil {
			return err
		}
	}
	return nil
}

// taken reports whether b holds key, as a value or as a bucket.
func taken(b kv.Bucket, key []byte) bool {
	k, _ := b.Cursor().Seek(key)
	return k != nil && bytes.Equal(k, key)
}

// problems collects findings for delivery after the transaction. Past
// maxListed it only counts, so a badly damaged file cannot exhaust memory.
type problems struct {
	list    []api.Problem
	dropped int
}

const maxListed = 100_000

func (ps *problems) add(p api.Problem) {
	if len(ps.list) < maxListed {
		ps.list = append(ps.list, p)
	} else {
		ps.dropped++
	}
}

func (ps *problems) deliver(report func(api.Problem)) {
	if report == nil {
		return
	}
	for _, p := range ps.list {
		report(p)
	}
	if ps.dropped > 0 {
		report(api.Problem{Kind: api.ProblemFile, Detail: fmt.Sprintf("%d more problems not listed", ps.dropped)})
	}
}

// Quarantine buckets: a collection's ("q", inside it) and the database's
// (at the top level, for entries that are not collections). Both names are
// outside what a record key or a collection name can be mistaken for by the
// layout checks: "q" sits next to "m" and "r", and collection names are
// printable, so they never start with a NUL byte.
var (
	bucketQuarantine   = []byte("q")
	dbQuarantineBucket = []byte("\x00quarantine")
)

// stray is a top-level entry that is not a collection.
type stray struct {
	entry   entry
	problem api.Problem
}

// topLevel returns the collections to check: want, all of which must exist,
// or every collection in the file. Without want it also returns the stray
// top-level entries: values, and buckets whose names no collection can have.
func topLevel(btx kv.Tx, want []string, pace *pace) ([]string, []stray, error) {
	if len(want) > 0 {
		for _, n := range want {
			if btx.Bucket([]byte(n)) == nil {
				return nil, nil, errNoColl{n}
			}
		}
		return want, nil, nil
	}
	var names []string
	var strays []stray
	c := btx.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := pace.step(len(v)); err != nil {
			return nil, nil, err
		}
		switch {
		case bytes.Equal(k, dbMetaBucket), bytes.Equal(k, dbQuarantineBucket):
		case v != nil:
			strays = append(strays, stray{entry{key: bytes.Clone(k)},
				api.Problem{Kind: api.ProblemLayout, Key: bytes.Clone(k), Detail: "a value at the top level of the file, where only collections belong"}})
		case validateName(string(k)) != nil:
			strays = append(strays, stray{entry{key: bytes.Clone(k), bucket: true},
				api.Problem{Kind: api.ProblemLayout, Key: bytes.Clone(k), Detail: "a bucket whose name is not a valid collection name"}})
		default:
			names = append(names, string(k))
		}
	}
	return names, strays, nil
}

// collFindings is what checkColl found in one collection.
type collFindings struct {
	records, bytes int64   // value entries of the records bucket, whatever their state: what the counters count
	bad            []entry // records-bucket entries that are not valid records
	strays         []entry // entries of the collection's bucket other than its own buckets
	layoutOK       bool    // the metadata and records buckets exist
	countersOK     bool
}

// checkColl checks one collection and reports each problem to emit: the
// layout (its metadata and records buckets, its kind, nothing else beside
// them), every entry of the records bucket (a 16-byte UUIDv7 key holding a
// value whose checksum and encoding are sound; a short key, a foreign key or
// a nested bucket is a problem, whatever it holds), and the counters, which
// count the values in the records bucket (nested buckets are not records).
// It returns early, with pace's error and without the counter check, when
// the context is done.
func checkColl(btx kv.Tx, name string, emit func(api.Problem), pace *pace) (collFindings, error) {
	var f collFindings
	root := btx.Bucket([]byte(name))
	meta, recs := root.Bucket(bucketMeta), root.Bucket(bucketRecords)
	rc := root.Cursor()
	for k, v := rc.First(); k != nil; k, v = rc.Next() {
		if err := pace.step(len(v)); err != nil {
			return f, err
		}
		isBucket := v == nil
		own := isBucket && (bytes.Equal(k, bucketMeta) || bytes.Equal(k, bucketRecords) || bytes.Equal(k, bucketQuarantine) ||
			bytes.Equal(k, bucketIndexDefs) || bytes.Equal(k, bucketIndexEntries) || bytes.Equal(k, bucketIndexJournal) ||
			bytes.Equal(k, bucketIndexClaims) || bytes.Equal(k, bucketJobs) || bytes.Equal(k, bucketFeed) ||
			bytes.Equal(k, bucketFeedBefore))
		if own {
			continue
		}
		what := "a value"
		if isBucket {
			what = "a bucket"
		}
		emit(api.Problem{Kind: api.ProblemLayout, Collection: name, Key: bytes.Clone(k), Detail: what + " beside the collection's own buckets"})
		f.strays = append(f.strays, entry{key: bytes.Clone(k), bucket: isBucket})
	}
	if meta == nil || recs == nil {
		emit(api.Problem{Kind: api.ProblemLayout, Collection: name, Detail: "missing its " + missing(meta, recs) + " bucket"})
		f.strays = nil // moving entries out of a broken layout is for a human
		return f, nil
	}
	f.layoutOK = true
	if k := meta.Get(keyKind); len(k) != 1 || Kind(k[0]) < KindDocs || Kind(k[0]) > KindQueue {
		emit(api.Problem{Kind: api.ProblemLayout, Collection: name, Detail: fmt.Sprintf("invalid kind %x", k)})
	}
	c := recs.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := pace.step(len(v)); err != nil {
			return f, err
		}
		var id uuidv7.UUID
		if len(k) == len(id) {
			copy(id[:], k)
		}
		p := api.Problem{Collection: name, ID: id, Kind: api.ProblemKey}
		if id.IsZero() {
			p.Key = bytes.Clone(k)
		}
		switch {
		case v == nil:
			p.Detail = fmt.Sprintf("a nested bucket where a record should be (key of %d bytes)", len(k))
		case len(k) != len(id):
			p.Detail = fmt.Sprintf("key is %d bytes, not 16", len(k))
		case !id.IsV7():
			p.Detail = "key is not a UUIDv7"
		default:
			if payload, err := Payload(k, v); err != nil {
				p.Kind, p.Detail = api.ProblemChecksum, trim(err)
			} else if err := mpack.ValidateRecord(payload); err != nil {
				p.Kind, p.Detail = api.ProblemDecode, err.Error()
			}
		}
		if v != nil {
			f.records++
			f.bytes += int64(len(v))
		}
		if p.Detail != "" {
			emit(p)
			f.bad = append(f.bad, entry{key: bytes.Clone(k), bucket: v == nil})
		}
	}
	slots, bad := collSlotSum(readSlotRows(meta))
	for _, k := range bad {
		emit(api.Problem{Kind: api.ProblemCounter, Collection: name, Detail: fmt.Sprintf("counter slot %x is not %d bytes", k, collSlotSize)})
	}
	count, bytesStored := getInt(meta, keyCount)+slots[0], getInt(meta, keyBytes)+slots[1]
	f.countersOK = count == f.records && bytesStored == f.bytes && len(bad) == 0
	if count != f.records || bytesStored != f.bytes {
		emit(api.Problem{Kind: api.ProblemCounter, Collection: name,
			Detail: fmt.Sprintf("metadata says %d records / %d bytes, the records bucket holds %d / %d", count, bytesStored, f.records, f.bytes)})
	}
	return f, nil
}

func trim(err error) string {
	s := err.Error()
	if len(s) > 7 && s[:7] == "storh: " {
		return s[7:]
	}
	return s
}
