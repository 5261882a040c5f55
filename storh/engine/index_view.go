package engine

import (
	"strings"
	"sync"
	"sync/atomic"
)

// The journal in memory. Reading a blocked index merges its blocks with
// the changes its journal holds; decoding the journal in every transaction
// would cost more than the read, so each DB keeps, per index, a view: the
// journal's changes decoded and sorted in a copy-on-write B-tree, shared by
// every transaction of the process and never changed once published.
//
// A view holds every change with a sequence in (floor, seq]. A
// transaction whose index definition reads Floor = F and Seq = S can use
// any view with floor <= F and seq >= S: it ignores the changes past S
// (they are commits it does not see), and the changes at or below F that
// the view may still hold are already in the blocks it reads, where
// applying them again changes nothing. So one view serves every snapshot
// of an index between two folds, however old; a transaction that began
// before the last fold finished uses the view from before it (prev); only
// one older still builds its own from the journal in its snapshot.
//
// Views are kept up to date by the writers, after they commit (publish),
// and otherwise by the first transaction that needs more than the current
// view holds: it reads the missing records from its own snapshot, where
// they are committed, and publishes the longer view. A write transaction
// reads only what was committed before it began, so a view never holds a
// change that could still roll back.
type ixView struct {
	floor, seq uint64
	ops        *opTree // read-only once published
}

func (v *ixView) covers(floor, seq uint64) bool {
	return v != nil && v.floor <= floor && v.seq >= seq
}

// ixMem is the views of one index in one DB.
type ixMem struct {
	inc  uint64 // the index's incarnation (indexDef.Inc): a new one is a new index
	mu   sync.Mutex
	cur  atomic.Pointer[ixView]
	prev atomic.Pointer[ixView] // the view before the last fold
}

func (m *ixMem) usable(floor, seq uint64) *ixView {
	if v := m.cur.Load(); v.covers(floor, seq) {
		return v
	}
	if v := m.prev.Load(); v.covers(floor, seq) {
		return v
	}
	return nil
}

// ixMems maps collection and index names to their views.
type ixMems struct{ m sync.Map }

func memKey(coll, index string) string { return coll + "\x00" + index }

// get returns the views of the index, replacing those of an earlier index
// of the same name.
func (ms *ixMems) get(coll, index string, inc uint64) *ixMem {
	key := memKey(coll, index)
	for {
		v, ok := ms.m.Load(key)
		if ok && v.(*ixMem).inc == inc {
			return v.(*ixMem)
		}
		fresh := &ixMem{inc: inc}
		if !ok {
			if v, loaded := ms.m.LoadOrStore(key, fresh); loaded && v.(*ixMem).inc == inc {
				return v.(*ixMem)
			} else if !loaded {
				return fresh
			}
			continue
		}
		if ms.m.CompareAndSwap(key, v, fresh) {
			return fresh
		}
	}
}

// drop forgets the views of an index that no longer exists.
func (ms *ixMems) drop(coll, index string) { ms.m.Delete(memKey(coll, index)) }

// dropColl forgets the views of every index of a collection that no
// longer exists.
func (ms *ixMems) dropColl(coll string) {
	prefix := coll + "\x00"
	ms.m.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			ms.m.Delete(k)
		}
		return true
	})
}

// committedView returns the view of ix's journal for this transaction:
// nil when the journal is empty. A view the DB holds is used as it is;
// otherwise one is made from the journal records this transaction sees
// and published for the others.
func (ix *collIndex) committedView() (*ixView, error) {
	if ix.viewDone {
		return ix.view, nil
	}
	floor, seq := ix.base.Floor, ix.base.Seq
	if seq <= floor {
		ix.viewDone = true
		return nil, nil
	}
	var mem *ixMem
	if ix.mems != nil {
		mem = ix.mems.get(ix.coll, ix.name, ix.def.Inc)
		if v := mem.usable(floor, seq); v != nil {
			ix.view, ix.viewDone = v, true
			return v, nil
		}
		mem.mu.Lock()
		defer mem.mu.Unlock()
		if v := mem.usable(floor, seq); v != nil {
			ix.view, ix.viewDone = v, true
			return v, nil
		}
	}
	v, err := extendView(mem, ix, floor, seq)
	if err != nil {
		return nil, err
	}
	if mem != nil {
		if cur := mem.cur.Load(); cur == nil || v.seq > cur.seq && v.floor >= cur.floor {
			mem.cur.Store(v)
		}
	}
	ix.view, ix.viewDone = v, true
	return v, nil
}

// extendView makes a view for a snapshot with floor and seq: the DB's
// current view with the records it lacks, when it can serve as the start,
// or a new one from every record of the snapshot's journal.
func extendView(mem *ixMem, ix *collIndex, floor, seq uint64) (*ixView, error) {
	var base *ixView
	if mem != nil {
		if v := mem.cur.Load(); v != nil && v.floor <= floor && v.seq < seq {
			base = v
		}
	}
	if base == nil {
		ops, err := readJournal(ix.journal, floor, seq)
		if err != nil {
			return nil, ix.journalErr(err)
		}
		tree := newOpTree()
		for _, op := range ops {
			tree.Load(op)
		}
		return &ixView{floor: floor, seq: seq, ops: tree}, nil
	}
	// Records at or below floor are folded and gone from this snapshot's
	// journal: when base stops short of them, the longer view starts at
	// floor.
	from, newFloor := base.seq, base.floor
	if from < floor {
		from, newFloor = floor, floor
	}
	ops, err := readJournal(ix.journal, from, seq)
	if err != nil {
		return nil, ix.journalErr(err)
	}
	tree := base.ops.Copy()
	for _, op := range ops {
		tree.Set(op)
	}
	return &ixView{floor: newFloor, seq: seq, ops: tree}, nil
}

// publishCommit adds a committed transaction's changes (journaled after
// sequence before, up to after, over an index folded up to floor) to the
// DB's view of the index, when the view held everything before them;
// otherwise the next reader extends the view from the journal.
func (m *ixMem) publishCommit(floor, before, after uint64, ops *opTree) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.cur.Load()
	if cur == nil && before == floor {
		cur = &ixView{floor: floor, seq: before, ops: newOpTree()}
	}
	if cur == nil || cur.seq != before {
		return
	}
	tree := cur.ops.Copy()
	ops.Scan(func(op ixOp) bool {
		op.seq = after
		tree.Set(op)
		return true
	})
	m.cur.Store(&ixView{floor: cur.floor, seq: after, ops: tree})
}

// publishFold replaces the view after a fold to floor has committed: the
// changes at or below floor are in the blocks now, and the new view holds
// only the rest. The old view stays for the transactions that began before
// the fold committed.
func (m *ixMem) publishFold(floor uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.cur.Load()
	if cur == nil || cur.seq < floor {
		m.prev.Store(cur)
		m.cur.Store(nil)
		return
	}
	tree := newOpTree()
	cur.ops.Scan(func(op ixOp) bool {
		if op.seq > floor {
			tree.Load(op)
		}
		return true
	})
	m.prev.Store(cur)
	m.cur.Store(&ixView{floor: floor, seq: cur.seq, ops: tree})
}
