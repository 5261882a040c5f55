package engine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/kv"
)

// Folding a blocked index's journal into its blocks. A fold takes the
// changes journaled up to the moment it starts (FoldTo), walks them in key
// order, and rewrites each block they touch once, with all of that
// block's changes, then removes the folded records from the journal. Each
// fold transaction writes a bounded amount (tune.IndexFoldStepBytes) and
// records where the next one starts (FoldNext), so a fold of a large index
// lets writers in between, and a crash resumes it. Since applying a change
// again is harmless, a reader sees the same entries before, during and
// after a fold.
//
// A fold is due once the journal holds half as many changes as the index
// has entries (within tune bounds): a fold then rewrites at most every
// block once for as many changes as the index holds entries, so its cost
// per change stays flat however large the index grows, and the memory
// the journal's view takes stays within IndexFoldMax changes.

// foldThreshold is the number of journaled changes at which an index of
// that many entries is folded.
func foldThreshold(entries int64) int64 {
	return min(max(entries/2, int64(tune.IndexFoldMin)), int64(tune.IndexFoldMax))
}

// foldDue reports whether ix should fold now (or finish a fold), or chain
// its blocks first.
func (ix *collIndex) foldDue() bool {
	d := &ix.def
	return d.Layout == layoutBlocks && (!d.Chained || d.FoldTo != 0 || d.Pending >= foldThreshold(d.Entries))
}

// foldStep folds changes of ix into its blocks, writing about budget bytes
// of blocks at most (at least one block); done reports that the fold is
// over. It runs in a transaction of its own, which changes nothing else.
// Blocks of version 1 are chained first, in steps of their own.
func (t *Tx) foldStep(c *Coll, ix *collIndex, budget int) (done bool, err error) {
	d := &ix.def
	if !d.Chained {
		if done, err := t.chainStep(ix, budget); err != nil || !done {
			return false, err
		}
		// Chained: the fold itself, if one is due, starts in the next step.
		return !ix.foldDue(), nil
	}
	if d.FoldTo == 0 {
		if d.Seq <= d.Floor {
			return true, nil
		}
		d.FoldTo, d.FoldNext = d.Seq, nil
	}
	ix.changed = true
	// Not committedView: a fold tries again where the last one failed.
	view, err := ix.journalView()
	if err != nil {
		return false, err
	}
	ops := &flatSource{ops: view.flatten(d.FoldTo)}
	if d.FoldNext == nil {
		ops.first()
	} else {
		ops.seek(d.FoldNext)
	}
	w := blockWriter{blocks: ix.entries}
	for k, _ := ops.current(); k != nil; k, _ = ops.current() {
		if w.written >= budget {
			d.FoldNext = bytes.Clone(k)
			return false, nil
		}
		if err := w.rewrite(ops); err != nil {
			return false, ix.blockErr(err)
		}
	}
	// Every change up to FoldTo is in the blocks: its records go.
	var folded [][]byte
	jc := ix.journal.Cursor()
	for k, v := jc.First(); k != nil && len(k) == 8 && binary.BigEndian.Uint64(k) <= d.FoldTo; k, v = jc.Next() {
		d.Pending -= journalCount(v)
		folded = append(folded, k)
	}
	for _, k := range folded {
		if err := ix.journal.Delete(k); err != nil {
			return false, mapStoreErr(err)
		}
	}
	d.Floor, d.FoldTo, d.FoldNext = d.FoldTo, 0, nil
	d.Pending = max(d.Pending, 0)
	ix.folded = true
	return true, nil
}

