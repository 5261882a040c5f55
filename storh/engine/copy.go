package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/internal/connstr"
	"github.com/storhdb/storh-go/storh/kv"
)

// Copying a whole store to another one, backend to backend (storh migrate).
//
// The copy is made below the engine, key by key, so that everything comes
// across as it is: collections of every kind with their counters, index
// definitions and entries, queue states and sequences, quarantines, and the
// database's own metadata. Every entry of the store is a path of keys, from
// a top-level bucket down to its own key, and the copy visits the paths in
// one fixed order (depth first, keys in order, a nested bucket's entries
// right after the bucket's own key), in transactions of a bounded size.
//
// Each of the destination's transactions also writes, into the database
// metadata bucket, the source's name and the path of the last entry it
// copied. Since the write is in the same transaction as the entries, the
// destination always holds exactly the entries up to that path: a copy that
// stopped (a cancel, an error, a killed process) resumes right after it.
// The position is written rather than read back from the destination's
// largest key because the destination's own metadata bucket exists before
// anything is copied and sorts after "\x00quarantine", and an empty bucket
// would leave no key to find.
//
// The copy checks that the source did not change only at the end: a full
// comparison of both stores, entry by entry, which also gives the SHA-256
// of the stream. A source written to between or during runs fails it, and
// the destination then has to be emptied and the copy started over.

// keyMigrating, in the destination's metadata bucket, marks a copy in
// progress: the source's name and the last entry copied. It is removed once
// the copy is verified.
var keyMigrating = []byte("migrating")

// CopyOptions configure CopyTo. The zero value gives the defaults.
type CopyOptions struct {
	// BatchKeys and BatchBytes bound one transaction of the destination:
	// it ends after BatchKeys entries or BatchBytes bytes of keys and
	// values, whichever comes first (at least one entry, however large).
	BatchKeys  int
	BatchBytes int
	// Progress, if set, is called with the counts so far: once before the
	// first batch, after every batch (between transactions), and every
	// few thousand entries of the verification (whose transactions are
	// open then: it must not call the two databases).
	Progress func(api.CopyProgress)
}

const (
	defaultCopyBatchKeys  = 1000
	defaultCopyBatchBytes = 4 << 20
)

// CopyTo copies the whole database into dst, which must be empty (its own
// format marker aside) or hold an unfinished copy from this database (the
// same Path), which it then resumes. It verifies the result before it
// returns: every entry of both stores is compared, and the collections'
// statistics. A destination that is not empty fails with ErrNotEmpty and is
// left unchanged; a difference found at the end fails with a
// *errs.MismatchError, and the destination keeps its mark of an unfinished copy.
//
// The source must not be written while it is copied: the copy reads it in
// one short transaction per batch, so a write between them would be copied
// in part, and the verification reports it.
//
// CopyTo checks ctx between batches and every few thousand entries of the
// verification. An interrupted copy keeps what it copied; calling CopyTo
// again resumes it.
func (db *DB) CopyTo(ctx context.Context, dst *DB, opts CopyOptions) (api.CopyReport, error) {
	rep := api.CopyReport{Source: db.path, Destination: dst.path}
	if opts.BatchKeys <= 0 {
		opts.BatchKeys = defaultCopyBatchKeys
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = defaultCopyBatchBytes
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(api.CopyProgress) {}
	}
	if dst == db {
		return rep, errors.New("storh: the source and the destination are the same database")
	}
	if dst.opts.ReadOnly {
		return rep, fmt.Errorf("%w: the destination is open read-only", errs.ErrReadOnly)
	}
	if err := db.Enter(); err != nil {
		return rep, err
	}
	defer db.Exit()
	if err := dst.Enter(); err != nil {
		return rep, err
	}
	defer dst.Exit()
	if err := ctx.Err(); err != nil {
		return rep, err
	}

	stats, err := db.copySource()
	if err != nil {
		return rep, err
	}
	pos, err := dst.startCopy(db.path)
	if err != nil {
		return rep, err
	}
	done := &rep.Copied
	done.Phase = api.PhaseCopy
	for _, s := range stats {
		done.TotalRecords += int64(s.Records)
		if copiedBefore(s.Name, pos) {
			done.ResumedRecords += int64(s.Records)
		}
	}
	if pos != nil {
		rep.ResumedAt = errs.KeyPath(pos)
	}
	progress(*done)

	for {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("interrupted after %d batches (run it again to resume): %w", done.Batches, err)
		}
		var b batch
		err := rerunConflicts(func() error {
			b = batch{from: pos, keys: opts.BatchKeys, bytes: opts.BatchBytes}
			return containPanic(func() error {
				return db.run(false, func(stx kv.Tx) error {
					return dst.run(true, func(dtx kv.Tx) error { return b.copy(stx, dtx, db.path) })
				})
			})
		})
		if err != nil {
			return rep, fmt.Errorf("copying after %s: %w", errs.KeyPath(pos), dst.commitErr(err))
		}
		if b.n.Buckets+b.n.Keys == 0 {
			break
		}
		pos = b.last
		done.Batches++
		done.Buckets += b.n.Buckets
		done.Keys += b.n.Keys
		done.Bytes += b.n.Bytes
		done.Records += b.n.Records
		progress(*done)
		if b.end {
			break
		}
	}

	if err := db.verifyCopy(ctx, dst, &rep, progress); err != nil {
		return rep, err
	}
	if err := compareStats(stats, dst, &rep); err != nil {
		return rep, err
	}
	// Verified: the destination is a finished copy, and stops being
	// resumable.
	err = rerunConflicts(func() error {
		return dst.run(true, func(tx kv.Tx) error {
			meta := tx.Bucket(dbMetaBucket)
			if meta == nil {
				return fmt.Errorf("%w: the destination lost its metadata bucket", errs.ErrCorrupt)
			}
			return meta.Delete(keyMigrating)
		})
	})
	return rep, dst.commitErr(err)
}

