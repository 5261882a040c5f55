package engine

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
)

// The journal in memory. Reading a blocked index merges its blocks with
// the changes its journal holds; decoding the journal in every transaction
// would cost more than the read, so each DB keeps, per index, a view: the
// journal's changes decoded into sorted segments, shared by every
// transaction of the process, never changed once published.
//
// A view holds every change with a sequence in (floor, published]. A
// transaction whose index definition reads Floor = F and Seq = S can use
// any view with floor <= F and published >= S: it ignores the changes
// past S (commits it does not see), and the changes at or below F that the
// view may still hold are in the blocks it reads, where applying them
// again changes nothing. So one view serves every snapshot of an index
// between two folds, however old; a transaction that began before the
// last fold finished uses the view from before it (prev); only one older
// still decodes its own from the journal in its snapshot.
//
// A writer publishes its commit's changes as a new segment of the view
// (DB.pubMu orders this before the next writer begins); segments merge
// as they come, in pairs of similar size, so that a view holds a few
// (about the log of its commits) and each change is copied as often. A
// transaction that needs more than the current view holds (another
// process wrote, on PostgreSQL) reads the missing records from its own
// snapshot, where they are committed, and publishes the longer view. A
// write transaction reads only what was committed before it began, so a
// view never holds a change that could still roll back.
type ixView struct {
	floor, published uint64
	segs             []*segment // oldest first
}

// segment is changes in key order, a key's newest first, with their keys
// back to back in one arena in the same order: merging and walking
// segments then reads memory in order, where keys in the arenas of the
// commits that made them would cost a cache miss a comparison.
type segment struct {
	keys []byte
	ops  []segOp
}

type segOp struct {
	end uint32 // the key is keys[end of the op before : end]
	seq uint64
	del bool
}

func (s *segment) len() int { return len(s.ops) }

func (s *segment) key(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = s.ops[i-1].end
	}
	end := s.ops[i].end
	return s.keys[start:end:end]
}

// newSegment copies ops (sorted by opLess) into a segment.
func newSegment(ops []ixOp) *segment {
	size := 0
	for _, op := range ops {
		size += len(op.key)
	}
	s := &segment{keys: make([]byte, 0, size), ops: make([]segOp, len(ops))}
	for i, op := range ops {
		s.keys = append(s.keys, op.key...)
		s.ops[i] = segOp{end: uint32(len(s.keys)), seq: op.seq, del: op.del}
	}
	return s
}

func (s *segment) appendOp(from *segment, i int) {
	s.keys = append(s.keys, from.key(i)...)
	op := from.ops[i]
	op.end = uint32(len(s.keys))
	s.ops = append(s.ops, op)
}

func (v *ixView) covers(floor, seq uint64) bool {
	return v != nil && v.floor <= floor && v.published >= seq
}

func (v *ixView) empty() bool { return len(v.segs) == 0 }

// with returns the view with seg (changes later than all it holds) as
// its newest segment, published up to seq, merging the newest segments
// while the last is at least half the size of the one before it.
func (v *ixView) with(seg *segment, seq uint64) *ixView {
	segs := make([]*segment, len(v.segs), len(v.segs)+1)
	copy(segs, v.segs)
	if seg.len() > 0 {
		segs = append(segs, seg)
	}
	for n := len(segs); n >= 2 && 2*segs[n-1].len() >= segs[n-2].len(); n = len(segs) {
		segs = append(segs[:n-2], mergeSegments(segs[n-2], segs[n-1]))
	}
	return &ixView{floor: v.floor, published: seq, segs: segs}
}

// mergeSegments merges an older and a newer segment: for a key in both,
// the newer's changes come first. Segments that merge are contiguous in a
// view, so every change of the newer one is later than the older's.
func mergeSegments(older, newer *segment) *segment {
	out := &segment{keys: make([]byte, 0, len(older.keys)+len(newer.keys)), ops: make([]segOp, 0, older.len()+newer.len())}
	i, j := 0, 0
	for i < older.len() && j < newer.len() {
		if bytes.Compare(newer.key(j), older.key(i)) <= 0 {
			out.appendOp(newer, j)
			j++
		} else {
			out.appendOp(older, i)
			i++
		}
	}
	for ; i < older.len(); i++ {
		out.appendOp(older, i)
	}
	for ; j < newer.len(); j++ {
		out.appendOp(newer, j)
	}
	return out
}

// flatten returns, in key order, each key's change with the highest
// sequence at or below upto: one walk over all segments at once. The keys
// alias the segments. A fold walks this rather than the segments side by
// side, key by key.
func (v *ixView) flatten(upto uint64) []ixOp {
	total := 0
	for _, s := range v.segs {
		total += s.len()
	}
	out := make([]ixOp, 0, total)
	src := newSegSource(v, upto)
	for src.first(); src.key != nil; src.next() {
		out = append(out, ixOp{key: src.key, del: src.del})
	}
	return out
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

// ixMems maps collection and index names to their views, and keeps the
// failures of their last folds (index_fold.go).
type ixMems struct {
	m sync.Map

	failMu  sync.Mutex
	failed  map[[2]string]foldFailure // by collection and index name
	nfailed atomic.Int32              // len(failed): readers look only when it is not 0
}

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
			if v, loaded := ms.m.LoadOrStore(key, fresh); !loaded {
				return fresh
			} else if v.(*ixMem).inc == inc {
				return v.(*ixMem)
			}
			continue
		}
		if ms.m.CompareAndSwap(key, v, fresh) {
			return fresh
		}
	}
}