// chainStep rewrites the version-1 blocks of ix (a file of format 2) as
// chained blocks, in key order, in transactions of about budget bytes of
// blocks: the same entries under the same keys, the first block under
// headKey, each naming the next. Where it stands between steps is
// ChainNext, the key of the first block not chained yet; readers check
// the chain as far as it goes. A version-1 index holds nothing that tells
// a missing block, so before it rewrites anything the first step counts
// the index's entries: an index that holds fewer (or more) than its
// definition counts is left as it is, for Verify to report and Repair to
// rebuild, rather than sealed into a chain that would pass for whole.
func (t *Tx) chainStep(ix *collIndex, budget int) (done bool, err error) {
	d := &ix.def
	cur := ix.entries.Cursor()
	var k, v []byte
	if d.ChainNext == nil {
		if err := ix.countEntries(); err != nil {
			return false, err
		}
		if err := t.needFormat(formatChained); err != nil {
			return false, err
		}
		k, v = cur.First()
	} else if k, v = cur.Seek(d.ChainNext); !bytes.Equal(k, d.ChainNext) {
		return false, ix.blockErr(fmt.Errorf("%w: block %x, where chaining the blocks resumes, is not there", errBlockMissing, d.ChainNext))
	}
	ix.changed = true
	if k == nil {
		// An index with no blocks yet: the chain is its head alone.
		d.Chained = true
		return true, mapStoreErr(ix.entries.Put(headKey, appendBlock(nil, headKey, nil, nil)))
	}
	first, written := d.ChainNext == nil, 0
	for k != nil {
		if written >= budget {
			d.ChainNext = bytes.Clone(k)
			return false, nil
		}
		b, err := parseBlock(k, v)
		var entries [][]byte
		if err == nil && b.chained {
			err = fmt.Errorf("%w: a chained block among those of version 1", errBlock)
		}
		if err == nil {
			entries, _, err = b.entries(nil, make([]byte, 0, len(v)))
		}
		if err != nil {
			return false, ix.blockErr(fmt.Errorf("block %x: %w", k, err))
		}
		key := bytes.Clone(k)
		next, _ := cur.Next()
		next = bytes.Clone(next)
		if first {
			// The first block: filed under headKey from now on.
			if err := ix.entries.Delete(key); err != nil {
				return false, mapStoreErr(err)
			}
			key, first = headKey, false
		}
		nb := appendBlock(nil, key, entries, next)
		if err := ix.entries.Put(key, nb); err != nil {
			return false, mapStoreErr(err)
		}
		written += len(nb)
		if next == nil {
			break
		}
		if k, v = cur.Seek(next); !bytes.Equal(k, next) {
			return false, fmt.Errorf("storh: internal error: index %q: block %x vanished while chaining", ix.name, next)
		}
	}
	d.Chained, d.ChainNext = true, nil
	return true, nil
}

// countEntries checks that ix, read through its blocks and journal, holds
// as many entries as its definition counts.
func (ix *collIndex) countEntries() error {
	// The view as a fold takes it: the count is made again, whatever the
	// last fold found (committedView would fail with that).
	if _, err := ix.journalView(); err != nil {
		return err
	}
	cur, err := ix.cursor()
	if err != nil {
		return err
	}
	var n int64
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		n++
	}
	if err := cursorDamage(cur); err != nil {
		return err
	}
	if n != ix.def.Entries+ix.delta {
		return ix.blockErr(fmt.Errorf("its blocks and journal hold %d entries, its definition counts %d: a block may be missing", n, ix.def.Entries+ix.delta))
	}
	return nil
}

// blockWriter applies changes to the chained blocks of an index, one
// block (and the neighbours a shrunk block takes in) at a time.
type blockWriter struct {
	blocks  kv.Bucket
	written int
	merged  [][]byte // scratch
}

