package blockindex

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/storhdb/storh-go/storh/kv"
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
// (the engine orders this before the next writer begins); segments merge
// as they come, in pairs of similar size, so that a view holds a few
// (about the log of its commits) and each change is copied as often. A
// transaction that needs more than the current view holds (another
// process wrote, on PostgreSQL) reads the missing records from its own
// snapshot, where they are committed, and publishes the longer view. A
// write transaction reads only what was committed before it began, so a
// view never holds a change that could still roll back.
type View struct {
	floor, published uint64
	segs             []*Segment // oldest first
}

// segment is changes in key order, a key's newest first, with their keys
// back to back in one arena in the same order: merging and walking
// segments then reads memory in order, where keys in the arenas of the
// commits that made them would cost a cache miss a comparison.
type Segment struct {
	keys []byte
	ops  []segOp
}

type segOp struct {
	end uint32 // the key is keys[end of the op before : end]
	seq uint64
	del bool
}

func (s *Segment) len() int { return len(s.ops) }

func (s *Segment) key(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = s.ops[i-1].end
	}
	end := s.ops[i].end
	return s.keys[start:end:end]
}

// newSegment copies ops (sorted by opLess) into a segment.
func newSegment(ops []ixOp) *Segment {
	size := 0
	for _, op := range ops {
		size += len(op.key)
	}
	s := &Segment{keys: make([]byte, 0, size), ops: make([]segOp, len(ops))}
	for i, op := range ops {
		s.keys = append(s.keys, op.key...)
		s.ops[i] = segOp{end: uint32(len(s.keys)), seq: op.seq, del: op.del}
	}
	return s
}

func (s *Segment) appendOp(from *Segment, i int) {
	s.keys = append(s.keys, from.key(i)...)
	op := from.ops[i]
	op.end = uint32(len(s.keys))
	s.ops = append(s.ops, op)
}

func (v *View) covers(floor, seq uint64) bool {
	return v != nil && v.floor <= floor && v.published >= seq
}

func (v *View) Empty() bool { return len(v.segs) == 0 }

// with returns the view with seg (changes later than all it holds) as
// its newest segment, published up to seq, merging the newest segments
// while the last is at least half the size of the one before it.
func (v *View) with(seg *Segment, seq uint64) *View {
	segs := make([]*Segment, len(v.segs), len(v.segs)+1)
	copy(segs, v.segs)
	if seg.len() > 0 {
		segs = append(segs, seg)
	}
	for n := len(segs); n >= 2 && 2*segs[n-1].len() >= segs[n-2].len(); n = len(segs) {
		segs = append(segs[:n-2], mergeSegments(segs[n-2], segs[n-1]))
	}
	return &View{floor: v.floor, published: seq, segs: segs}
}

// mergeSegments merges an older and a newer segment: for a key in both,
// the newer's changes come first. Segments that merge are contiguous in a
// view, so every change of the newer one is later than the older's.
func mergeSegments(older, newer *Segment) *Segment {
	out := &Segment{keys: make([]byte, 0, len(older.keys)+len(newer.keys)), ops: make([]segOp, 0, older.len()+newer.len())}
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
func (v *View) flatten(upto uint64) []ixOp {
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

// Mem is the views of one index in one DB.
type Mem struct {
	inc  uint64 // the index's incarnation: a new one is a new index
	mu   sync.Mutex
	cur  atomic.Pointer[View]
	prev atomic.Pointer[View] // the view before the last fold
}

func (m *Mem) usable(floor, seq uint64) *View {
	if v := m.cur.Load(); v.covers(floor, seq) {
		return v
	}
	if v := m.prev.Load(); v.covers(floor, seq) {
		return v
	}
	return nil
}

// Views maps index keys (which the caller chooses: a collection and an
// index name) to the views of their journals, shared by every
// transaction of one DB.
type Views struct {
	m sync.Map
}

// Get returns the views of the index key, incarnation inc, replacing
// those of an earlier index of the same key.
func (vs *Views) Get(key string, inc uint64) *Mem {
	for {
		v, ok := vs.m.Load(key)
		if ok && v.(*Mem).inc == inc {
			return v.(*Mem)
		}
		fresh := &Mem{inc: inc}
		if !ok {
			if v, loaded := vs.m.LoadOrStore(key, fresh); !loaded {
				return fresh
			} else if v.(*Mem).inc == inc {
				return v.(*Mem)
			}
			continue
		}
		if vs.m.CompareAndSwap(key, v, fresh) {
			return fresh
		}
	}
}

// Drop forgets the views of an index that no longer exists.
func (vs *Views) Drop(key string) { vs.m.Delete(key) }

// DropPrefix forgets the views of every index whose key starts with
// prefix (those of a collection that no longer exists).
func (vs *Views) DropPrefix(prefix string) {
	vs.m.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			vs.m.Delete(k)
		}
		return true
	})
}

