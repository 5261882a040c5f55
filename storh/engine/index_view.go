package engine

import (
	"sync"
	"sync/atomic"

	"github.com/storhdb/storh-go/storh/engine/internal/blockindex"
)

// blockedIndexes is what a DB keeps for its blocked indexes beside the
// file: the views of their journals with the failures of their folds, the
// folds that came due, and the order in which commits publish to the
// views.
type blockedIndexes struct {
	mems  ixMems
	folds folds // index_fold.go
	// pubMu is held by a write transaction from its start until it has
	// handed its changes to the views (Tx.afterCommit): the next writer
	// then finds the views holding every commit before it.
	pubMu sync.Mutex
}

// ixMems holds, per blocked index of a DB, the views of its journal
// (blockindex.Views: the journal decoded, shared by every transaction of
// the process), and keeps the failures of the indexes' last folds
// (index_fold.go).
type ixMems struct {
	views blockindex.Views

	failMu  sync.Mutex
	failed  map[[2]string]foldFailure // by collection and index name
	nfailed atomic.Int32              // len(failed): readers look only when it is not 0
}

// memKey is the key of an index's views; memKey(coll, "") is the prefix of
// every index's of coll, since no valid name holds a zero byte.
func memKey(coll, index string) string { return coll + "\x00" + index }

// get returns the views of the index, replacing those of an earlier index
// of the same name.
func (ms *ixMems) get(coll, index string, inc uint64) *blockindex.Mem {
	return ms.views.Get(memKey(coll, index), inc)
}

// drop forgets the views of an index that no longer exists.
func (ms *ixMems) drop(coll, index string) {
	ms.views.Drop(memKey(coll, index))
	ms.forgetFolds(coll, index)
}

// dropColl forgets the views of every index of a collection that no
// longer exists.
func (ms *ixMems) dropColl(coll string) {
	ms.forgetFolds(coll, "")
	ms.views.DropPrefix(memKey(coll, ""))
}

// committedView returns the view of ix's journal for this transaction,
// for a read of the index: it fails while the index's last fold found it
// damaged (ixMems.foldFailed).
func (ix *collIndex) committedView() (*blockindex.View, error) {
	if !ix.viewDone && ix.mems != nil {
		if err := ix.mems.foldFailed(ix.coll, ix.name, ix.def.Inc); err != nil {
			return nil, err
		}
	}
	return ix.journalView()
}

// journalView returns the view of ix's journal for this transaction: one
// the DB holds, or one made from the journal records this transaction
// sees and published for the others (blockindex.Mem.View).
func (ix *collIndex) journalView() (*blockindex.View, error) {
	if ix.viewDone {
		return ix.view, nil
	}
	var mem *blockindex.Mem
	if ix.mems != nil {
		mem = ix.mems.get(ix.coll, ix.name, ix.def.Inc)
	}
	v, err := mem.View(ix.journal, ix.base.Floor, ix.base.Seq)
	if err != nil {
		return nil, ix.journalErr(err)
	}
	ix.view, ix.viewDone = v, true
	return v, nil
}