// rewrite applies every change of ops that falls in the range of the
// block holding ops' current key, then moves ops past them. The range
// keeps its bounds, so no block outside it changes: its first run stays
// under the range's key, the others go under separators between the
// runs, each names the next as its successor, and the last names the
// range's successor. A range at the end of the index that empties hands
// the end to the block before it.
func (w *blockWriter) rewrite(ops ixSource) error {
	k, _ := ops.current()
	cur := w.blocks.Cursor()
	var olds [][]byte // keys of the blocks replaced, the range's own first
	var entries [][]byte
	hi, err := w.take(cur, k, &olds, &entries)
	if err != nil {
		return err
	}
	w.merged = w.merged[:0]
	for {
		w.merged = applyOps(w.merged, entries, ops, hi)
		if hi == nil || len(w.merged) > 0 && blockSize(w.merged) >= tune.IndexBlockBytes/4 {
			break
		}
		// Too small for a block of its own: take in the next one.
		entries = entries[:0]
		next, err := w.takeAt(cur, hi, &olds, &entries)
		if err != nil {
			return err
		}
		entries = append(append(entries[:0:0], w.merged...), entries...)
		w.merged = w.merged[:0]
		hi = next
	}
	lo := olds[0]
	if len(w.merged) == 0 && !bytes.Equal(lo, headKey) {
		return w.endBefore(cur, olds)
	}
	for _, old := range olds[1:] {
		if err := w.blocks.Delete(old); err != nil {
			return mapStoreErr(err)
		}
	}
	written, err := putRange(w.blocks, lo, hi, w.merged)
	w.written += written
	return err
}

// putRange writes entries (ascending) as the blocks of the range from lo
// up to hi (nil: the end of the index), packed full at the end of the
// index and spread evenly elsewhere (splitBlocks): the first under lo,
// the others under the separator before their first entry, each naming
// the next, the last naming hi. It returns the bytes written.
func putRange(b kv.Bucket, lo, hi []byte, entries [][]byte) (written int, err error) {
	runs, shared := splitBlocks(entries, hi)
	key := lo
	for i, run := range runs {
		succ := hi
		if i+1 < len(runs) {
			succ = separator(run[len(run)-1], runs[i+1][0])
		}
		v := appendRun(nil, key, run, shared[i], succ)
		if err := b.Put(key, v); err != nil {
			return written, mapStoreErr(err)
		}
		written += len(v)
		key = succ
	}
	return written, nil
}

// endBefore removes the blocks of olds, a range at the end of the index
// that holds no entry any more, and makes the block before it the last.
func (w *blockWriter) endBefore(cur kv.Cursor, olds [][]byte) error {
	if k, _ := cur.Seek(olds[0]); !bytes.Equal(k, olds[0]) {
		return fmt.Errorf("%w: block %x vanished while folding", errBlock, olds[0])
	}
	pk, pv := cur.Prev()
	if pk == nil {
		return noHead(olds[0])
	}
	var entries [][]byte
	if _, err := addBlock(pk, pv, olds[0], &entries); err != nil {
		return err
	}
	for _, old := range olds {
		if err := w.blocks.Delete(old); err != nil {
			return mapStoreErr(err)
		}
	}
	b := appendBlock(nil, pk, entries, nil)
	w.written += len(b)
	return mapStoreErr(w.blocks.Put(pk, b))
}

// take finds the block whose range holds k (from its key up to its
// successor), adds its key to olds and its entries to entries, and
// returns its successor (nil: it is the last).
func (w *blockWriter) take(cur kv.Cursor, k []byte, olds, entries *[][]byte) (next []byte, err error) {
	bk, bv := cur.Seek(k)
	var after []byte
	if bk != nil && bytes.Equal(bk, k) {
		after, _ = cur.Next()
	} else {
		after = bk
		if bk == nil {
			bk, bv = cur.Last()
		} else {
			bk, bv = cur.Prev()
		}
		if bk == nil {
			return nil, noHead(after) // the head block is below every entry
		}
	}
	*olds = append(*olds, bk)
	return addBlock(bk, bv, after, entries)
}

// takeAt takes the block filed under key (the next one of a range).
func (w *blockWriter) takeAt(cur kv.Cursor, key []byte, olds, entries *[][]byte) (next []byte, err error) {
	bk, bv := cur.Seek(key)
	if bk == nil || !bytes.Equal(bk, key) {
		return nil, fmt.Errorf("%w: block %x vanished while folding", errBlock, key)
	}
	*olds = append(*olds, bk)
	after, _ := cur.Next()
	return addBlock(bk, bv, after, entries)
}