// copySource checks that the database can be the source of a copy and
// returns its collections' statistics.
func (db *DB) copySource() ([]CollStats, error) {
	var stats []CollStats
	err := db.ViewSafe(func(tx *Tx) error {
		meta := tx.ktx.Bucket(dbMetaBucket)
		if meta == nil {
			return fmt.Errorf("%w: no storh database at %s", errs.ErrNotFound, db.path)
		}
		if v := meta.Get(keyMigrating); v != nil {
			from, _, err := decodeMarker(v)
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: the source is itself an unfinished copy of %s, and may lack part of it: finish that copy first", errs.ErrMismatch, from)
		}
		var err error
		stats, err = tx.Collections()
		return err
	})
	return stats, err
}

// startCopy marks an empty database as the destination of a copy from
// source, or finds where an unfinished copy from source stopped (nil: at
// the start). Anything else is refused, and the database left unchanged.
func (db *DB) startCopy(source string) (pos [][]byte, err error) {
	err = rerunConflicts(func() error {
		return db.run(true, func(tx kv.Tx) error {
			meta := tx.Bucket(dbMetaBucket)
			if meta == nil {
				return fmt.Errorf("%w: the destination has no metadata bucket", errs.ErrCorrupt)
			}
			if v := meta.Get(keyMigrating); v != nil {
				from, at, err := decodeMarker(v)
				if err != nil {
					return err
				}
				if from != source {
					return fmt.Errorf("%w: it holds an unfinished copy from %s, not from %s", errs.ErrNotEmpty, from, source)
				}
				pos = at
				return nil
			}
			if what := notEmpty(tx, meta); what != "" {
				return fmt.Errorf("%w: it holds %s", errs.ErrNotEmpty, what)
			}
			return meta.Put(keyMigrating, encodeMarker(source, nil))
		})
	})
	return pos, mapStoreErr(err)
}

// notEmpty names what a database holds besides its format marker, or
// returns "".
func notEmpty(tx kv.Tx, meta kv.Bucket) string {
	c := tx.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if !bytes.Equal(k, dbMetaBucket) {
			if validateName(string(k)) == nil {
				return "collection " + quote(string(k))
			}
			return "bucket " + errs.KeyPath([][]byte{k})
		}
	}
	mc := meta.Cursor()
	for k, _ := mc.First(); k != nil; k, _ = mc.Next() {
		if !bytes.Equal(k, keyFormat) {
			return "metadata " + errs.KeyPath([][]byte{k})
		}
	}
	return ""
}

// copiedBefore reports whether every entry of the collection name comes
// at or before pos in the copy's order, so an earlier run copied it whole.
func copiedBefore(name string, pos [][]byte) bool {
	if len(pos) == 0 {
		return false
	}
	switch c := bytes.Compare([]byte(name), pos[0]); {
	case c < 0:
		return true
	case c > 0:
		return false
	}
	// Inside the collection: its records are whole once the copy is past
	// the records bucket.
	return len(pos) > 1 && bytes.Compare(pos[1], bucketRecords) > 0
}

// batch is one transaction of a copy: the entries after from, up to keys
// entries or bytes bytes.
type batch struct {
	from        [][]byte
	keys, bytes int

	n    api.CopyProgress // what it copied
	last [][]byte         // the last entry it copied, owned (not the source's memory)
	end  bool             // the source has no entry after last
}

