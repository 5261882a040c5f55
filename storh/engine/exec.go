package engine

import (
	"bytes"
	"container/heap"
	"fmt"
	"slices"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// RunStats says how a query ran: the indexes it read (none for a scan of
// the records), whether it had to sort in memory, and what it read.
type RunStats struct {
	Indexes     []string
	Sorted      bool
	KeysRead    int // index keys examined
	RecordsRead int // records fetched and checked against the condition
	Returned    int
}

// Run executes one query over one collection, a chunk at a time. A DB-level
// stream runs each chunk in its own short read transaction (DB.RunChunk);
// a stream inside a transaction runs them all in it (Run.Next). Between
// chunks a Run holds positions, never a transaction.
//
// How it reads depends on the plan:
//   - in id order, or in the order of one index that yields it (an ordered
//     index walk, or one point of an index, whose entries are in id order),
//     it streams: each chunk continues from the last key it examined, and a
//     Limit stops the walk;
//   - otherwise it collects first: the candidates' positions in the output
//     order (with their records, for at most Limit of them), chunk by chunk,
//     then sorts them and returns them in order, fetching the records it did
//     not keep.
type Run struct {
	spec  *plan.Spec
	match matcher // nil without a condition
	left  int     // records still to return
	Stats RunStats
	Done  bool

	reuse *[]byte // see Lend

	planned bool
	access  plan.Access
	mode    runMode
	names   []string // index names of the scans, to find them in each chunk
	walks   []keyWalk
	walk    int // the scan being walked (collect mode)
	ids     Cursor
	after   []byte // keyset cursors as full sequence keys (order key ‖ id)
	before  []byte
	orderK  []byte // scratch for order keys

	// collect mode
	seen     map[uuidv7.UUID]struct{}
	hits     hitHeap
	kept     int // payload bytes held by hits
	emitting bool
	emitAt   int
}

type runMode uint8

const (
	modeNone     runMode = iota + 1
	modeIDs              // stream the id range
	modeIndex            // stream one index scan in its order
	modeCollect          // gather candidates, sort, then return them
	modeCountIdx         // CountOnly: count index keys
)

// hit is one matching record of a collecting run: its position in the
// output order and, while within the limit, its payload.
type hit struct {
	seq     []byte // order key ‖ id, or the id alone in id order
	id      uuidv7.UUID
	payload []byte
}

// NewRun prepares a run of spec.
func NewRun(spec *plan.Spec) *Run {
	r := &Run{spec: spec, left: spec.Limit}
	if spec.Cond != nil {
		r.match = plan.NewMatcher(spec.Cond).Match
	}
	if r.left == 0 {
		r.left = int(^uint(0) >> 1)
	}
	return r
}

// Lend makes the run copy each chunk's payloads into *buf, grown when too
// small and reused for the next chunk, instead of a new allocation per
// chunk: a chunk's payloads are then valid only until the next call of
// Next. For a reader that is done with a chunk before it asks for the next
// (an export, a count, a callback that lends the bytes), memory stays
// flat; a caller that pools buf allocates nothing for payloads at all.
func (r *Run) Lend(buf *[]byte) { r.reuse = buf }

// RunChunk reads the next chunk of r in a short read transaction of its
// own, appending at most max items to dst. The caller must hold Enter.
func (db *DB) RunChunk(h Handle, r *Run, max int, dst []Item) ([]Item, error) {
	n := len(dst)
	if !r.Done && db.direct(h) && r.rangeOnly() {
		if out, ok, err := db.directChunk(h, r, max, dst); ok {
			return out, err
		}
	}
	err := db.ViewRun(r, func(tx *Tx) error {
		c, err := tx.Use(h, false)
		if err != nil {
			return err
		}
		dst, err = r.Next(c, max, dst[:n])
		return err
	})
	return dst, err
}

// Next reads the next chunk inside the caller's transaction, appending at
// most max items to dst; c is nil for a collection not created yet. When
// it returns with r.Done set, the run is over.
func (r *Run) Next(c *Coll, max int, dst []Item) ([]Item, error) {
	if r.Done {
		return dst, nil
	}
	if c == nil || r.left <= 0 {
		r.Done = true
		return dst, nil
	}
	ixs, err := r.prepare(c)
	if err != nil {
		r.Done = true
		return dst, err
	}
	max = min(max, r.left)
	switch r.mode {
	case modeNone:
		r.Done = true
	case modeIDs:
		dst = r.nextIDs(c, max, dst)
	case modeIndex:
		dst, err = r.nextIndex(c, ixs[0], max, dst)
	case modeCollect:
		dst, err = r.nextCollect(c, ixs, max, dst)
	}
	if err != nil {
		r.Done = true
	}
	return dst, err
}

// prepare plans the run on its first chunk, and on every chunk finds the
// indexes it reads in this transaction.
func (r *Run) prepare(c *Coll) ([]*collIndex, error) {
	if !r.planned {
		defs, ready, err := c.readyIndexes()
		if err != nil {
			return nil, err
		}
		if err := r.plan(defs, ready, c); err != nil {
			return nil, err
		}
	}
	ixs := make([]*collIndex, len(r.names))
	for i, name := range r.names {
		ix, err := c.index(name)
		if err != nil {
			return nil, err
		}
		if ix == nil || ix.def.Building {
			return nil, fmt.Errorf("%w: index %q of collection %q was dropped while a query read it; run the query again", errs.ErrNotFound, name, c.Name)
		}
		ixs[i] = ix
	}
	return ixs, nil
}

// plan chooses how the run reads, from the collection's ready indexes
// (defs, with ready their indexes in the same order); c reads the records
// of keyset cursors, which only a field order has.
func (r *Run) plan(defs []plan.IndexDef, ready []*collIndex, c *Coll) error {
	r.access = plan.Choose(r.spec, defs)
	if r.spec.RequireIndex && r.access.ReadsAll(r.spec) {
		return fmt.Errorf("%w: no index serves %s, and without one the query reads the whole collection (declare an index with WithIndex, or bound the query by id or time)",
			errs.ErrNoIndex, describeConds(r.spec))
	}
	for _, s := range r.access.Scans {
		r.names = append(r.names, ready[s.Index].name)
	}
	r.Stats.Indexes = r.names
	if err := r.resolveCursors(c); err != nil {
		return err
	}
	r.ids = Cursor{Lo: r.spec.Lo, Hi: r.spec.Hi, Reverse: r.spec.Reverse, Done: r.spec.Empty}
	r.mode = r.chooseMode()
	r.Stats.Sorted = r.mode == modeCollect && r.spec.Order != nil
	for _, s := range r.access.Scans {
		r.walks = append(r.walks, newKeyWalk(s, r.walkForward(), r.mode == modeIndex, r))
	}
	r.planned = true
	return nil
}

func describeConds(s *plan.Spec) string {
	switch {
	case s.Cond != nil && s.Order != nil:
		return s.Cond.String() + " ordered by " + plan.PathString(s.Order)
	case s.Cond != nil:
		return s.Cond.String()
	case s.Order != nil:
		return "the order by " + plan.PathString(s.Order)
	}
	return "a query without conditions"
}

func (r *Run) chooseMode() runMode {
	a := r.access
	switch {
	case a.Kind == plan.AccessNone:
		return modeNone
	case a.Kind == plan.AccessIDs && r.spec.Order == nil:
		return modeIDs
	case a.Kind == plan.AccessIndex && a.Ordered:
		return modeIndex
	case a.Kind == plan.AccessIndex && r.spec.Order == nil && len(a.Scans[0].Ranges) == 1 && a.Scans[0].Ranges[0].Point:
		return modeIndex // the entries of one value are in id order
	}
	return modeCollect
}

// walkForward: the direction of the output over ascending keys.
func (r *Run) walkForward() bool {
	if r.spec.Order != nil {
		return r.spec.Desc == r.spec.Reverse
	}
	return !r.spec.Reverse
}

// resolveCursors turns keyset cursors into sequence keys, reading the
// cursor records that came without a value.
func (r *Run) resolveCursors(c *Coll) error {
	for _, p := range []struct {
		cur *plan.Cursor
		out *[]byte
	}{{r.spec.After, &r.after}, {r.spec.Before, &r.before}} {
		if p.cur == nil {
			continue
		}
		key := p.cur.Key
		if p.cur.Lookup {
			v := c.records.Get(p.cur.ID[:])
			if v == nil {
				return fmt.Errorf("%w: %s (any more); continue from its value with AfterValue or BeforeValue", errs.ErrCursorNotFound, p.cur.ID)
			}
			payload, err := Payload(p.cur.ID[:], v)
			if err != nil {
				return fmt.Errorf("cursor record %s: %w", p.cur.ID, err)
			}
			if key, err = orderKey(nil, payload, r.spec.Order); err != nil {
				return err
			}
		}
		*p.out = append(append([]byte(nil), key...), p.cur.ID[:]...)
	}
	return nil
}

// orderKey appends the order key of the value at path in payload (null for
// a missing field). A path that goes through a list has no order key: a
// list may give it several values (mpack.PathValues), so ordering by it is
// ErrInvalidQuery.
func orderKey(dst, payload []byte, path []string) ([]byte, error) {
	var raw []byte
	fanned, err := mpack.PathValues(payload, path, func(v []byte) bool {
		raw = v
		return true
	})
	if err != nil {
		return dst, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	}
	if fanned {
		return dst, fmt.Errorf("%w: the order by %s goes through a list in a matching record, which gives it no single value (query the list with Field(…) conditions or ElemMatch instead)",
			plan.ErrInvalidQuery, plan.PathString(path))
	}
	dst, err = order.AppendRaw(dst, raw)
	if err != nil {
		return dst, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	}
	return dst, nil
}

// inCursors reports whether a sequence key lies strictly between the keyset
// cursors, in the sequence's direction.
func (r *Run) inCursors(seq []byte) bool {
	desc := r.spec.Desc
	if r.after != nil {
		if c := bytes.Compare(seq, r.after); (c <= 0 && !desc) || (c >= 0 && desc) {
			return false
		}
	}
	if r.before != nil {
		if c := bytes.Compare(seq, r.before); (c >= 0 && !desc) || (c <= 0 && desc) {
			return false
		}
	}
	return true
}

// nextIDs streams the records of the id range.
func (r *Run) nextIDs(c *Coll, max int, dst []Item) []Item {
	return r.nextIDsOn(c.records.Cursor(), max, dst)
}

// nextIDsOn is nextIDs over cursor bc of the records.
func (r *Run) nextIDsOn(bc kv.Cursor, max int, dst []Item) []Item {
	start := len(dst)
	var examined int
	dst = scanCursor(bc, &r.ids, r.match, max, ChunkExamined, dst, &examined, r.reuse)
	r.Stats.RecordsRead += examined
	r.took(dst[start:])
	if r.ids.Done {
		r.Done = true
	}
	return dst
}

// took counts the records a chunk returns (not the errors it reports).
func (r *Run) took(items []Item) {
	for _, it := range items {
		if it.Err == nil {
			r.left--
			r.Stats.Returned++
		}
	}
	if r.left <= 0 {
		r.Done = true
	}
}

// nextIndex streams the records of one index scan in its key order.
func (r *Run) nextIndex(c *Coll, ix *collIndex, max int, dst []Item) ([]Item, error) {
	w := &r.walks[0]
	cur, err := ix.cursor()
	if err != nil {
		return dst, err
	}
	w.reposition()
	if c.pipe != nil {
		return r.nextIndexGrouped(c, w, cur, max, dst)
	}
	start := len(dst)
	taken, size := 0, 0
	for examined := 0; taken < max && examined < ChunkExamined && size < chunkBytes; examined++ {
		k := w.next(cur)
		if k == nil {
			r.Done = true
			break
		}
		r.Stats.KeysRead++
		id := keyID(k)
		if !r.inIDs(id) || (r.spec.Order != nil && !r.inCursors(w.seqKey(k))) {
			continue
		}
		item, keep := r.fetch(c, id)
		if keep && item.Err == nil && len(r.spec.Order) > 1 {
			// The plan saw no record whose order path goes through a
			// list; one written since fails the query as a sort would.
			if r.orderK, err = orderKey(r.orderK[:0], item.Payload, r.spec.Order); err != nil {
				return dst, err
			}
		}
		if keep {
			dst = append(dst, item)
			taken++
			size += len(item.Payload)
		}
	}
	ownPayloads(dst[start:], r.reuse)
	r.took(dst[len(dst)-taken:])
	return dst, nil
}

// fetch reads and checks the record an index key points to; its payload
// aliases the transaction's memory.
func (r *Run) fetch(c *Coll, id uuidv7.UUID) (Item, bool) {
	v := c.records.Get(id[:])
	if v == nil {
		return Item{}, false // an entry without its record: Verify reports it
	}
	r.Stats.RecordsRead++
	return readItem(id, id[:], v, r.match)
}

func (r *Run) inIDs(id uuidv7.UUID) bool {
	return !r.spec.Empty && id.Compare(r.spec.Lo) >= 0 && id.Compare(r.spec.Hi) <= 0
}

func keyID(k []byte) uuidv7.UUID {
	var id uuidv7.UUID
	copy(id[:], k[len(k)-16:])
	return id
}

// nextCollect gathers candidates (first phase, over as many chunks as it
// takes), then returns them in order.
func (r *Run) nextCollect(c *Coll, ixs []*collIndex, max int, dst []Item) ([]Item, error) {
	if !r.emitting {
		if err := r.gather(c, ixs); err != nil {
			return dst, err
		}
		if !r.emitting {
			return dst, nil // more to gather: the caller comes back
		}
	}
	return r.emit(c, max, dst), nil
}

// gather examines one chunk's worth of candidates.
func (r *Run) gather(c *Coll, ixs []*collIndex) error {
	if r.seen == nil && r.access.Kind != plan.AccessIDs {
		r.seen = map[uuidv7.UUID]struct{}{}
	}
	budget := ChunkExamined
	if r.access.Kind == plan.AccessIDs {
		for budget > 0 && !r.ids.Done {
			var examined int
			items := scanColl(c, &r.ids, r.match, ChunkRecords, budget, nil, &examined, nil)
			budget -= examined
			r.Stats.RecordsRead += examined
			for _, it := range items {
				if err := r.consider(it); err != nil {
					return err
				}
			}
		}
		if r.ids.Done {
			r.startEmitting()
		}
		return nil
	}
	for ; r.walk < len(r.walks); r.walk++ {
		w := &r.walks[r.walk]
		cur, err := ixs[r.walk].cursor()
		if err != nil {
			return err
		}
		w.reposition()
		if err := r.gatherWalk(c, w, cur, &budget); err != nil {
			return err
		}
		if budget == 0 {
			return nil
		}
	}
	r.startEmitting()
	return nil
}

// consider adds one matching record to the hits: its position in the
// output order, and its payload while the hits fit the limit.
func (r *Run) consider(it Item) error {
	if it.Err != nil {
		// Unreadable: reported ahead of the sorted records.
		r.hits.errs = append(r.hits.errs, it)
		return nil
	}
	seq := it.ID[:]
	if r.spec.Order != nil {
		var err error
		if r.orderK, err = orderKey(r.orderK[:0], it.Payload, r.spec.Order); err != nil {
			return err
		}
		seq = append(append(make([]byte, 0, len(r.orderK)+16), r.orderK...), it.ID[:]...)
		if !r.inCursors(seq) {
			return nil
		}
	} else {
		seq = bytes.Clone(seq)
	}
	h := hit{seq: seq, id: it.ID, payload: it.Payload}
	r.hits.less = r.outputBefore
	if r.spec.Limit > 0 {
		// Keep the first Limit hits of the output order: a heap whose top
		// is the last of them.
		if r.hits.Len() < r.spec.Limit {
			heap.Push(&r.hits, h)
		} else if r.outputBefore(h, r.hits.items[0]) {
			r.hits.items[0] = h
			heap.Fix(&r.hits, 0)
		}
		return nil
	}
	// Without a limit, records are kept up to a memory budget; past it only
	// positions are, and those records are read again when returned.
	if r.kept+len(h.payload) <= collectKeep {
		r.kept += len(h.payload)
	} else {
		h.payload = nil
	}
	r.hits.items = append(r.hits.items, h)
	return nil
}

// collectKeep bounds the record bytes a collecting run without a limit
// holds while it gathers.
const collectKeep = 8 << 20

// outputBefore reports whether a comes before b in the output.
func (r *Run) outputBefore(a, b hit) bool {
	c := bytes.Compare(a.seq, b.seq)
	if r.walkForward() {
		return c < 0
	}
	return c > 0
}

func (r *Run) startEmitting() {
	r.emitting = true
	r.seen = nil
	items := r.hits.items
	slices.SortFunc(items, func(a, b hit) int {
		switch {
		case r.outputBefore(a, b):
			return -1
		case r.outputBefore(b, a):
			return 1
		}
		return 0
	})
}

// emit returns the next sorted hits, reading again the records whose
// payload was not kept (and checking them again: a record may have changed
// between chunks; inside a transaction nothing can).
func (r *Run) emit(c *Coll, max int, dst []Item) []Item {
	for len(r.hits.errs) > 0 && max > 0 {
		dst = append(dst, r.hits.errs[0])
		r.hits.errs = r.hits.errs[1:]
	}
	start := len(dst)
	for ; r.emitAt < len(r.hits.items) && len(dst)-start < max; r.emitAt++ {
		h := r.hits.items[r.emitAt]
		if h.payload != nil {
			dst = append(dst, Item{ID: h.id, Payload: h.payload})
			continue
		}
		if item, keep := r.fetch(c, h.id); keep {
			if item.Err == nil {
				item.Payload = bytes.Clone(item.Payload)
			}
			dst = append(dst, item)
		}
	}
	if r.emitAt == len(r.hits.items) {
		r.Done = true
	}
	r.took(dst[start:])
	return dst
}

// hitHeap is a max-heap in output order (its top is the hit that comes
// last), holding the first Limit hits of a collecting run.
type hitHeap struct {
	items []hit
	errs  []Item
	less  func(a, b hit) bool
}

func (h *hitHeap) Len() int           { return len(h.items) }
func (h *hitHeap) Less(i, j int) bool { return h.less(h.items[j], h.items[i]) }
func (h *hitHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *hitHeap) Push(x any)         { h.items = append(h.items, x.(hit)) }
func (h *hitHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// Countable reports, once the run has been planned (by a first Count),
// whether its index keys decide the whole condition, so that Count needs no
// record; any keyset cursor must then be a position in that index's order.
func (r *Run) Countable() bool {
	// An order path of several segments may go through a list in a
	// matching record, which fails the query: only its records tell.
	return r.planned && (r.mode == modeNone || r.access.Exact && r.mode != modeIDs && len(r.spec.Order) <= 1 &&
		(r.access.Ordered || r.after == nil && r.before == nil))
}

// Count counts, for CountMatching, what the run would return, limit
// included, from index keys alone: distinct ids in the scans' ranges. It
// returns without counting when the run is not Countable (run it then), and
// comes back unfinished (r.Done false) when a chunk's budget runs out.
func (r *Run) Count(c *Coll) error {
	if c == nil {
		r.Done = true
		return nil
	}
	ixs, err := r.prepare(c)
	if err != nil {
		r.Done = true
		return err
	}
	if !r.Countable() {
		return nil
	}
	if r.mode == modeNone {
		r.Done = true
		return nil
	}
	if r.seen == nil {
		r.seen = map[uuidv7.UUID]struct{}{}
	}
	single := len(r.walks) == 1 && !r.access.Scans[0].Element && !r.access.Scans[0].Repeats
	for ; r.walk < len(r.walks); r.walk++ {
		w := &r.walks[r.walk]
		cur, err := ixs[r.walk].cursor()
		if err != nil {
			return err
		}
		w.reposition()
		for budget := ChunkExamined * 4; budget > 0; budget-- {
			k := w.next(cur)
			if k == nil {
				break
			}
			r.Stats.KeysRead++
			id := keyID(k)
			if !r.inIDs(id) || (r.spec.Order != nil && r.access.Ordered && !r.inCursors(w.seqKey(k))) {
				continue
			}
			if !single {
				if _, dup := r.seen[id]; dup {
					continue
				}
				r.seen[id] = struct{}{}
			}
			r.left--
			r.Stats.Returned++
			if r.left <= 0 {
				r.Done = true
				return nil
			}
		}
		if w.more {
			return nil // more keys: the caller comes back
		}
	}
	r.Done = true
	return nil
}

// CountChunk is Count in a short read transaction of its own. The caller
// must hold Enter.
func (db *DB) CountChunk(h Handle, r *Run) error {
	return db.ViewRun(r, func(tx *Tx) error {
		c, err := tx.Use(h, false)
		if err != nil {
			return err
		}
		return r.Count(c)
	})
}

// keyWalk walks the entries of one index scan over its ranges, in one
// direction, resuming after the last key it returned: each chunk opens a
// new cursor in a new transaction and calls reposition first.
type keyWalk struct {
	ranges  [][2][]byte // whole-key ranges [lo, hi), ascending; nil hi: none
	forward bool
	lowEx   []byte // exclusive bounds on whole keys from keyset cursors
	highEx  []byte
	prefix  []byte // entry kind ‖ OrderPrefix: cut before the sequence key
	i       int    // ranges done, in walk order
	last    []byte
	fresh   bool // the cursor must be positioned before the next key
	more    bool // keys may remain
}

func newKeyWalk(s plan.Scan, forward, ordered bool, r *Run) keyWalk {
	kind := byte(entryWhole)
	if s.Element {
		kind = entryElement
	}
	w := keyWalk{forward: forward, more: true, prefix: []byte{kind}}
	for _, rg := range s.Ranges {
		lo := append([]byte{kind}, rg.Lo...)
		hi := []byte{kind + 1}
		if rg.Hi != nil {
			hi = append([]byte{kind}, rg.Hi...)
		}
		w.ranges = append(w.ranges, [2][]byte{lo, hi})
	}
	if ordered && r.spec.Order != nil {
		w.prefix = append(w.prefix, r.access.OrderPrefix...)
		// In a descending sequence After is below the cursor's key.
		after, before := r.after, r.before
		if r.spec.Desc {
			after, before = before, after
		}
		if after != nil {
			w.lowEx = append(bytes.Clone(w.prefix), after...)
		}
		if before != nil {
			w.highEx = append(bytes.Clone(w.prefix), before...)
		}
	}
	return w
}

// seqKey is the position of an entry in the order sequence: its key after
// the kind byte and the equality prefix.
func (w *keyWalk) seqKey(k []byte) []byte { return k[len(w.prefix):] }

func (w *keyWalk) reposition() { w.fresh = true }

// next returns the next key of the walk, or nil at its end.
func (w *keyWalk) next(c kv.Cursor) []byte {
	for w.i < len(w.ranges) {
		rg := w.ranges[w.i]
		if !w.forward {
			rg = w.ranges[len(w.ranges)-1-w.i]
		}
		lo, hi := rg[0], rg[1]
		var k []byte
		if w.fresh {
			w.fresh = false
			k = w.position(c, lo, hi)
		} else if w.forward {
			k, _ = c.Next()
		} else {
			k, _ = c.Prev()
		}
		if k == nil || (w.forward && (bytes.Compare(k, hi) >= 0 || w.highEx != nil && bytes.Compare(k, w.highEx) >= 0)) ||
			(!w.forward && (bytes.Compare(k, lo) < 0 || w.lowEx != nil && bytes.Compare(k, w.lowEx) <= 0)) {
			w.i++
			w.fresh = true
			continue
		}
		w.last = append(w.last[:0], k...)
		return k
	}
	w.more = false
	return nil
}

// position puts the cursor on the first key of the current range the walk
// has not returned yet: after the last key returned (when it lies in this
// range), or at the range's start, or past a keyset cursor.
func (w *keyWalk) position(c kv.Cursor, lo, hi []byte) []byte {
	if w.forward {
		from, inclusive := lo, true
		if w.lowEx != nil && bytes.Compare(w.lowEx, from) >= 0 {
			from, inclusive = w.lowEx, false
		}
		if w.last != nil && bytes.Compare(w.last, from) >= 0 {
			from, inclusive = w.last, false
		}
		k, _ := c.Seek(from)
		if k != nil && !inclusive && bytes.Equal(k, from) {
			k, _ = c.Next()
		}
		return k
	}
	to, inclusive := hi, false // the walk starts below to
	if w.highEx != nil && bytes.Compare(w.highEx, to) < 0 {
		to = w.highEx
	}
	if w.last != nil && bytes.Compare(w.last, to) <= 0 {
		to = w.last
	}
	k, _ := c.Seek(to)
	if k == nil {
		k, _ = c.Last()
	} else if !inclusive || !bytes.Equal(k, to) {
		k, _ = c.Prev()
	}
	return k
}