// addBlock checks the chained block v under key, whose next in the bucket
// is after (nil: none), adds its entries to entries, and returns its
// successor (nil: it is the last).
func addBlock(key, v, after []byte, entries *[][]byte) ([]byte, error) {
	b, err := parseBlock(key, v)
	if err == nil && !b.chained {
		err = fmt.Errorf("%w: a block of version 1 where the blocks are chained", errBlock)
	}
	if err == nil {
		err = chainBreak(&b, key, after)
	}
	if err == nil {
		*entries, _, err = b.entries(*entries, make([]byte, 0, len(v)))
	}
	if err != nil {
		return nil, fmt.Errorf("block %x: %w", key, err)
	}
	if len(b.succ) == 0 {
		return nil, nil
	}
	return b.succ, nil
}

// applyOps appends to dst the entries merged with the changes of ops below
// hi (nil: all of them), moving ops past those. The keys are the blocks'
// entries as decoded and the view's, which outlive the transaction's
// writes.
func applyOps(dst, entries [][]byte, ops ixSource, hi []byte) [][]byte {
	i := 0
	for k, del := ops.current(); k != nil && (hi == nil || bytes.Compare(k, hi) < 0); k, del = ops.current() {
		for i < len(entries) && bytes.Compare(entries[i], k) < 0 {
			dst = append(dst, entries[i])
			i++
		}
		if i < len(entries) && bytes.Equal(entries[i], k) {
			i++ // replaced by the change: kept below if it puts
		}
		if !del {
			dst = append(dst, k)
		}
		ops.next()
	}
	return append(dst, entries[i:]...)
}

// writeBlocks fills the empty blocks bucket b with keys (ascending), packed
// full and chained from the head block (which an empty index has too): a
// rebuild, or the first block of an index.
func writeBlocks(b kv.Bucket, keys [][]byte) error {
	_, err := putRange(b, headKey, nil, keys)
	return err
}

func (ix *collIndex) blockErr(err error) error {
	if errors.Is(err, errs.ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w: index %q: %v; Repair rebuilds it", errs.ErrCorrupt, ix.name, err)
}

// folds is the set of indexes whose fold is due, by collection and name.
type folds struct {
	mu  sync.Mutex
	due map[[2]string]struct{}
	run sync.Mutex // held by the goroutine that folds
}

func (f *folds) add(coll, index string) {
	f.mu.Lock()
	if f.due == nil {
		f.due = map[[2]string]struct{}{}
	}
	f.due[[2]string{coll, index}] = struct{}{}
	f.mu.Unlock()
}

func (f *folds) take() [][2]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][2]string, 0, len(f.due))
	for k := range f.due {
		out = append(out, k)
	}
	clear(f.due)
	return out
}

// runFolds folds the indexes whose fold came due in earlier commits, each
// to its end, in transactions of a bounded size. A fold is work on behalf
// of writes that are already committed, so nothing it meets reaches them:
// its failure (a full disk, a damaged block, a panic inside bbolt on a
// damaged page) is kept for the index (foldFailures), which the index's
// readers, FoldError, Stats and Verify report, and the fold is tried again
// after the next commit to the index. When another goroutine is folding,
// runFolds returns at once: that one takes the new work too. The caller
// must hold Enter.
func (db *DB) runFolds() {
	if !db.folds.run.TryLock() {
		return
	}
	defer db.folds.run.Unlock()
	for {
		due := db.folds.take()
		if len(due) == 0 {
			return
		}
		for _, d := range due {
			var inc uint64
			err := containPanic(func() error { return db.fold(d[0], d[1], &inc) })
			db.ixmem.noteFold(d[0], d[1], inc, err)
		}
	}
}

// FoldError returns the failures of the last folds of the indexes whose
// last fold failed, joined (nil when every fold succeeded).
func (db *DB) FoldError() error { return db.ixmem.foldErrors() }