func (b *batch) copy(src, dst kv.Tx, source string) error {
	w := walker{tx: src}
	w.seekAfter(b.from)
	var out dstBuckets
	var last [][]byte // the last entry copied (the walk's path is gone at the end)
	for b.n.Buckets+b.n.Keys < int64(b.keys) && b.n.Bytes < int64(b.bytes) {
		if !w.next() {
			b.end = true
			break
		}
		if w.skip() {
			continue
		}
		k := w.path[len(w.path)-1]
		if w.v == nil {
			if _, err := out.bucket(dst, w.path); err != nil {
				return fmt.Errorf("bucket %s: %w", errs.KeyPath(w.path), err)
			}
			b.n.Buckets++
		} else {
			parent, err := out.bucket(dst, w.path[:len(w.path)-1])
			if err == nil {
				// Values come from the source's transaction, open until this
				// one commits (kv: Put keeps the slice until then).
				err = parent.Put(k, w.v)
			}
			if err != nil {
				return fmt.Errorf("key %s: %w", errs.KeyPath(w.path), err)
			}
			b.n.Keys++
			if isRecord(w.path) {
				b.n.Records++
			}
		}
		b.n.Bytes += int64(len(k) + len(w.v))
		last = append(last[:0], w.path...)
	}
	if last == nil {
		b.last = b.from
		return nil
	}
	b.last = clonePath(last)
	meta := dst.Bucket(dbMetaBucket)
	if meta == nil {
		return fmt.Errorf("%w: the destination lost its metadata bucket", errs.ErrCorrupt)
	}
	return meta.Put(keyMigrating, encodeMarker(source, b.last))
}

// isRecord reports whether path is a record: a key of a collection's
// records bucket.
func isRecord(path [][]byte) bool {
	return len(path) == 3 && bytes.Equal(path[1], bucketRecords) && len(path[0]) > 0 && path[0][0] != 0
}

// dstBuckets keeps the destination's buckets along the path last written,
// creating them as needed: the walk goes down and up one level at a time,
// so most entries reuse the whole chain.
type dstBuckets struct {
	keys [][]byte
	bkts []kv.Bucket
}

// bucket returns the destination's bucket at path, nil for the top level.
func (d *dstBuckets) bucket(tx kv.Tx, path [][]byte) (kv.Bucket, error) {
	n := 0
	for n < len(d.keys) && n < len(path) && bytes.Equal(d.keys[n], path[n]) {
		n++
	}
	d.keys, d.bkts = d.keys[:n], d.bkts[:n]
	for i := n; i < len(path); i++ {
		var b kv.Bucket
		var err error
		if i == 0 {
			b, err = tx.CreateBucketIfNotExists(path[0])
		} else {
			b, err = d.bkts[i-1].CreateBucketIfNotExists(path[i])
		}
		if err != nil {
			return nil, mapStoreErr(err)
		}
		b.SetFillPercent(appendFillPercent) // keys arrive in order
		d.keys, d.bkts = append(d.keys, path[i]), append(d.bkts, b)
	}
	if len(path) == 0 {
		return nil, nil
	}
	return d.bkts[len(path)-1], nil
}

// walker visits every entry of a transaction in the copy's order. After a
// successful next, path holds the entry's keys (the source transaction's
// memory) and v its value, nil for a nested bucket.
type walker struct {
	tx    kv.Tx
	curs  []kv.Cursor // curs[d] walks the bucket at depth d
	bkts  []kv.Bucket // the buckets curs walk; nil for the top level
	path  [][]byte    // path[d] is curs[d]'s key
	v     []byte
	state walkState
}

type walkState uint8

const (
	walkStart   walkState = iota // nothing visited yet
	walkAt                       // path is the entry next last returned
	walkPending                  // path is the next entry, not yet returned (after a seek)
	walkDone
)

// next moves to the next entry: into the bucket just visited, else to the
// next key, else up and along.
func (w *walker) next() bool {
	switch w.state {
	case walkDone:
		return false
	case walkStart:
		w.curs, w.bkts = []kv.Cursor{w.tx.Cursor()}, []kv.Bucket{nil}
		k, v := w.curs[0].First()
		w.path, w.v = [][]byte{k}, v
	case walkAt:
		d := len(w.curs) - 1
		if b := w.child(); b != nil {
			c := b.Cursor()
			k, v := c.First()
			w.curs, w.bkts, w.path, w.v = append(w.curs, c), append(w.bkts, b), append(w.path, k), v
		} else {
			w.path[d], w.v = w.curs[d].Next()
		}
	}
	for w.path[len(w.path)-1] == nil {
		d := len(w.curs) - 1
		if d == 0 {
			w.state = walkDone
			return false
		}
		w.curs, w.bkts, w.path = w.curs[:d], w.bkts[:d], w.path[:d]
		w.path[d-1], w.v = w.curs[d-1].Next()
	}
	w.state = walkAt
	return true
}