// View returns a view that serves a transaction whose index reads floor
// and seq from its definition, reading what it lacks from journal, the
// journal bucket in the transaction's snapshot. A view m holds is used as
// it is; otherwise one is made from the journal records and published for
// the others. On a nil m (outside a DB) the view is decoded afresh.
func (m *Mem) View(journal kv.Bucket, floor, seq uint64) (*View, error) {
	if m != nil {
		if v := m.usable(floor, seq); v != nil {
			return v, nil
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if v := m.usable(floor, seq); v != nil {
			return v, nil
		}
	}
	// The current view, when it can start this one, else nothing. A
	// view that stops short of floor cannot: the changes between its end
	// and floor are folded and gone from this snapshot's journal, and its
	// own older changes of the same keys would then win over the blocks
	// that hold the newer ones (another process folded them).
	base := &View{floor: floor, published: floor}
	if m != nil {
		if cur := m.cur.Load(); cur != nil && cur.floor <= floor && cur.published >= floor {
			base = cur.raise(floor)
		}
	}
	ops, err := readJournal(journal, base.published, seq)
	if err != nil {
		return nil, err
	}
	v := base.with(newSegment(ops), seq)
	if m != nil {
		if cur := m.cur.Load(); cur == nil || v.published > cur.published && v.floor >= cur.floor {
			m.cur.Store(v)
		}
	}
	return v, nil
}

// ReadView decodes the journal records after floor up to seq into a view
// of their own, shared with no one: what the file holds, for a check of
// the views in memory.
func ReadView(journal kv.Bucket, floor, seq uint64) (*View, error) {
	return (*Mem)(nil).View(journal, floor, seq)
}

// PublishCommit adds a committed transaction's changes (journaled after
// sequence before, up to after, over an index folded up to floor) to the
// DB's view of the index, when the view held everything before them;
// otherwise the next reader extends the view from the journal.
func (m *Mem) PublishCommit(floor, before, after uint64, seg *Segment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.cur.Load()
	if cur == nil && before == floor {
		cur = &View{floor: floor, published: before}
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
func (v *View) raise(floor uint64) *View {
	if floor <= v.floor {
		return v
	}
	return &View{floor: floor, published: v.published, segs: keepAbove(v.segs, floor)}
}

// keepAbove returns the changes of segs later than floor, in one segment
// in opLess order (none: no segment).
func keepAbove(segs []*Segment, floor uint64) []*Segment {
	keep := &Segment{}
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
		return []*Segment{sortSegment(keep)}
	}
	return []*Segment{keep}
}

// PublishFold replaces the view after a fold to floor has committed: the
// changes at or below floor are in the blocks now, and the new view holds
// only the rest, in one segment. The old view stays for the transactions
// that began before the fold committed.
func (m *Mem) PublishFold(floor uint64) {
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
func sortSegment(s *Segment) *Segment {
	ops := make([]ixOp, s.len())
	for i := range ops {
		ops[i] = ixOp{key: s.key(i), seq: s.ops[i].seq, del: s.ops[i].del}
	}
	sortOps(ops)
	return newSegment(ops)
}

// Source returns the changes of v with a sequence at or below upto (those
// a transaction that read Seq = upto sees), for a Cursor.
func (v *View) Source(upto uint64) Source { return newSegSource(v, upto) }

// SegmentSource returns the changes of seg, a transaction's own (from
// Pending.Journal), for a Cursor of that transaction.
func SegmentSource(seg *Segment) Source {
	return newSegSource(&View{segs: []*Segment{seg}}, seqPending)
}

// Len returns the number of changes v holds, its segments together.
func (v *View) Len() int {
	n := 0
	for _, s := range v.segs {
		n += s.len()
	}
	return n
}

// Floor returns the sequence up to which v holds no change: the blocks
// had every change up to it when v was made.
func (v *View) Floor() uint64 { return v.floor }