// fold folds the index coll/name to the end of its journal as it stands,
// and sets inc to the incarnation of the index it folds.
func (db *DB) fold(coll, name string, inc *uint64) error {
	for {
		done := true
		err := db.update(func(tx *Tx) error {
			tx.folding = true
			c, err := tx.Coll(coll, 0, false)
			if err != nil {
				if isNoColl(err) {
					return nil
				}
				return err
			}
			ix, err := c.index(name)
			if err != nil || ix == nil {
				return err // gone
			}
			*inc = ix.def.Inc
			if !ix.foldDue() {
				return nil // folded by another process
			}
			done, err = tx.foldStep(c, ix, tune.IndexFoldStepBytes)
			return err
		}, false)
		if err != nil {
			return fmt.Errorf("folding index %q of collection %q: %w", name, coll, err)
		}
		if done {
			return nil
		}
	}
}

// foldFailure is the failure of an index's last fold in this process.
type foldFailure struct {
	inc uint64 // the incarnation folded; 0 when the fold failed before it read the index
	err error
}

// noteFold records how the fold of index coll/name (incarnation inc)
// ended: a failure replaces the one before, a success forgets it.
func (ms *ixMems) noteFold(coll, index string, inc uint64, err error) {
	ms.failMu.Lock()
	defer ms.failMu.Unlock()
	key := [2]string{coll, index}
	if err == nil {
		delete(ms.failed, key)
	} else {
		if ms.failed == nil {
			ms.failed = map[[2]string]foldFailure{}
		}
		ms.failed[key] = foldFailure{inc: inc, err: err}
	}
	ms.nfailed.Store(int32(len(ms.failed)))
}

// foldFailure returns the failure of the last fold of index coll/name
// (incarnation inc) in this process, if it failed.
func (ms *ixMems) foldFailure(coll, index string, inc uint64) error {
	if ms.nfailed.Load() == 0 {
		return nil
	}
	ms.failMu.Lock()
	defer ms.failMu.Unlock()
	f, ok := ms.failed[[2]string{coll, index}]
	if !ok || (f.inc != 0 && f.inc != inc) {
		return nil
	}
	return f.err
}

// foldFailed returns the failure of the last fold of index coll/name
// (incarnation inc) when it found the index damaged: reading the index
// could give a wrong answer, so its readers fail with it until Repair
// rebuilds the index (a new incarnation) or a fold succeeds. A failure for
// another reason (a full disk) leaves the index readable: its journal
// holds every change the blocks lack.
func (ms *ixMems) foldFailed(coll, index string, inc uint64) error {
	if err := ms.foldFailure(coll, index, inc); err != nil && errors.Is(err, errs.ErrCorrupt) {
		return fmt.Errorf("%w (found by its last fold in this process; Repair rebuilds the index)", err)
	}
	return nil
}

// indexFailure is a recorded fold failure with its index.
type indexFailure struct {
	coll, index string
	err         error
}

// foldFailures returns the recorded fold failures of the indexes of colls
// (of every collection when colls is empty), by collection and index.
func (ms *ixMems) foldFailures(colls []string) []indexFailure {
	if ms.nfailed.Load() == 0 {
		return nil
	}
	ms.failMu.Lock()
	defer ms.failMu.Unlock()
	var out []indexFailure
	for k, f := range ms.failed {
		if len(colls) == 0 || slices.Contains(colls, k[0]) {
			out = append(out, indexFailure{k[0], k[1], f.err})
		}
	}
	slices.SortFunc(out, func(a, b indexFailure) int {
		return cmp.Or(cmp.Compare(a.coll, b.coll), cmp.Compare(a.index, b.index))
	})
	return out
}

// foldErrors returns every recorded fold failure, joined.
func (ms *ixMems) foldErrors() error {
	var errs []error
	for _, f := range ms.foldFailures(nil) {
		errs = append(errs, f.err)
	}
	return errors.Join(errs...)
}

// forgetFolds forgets the fold failures of index coll/name, or of every
// index of coll when index is empty: the index is gone or rebuilt.
func (ms *ixMems) forgetFolds(coll, index string) {
	ms.failMu.Lock()
	defer ms.failMu.Unlock()
	for k := range ms.failed {
		if k[0] == coll && (index == "" || k[1] == index) {
			delete(ms.failed, k)
		}
	}
	ms.nfailed.Store(int32(len(ms.failed)))
}