// child returns the nested bucket of the entry at path, or nil when it
// holds a value.
func (w *walker) child() kv.Bucket {
	if w.v != nil {
		return nil
	}
	d := len(w.curs) - 1
	if d == 0 {
		return w.tx.Bucket(w.path[0])
	}
	return w.bkts[d].Bucket(w.path[d])
}

// seekAfter positions the walker so that next returns the first entry
// after pos in the copy's order (the first entry of all for an empty pos).
// Entries of pos's path that are gone, or that have turned from a bucket
// into a value, are passed over as the order places them: only a source
// changed since pos was copied has them, and the verification finds it.
func (w *walker) seekAfter(pos [][]byte) {
	w.state = walkStart
	if len(pos) == 0 {
		return
	}
	w.curs, w.bkts, w.path = []kv.Cursor{w.tx.Cursor()}, []kv.Bucket{nil}, nil
	for d := 0; ; d++ {
		k, v := w.curs[d].Seek(pos[d])
		w.path, w.v = append(w.path, k), v
		if k == nil || !bytes.Equal(k, pos[d]) {
			w.state = walkPending // the first key past pos at this depth, or the end of the bucket
			return
		}
		if d == len(pos)-1 || v != nil {
			// pos itself, or a value where pos's bucket was: both come at or
			// before pos, so the walk goes on after them (into pos's own
			// entries when pos is a bucket).
			w.state = walkAt
			return
		}
		b := w.child()
		if b == nil { // a failed read (kv.Tx.Err), which fails the transaction
			w.state = walkDone
			return
		}
		w.curs, w.bkts = append(w.curs, b.Cursor()), append(w.bkts, b)
	}
}

// skip reports whether the entry is the destination's own mark of a copy,
// which is not part of the store.
func (w *walker) skip() bool {
	return len(w.path) == 2 && bytes.Equal(w.path[0], dbMetaBucket) && bytes.Equal(w.path[1], keyMigrating)
}

// nextEntry is next without the entries skip leaves out.
func (w *walker) nextEntry() bool {
	for w.next() {
		if !w.skip() {
			return true
		}
	}
	return false
}

// verifyCopy compares the two stores entry by entry, each in one read
// transaction, and hashes the stream; the first difference is a
// *errs.MismatchError.
func (db *DB) verifyCopy(ctx context.Context, dst *DB, rep *api.CopyReport, progress func(api.CopyProgress)) error {
	pace := newPace(ctx)
	var n api.CopyProgress
	n.Phase, n.TotalRecords = api.PhaseVerify, rep.Copied.TotalRecords
	progress(n)
	h := sha256.New()
	var scratch []byte
	err := containPanic(func() error {
		return db.run(false, func(stx kv.Tx) error {
			return dst.run(false, func(dtx kv.Tx) error {
				a, b := walker{tx: stx}, walker{tx: dtx}
				for {
					okA, okB := a.nextEntry(), b.nextEntry()
					if !okA && !okB {
						return nil
					}
					switch c := comparePaths(a.path, b.path, okA, okB); {
					case c < 0:
						return mismatch(a.path, "missing from the destination")
					case c > 0:
						return mismatch(b.path, "in the destination only")
					case (a.v == nil) != (b.v == nil):
						return mismatch(a.path, "a bucket on one side and a value on the other")
					case !bytes.Equal(a.v, b.v):
						return mismatch(a.path, fmt.Sprintf("the values differ (%d bytes in the source, %d in the destination)", len(a.v), len(b.v)))
					}
					k := a.path[len(a.path)-1]
					scratch = appendEntry(scratch[:0], len(a.path), k, a.v)
					h.Write(scratch)
					if a.v == nil {
						n.Buckets++
					} else {
						n.Keys++
						if isRecord(a.path) {
							n.Records++
						}
					}
					n.Bytes += int64(len(k) + len(a.v))
					if err := pace.step(len(k) + len(a.v)); err != nil {
						return err
					}
					if (n.Buckets+n.Keys)%verifyProgressEvery == 0 {
						progress(n)
					}
				}
			})
		})
	})
	if pace.stopped(err) {
		return fmt.Errorf("interrupted while verifying (run it again to verify): %w", err)
	}
	if err != nil {
		var me *errs.MismatchError
		if errors.As(err, &me) {
			return err
		}
		return fmt.Errorf("verifying: %w", mapStoreErr(err))
	}
	progress(n)
	rep.Buckets, rep.Keys, rep.Bytes, rep.Records = n.Buckets, n.Keys, n.Bytes, n.Records
	h.Sum(rep.Checksum[:0])
	return nil
}

