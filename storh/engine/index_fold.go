package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/storhdb/storh-go/storh/engine/internal/blockindex"
	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/internal/tune"
)

// When the engine folds a blocked index's journal into its blocks
// (blockindex.Fold does the rewriting). Each fold transaction writes a
// bounded amount (tune.IndexFoldStepBytes) and records in the index
// definition where the next one starts (FoldTo, FoldNext), so a fold of a
// large index lets writers in between, and a crash resumes it.
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
	next, err := blockindex.Fold(ix.entries, view, d.FoldTo, d.FoldNext, budget)
	if err != nil {
		return false, t.stepErr(ix, err)
	}
	if next != nil {
		d.FoldNext = next
		return false, nil
	}
	// Every change up to FoldTo is in the blocks: its records go.
	folded, err := blockindex.DropFolded(ix.journal, d.FoldTo)
	if err != nil {
		return false, mapStoreErr(err)
	}
	d.Pending -= folded
	d.Floor, d.FoldTo, d.FoldNext = d.FoldTo, 0, nil
	d.Pending = max(d.Pending, 0)
	ix.folded = true
	return true, nil
}

// chainStep rewrites the version-1 blocks of ix (a file of format 2) as
// chained blocks (blockindex.Chain), in transactions of about budget bytes
// of blocks. Where it stands between steps is ChainNext, the key of the
// first block not chained yet; readers check the chain as far as it goes.
// A version-1 index holds nothing that tells a missing block, so before
// it rewrites anything the first step counts the index's entries: an
// index that holds fewer (or more) than its definition counts is left as
// it is, for Verify to report and Repair to rebuild, rather than sealed
// into a chain that would pass for whole.
func (t *Tx) chainStep(ix *collIndex, budget int) (done bool, err error) {
	d := &ix.def
	if d.ChainNext == nil {
		if err := ix.countEntries(); err != nil {
			return false, err
		}
		if err := t.needFormat(formatChained); err != nil {
			return false, err
		}
	}
	ix.changed = true
	next, err := blockindex.Chain(ix.entries, d.ChainNext, budget)
	if err != nil {
		return false, t.stepErr(ix, err)
	}
	d.ChainNext = next
	d.Chained = next == nil
	return d.Chained, nil
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

// stepErr tells what stopped a fold or chaining step of ix: damage in its
// blocks (ErrCorrupt, which fails the index's readers until Repair or a
// fold ends it) from a failure of the store (a full disk, a lost
// connection), after which the index stays readable: its journal still
// holds every change its blocks lack. A read that failed on a server
// answered nil, which the step may have taken for a missing block: the
// transaction's failure, when it has one, is the cause.
func (t *Tx) stepErr(ix *collIndex, err error) error {
	if ferr := t.failure(); ferr != nil {
		return ferr
	}
	if errors.Is(err, blockindex.ErrDamagedBlock) {
		return ix.blockErr(err)
	}
	return mapStoreErr(err)
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
	if !db.blocked.folds.run.TryLock() {
		return
	}
	defer db.blocked.folds.run.Unlock()
	for {
		due := db.blocked.folds.take()
		if len(due) == 0 {
			return
		}
		for _, d := range due {
			var inc uint64
			err := containPanic(func() error { return db.fold(d[0], d[1], &inc) })
			db.blocked.mems.noteFold(d[0], d[1], inc, err)
		}
	}
}

// FoldError returns the failures of the last folds of the indexes whose
// last fold failed, joined (nil when every fold succeeded).
func (db *DB) FoldError() error { return db.blocked.mems.foldErrors() }

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