// drop forgets the views of an index that no longer exists.
func (ms *ixMems) drop(coll, index string) {
	ms.m.Delete(memKey(coll, index))
	ms.forgetFolds(coll, index)
}

// dropColl forgets the views of every index of a collection that no
// longer exists.
func (ms *ixMems) dropColl(coll string) {
	ms.forgetFolds(coll, "")
	prefix := coll + "\x00"
	ms.m.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			ms.m.Delete(k)
		}
		return true
	})
}

// committedView returns the view of ix's journal for this transaction,
// for a read of the index: it fails while the index's last fold found it
// damaged (ixMems.foldFailed).
func (ix *collIndex) committedView() (*ixView, error) {
	if !ix.viewDone && ix.mems != nil {
		if err := ix.mems.foldFailed(ix.coll, ix.name, ix.def.Inc); err != nil {
			return nil, err
		}
	}
	return ix.journalView()
}

// journalView returns the view of ix's journal for this transaction. A
// view the DB holds is used as it is; otherwise one is made from the
// journal records this transaction sees and published for the others.
func (ix *collIndex) journalView() (*ixView, error) {
	if ix.viewDone {
		return ix.view, nil
	}
	floor, seq := ix.base.Floor, ix.base.Seq
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
	// The DB's current view, when it can start this one, else nothing. A
	// view that stops short of floor cannot: the changes between its end
	// and floor are folded and gone from this snapshot's journal, and its
	// own older changes of the same keys would then win over the blocks
	// that hold the newer ones (another process folded them).
	base := &ixView{floor: floor, published: floor}
	if mem != nil {
		if cur := mem.cur.Load(); cur != nil && cur.floor <= floor && cur.published >= floor {
			base = cur.raise(floor)
		}
	}
	ops, err := readJournal(ix.journal, base.published, seq)
	if err != nil {
		return nil, ix.journalErr(err)
	}
	v := base.with(newSegment(ops), seq)
	if mem != nil {
		if cur := mem.cur.Load(); cur == nil || v.published > cur.published && v.floor >= cur.floor {
			mem.cur.Store(v)
		}
	}
	ix.view, ix.viewDone = v, true
	return v, nil
}

// publishCommit adds a committed transaction's changes (journaled after
// sequence before, up to after, over an index folded up to floor) to the
// DB's view of the index, when the view held everything before them;
// otherwise the next reader extends the view from the journal.
func (m *ixMem) publishCommit(floor, before, after uint64, seg *segment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.cur.Load()
	if cur == nil && before == floor {
		cur = &ixView{floor: floor, published: before}
	}
	if cur == nil || cur.published != before || cur.floor > floor {
		return
	}
	m.cur.Store(cur.raise(floor).with(seg, after))
}

// raise returns the view without the changes at or below floor, which a
// fold (of another process, on PostgreSQL) has put in the blocks: a view
// extended past a fold it did not make would otherwise keep every change
// it ever held. The view must reach floor (published >= floor).
func (v *ixView) raise(floor uint64) *ixView {
	if floor <= v.floor {
		return v
	}
	return &ixView{floor: floor, published: v.published, segs: keepAbove(v.segs, floor)}
}

// keepAbove returns the changes of segs later than floor, in one segment
// in opLess order (none: no segment).
func keepAbove(segs []*segment, floor uint64) []*segment {
	keep := &segment{}
	for _, seg := range segs {
		for i := range seg.ops {
			if seg.ops[i].seq > floor {
				keep.appendOp(seg, i)
			}
		}
	}
	switch {
	case keep.len() == 0:
		return nil
	case len(segs) > 1:
		// Each segment's changes are in key order; together they are not.
		return []*segment{sortSegment(keep)}
	}
	return []*segment{keep}
}

// publishFold replaces the view after a fold to floor has committed: the
// changes at or below floor are in the blocks now, and the new view holds
// only the rest, in one segment. The old view stays for the transactions
// that began before the fold committed.
func (m *ixMem) publishFold(floor uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.cur.Load()
	m.prev.Store(cur)
	if cur == nil || cur.published < floor {
		m.cur.Store(nil)
		return
	}
	m.cur.Store(cur.raise(floor))
}

// sortSegment returns the changes of s sorted by opLess.
func sortSegment(s *segment) *segment {
	ops := make([]ixOp, s.len())
	for i := range ops {
		ops[i] = ixOp{key: s.key(i), seq: s.ops[i].seq, del: s.ops[i].del}
	}
	sortOps(ops)
	return newSegment(ops)
}