const verifyProgressEvery = 1 << 14

// compareStats compares the collections' statistics of the source (read
// before the copy) with the destination's: kind, records and bytes.
func compareStats(src []CollStats, dst *DB, rep *api.CopyReport) error {
	var got []CollStats
	if err := dst.ViewSafe(func(tx *Tx) error {
		var err error
		got, err = tx.Collections()
		return err
	}); err != nil {
		return fmt.Errorf("verifying: %w", err)
	}
	for i := 0; i < max(len(src), len(got)); i++ {
		switch {
		case i >= len(got) || i < len(src) && src[i].Name < got[i].Name:
			return &errs.MismatchError{Path: [][]byte{[]byte(src[i].Name)}, Collection: src[i].Name, Detail: "collection missing from the destination"}
		case i >= len(src) || got[i].Name < src[i].Name:
			return &errs.MismatchError{Path: [][]byte{[]byte(got[i].Name)}, Collection: got[i].Name, Detail: "collection in the destination only"}
		}
		s, d := src[i], got[i]
		if s.Kind != d.Kind || s.Records != d.Records || s.Bytes != d.Bytes {
			return &errs.MismatchError{Path: [][]byte{[]byte(s.Name)}, Collection: s.Name,
				Detail: fmt.Sprintf("the source has a %s of %d records (%d bytes), the destination a %s of %d records (%d bytes)",
					s.Kind, s.Records, s.Bytes, d.Kind, d.Records, d.Bytes)}
		}
	}
	rep.Collections = len(got)
	return nil
}

func mismatch(path [][]byte, detail string) error {
	e := &errs.MismatchError{Path: clonePath(path), Detail: detail}
	if len(path) > 0 && validateName(string(path[0])) == nil {
		e.Collection = string(path[0])
	}
	return e
}

// comparePaths orders two entries as the walk visits them: key by key, a
// bucket before its own entries. An entry that is not there (ok false)
// comes after every other.
func comparePaths(a, b [][]byte, okA, okB bool) int {
	switch {
	case !okA:
		return 1
	case !okB:
		return -1
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := bytes.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// appendEntry encodes one entry for the checksum: its depth, its key, and
// its value or the mark of a bucket. The depths and the order of the walk
// determine every path, so the stream determines the store.
func appendEntry(b []byte, depth int, k, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(depth))
	b = binary.AppendUvarint(b, uint64(len(k)))
	b = append(b, k...)
	if v == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func clonePath(path [][]byte) [][]byte {
	out := make([][]byte, len(path))
	for i, k := range path {
		out[i] = bytes.Clone(k)
	}
	return out
}

// The mark of a copy in progress: a version byte, the source's name, then
// the last entry copied, each key prefixed with its length (uvarints).
const markerVersion = 1

func encodeMarker(source string, pos [][]byte) []byte {
	b := []byte{markerVersion}
	b = binary.AppendUvarint(b, uint64(len(source)))
	b = append(b, source...)
	for _, k := range pos {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	return b
}

// decodeMarker reads a marker. Its source comes with its passwords masked,
// as the engine names a store (a copy made before storh masked a URL's
// password parameters recorded them): it goes into messages, and is
// compared with the source's masked name.
func decodeMarker(v []byte) (source string, pos [][]byte, err error) {
	bad := fmt.Errorf("%w: the mark of an unfinished copy (%q in the metadata bucket) is damaged", errs.ErrCorrupt, keyMigrating)
	if len(v) == 0 || v[0] != markerVersion {
		return "", nil, bad
	}
	v = v[1:]
	field := func() ([]byte, bool) {
		n, w := binary.Uvarint(v)
		if w <= 0 || n > uint64(len(v)-w) {
			return nil, false
		}
		f := v[w : w+int(n)]
		v = v[w+int(n):]
		return f, true
	}
	s, ok := field()
	if !ok {
		return "", nil, bad
	}
	for len(v) > 0 {
		k, ok := field()
		if !ok || len(k) == 0 {
			return "", nil, bad
		}
		pos = append(pos, bytes.Clone(k))
	}
	return connstr.Redact(string(s)), pos, nil
}
