package engine

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"

	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
	"github.com/storhdb/storh-go/storh/internal/plan"
)

// Group is one group of an aggregation: the values of its group-by paths
// and the aggregates' results, both in the AggSpec's order.
type Group struct {
	Key    []any
	Values []any
}

// Aggregation computes an AggSpec over the records a Spec selects. Run
// reads them all in the caller's transaction, so the groups describe one
// snapshot, whichever way it reads:
//   - Count grouped by exactly the paths of an index that does not fan out,
//     with no condition or conditions that index's keys decide, counts its
//     entries: no record is read (plan.GroupCountAccess);
//   - Count alone, not grouped, counts distinct ids among index keys when
//     an index decides the whole condition, as CountMatching does;
//   - Min and Max alone, not grouped, over the whole collection, read one
//     entry at each end of an index on their paths (plan.EndsIndexes);
//   - anything else selects the records exactly as Find does (a Run, with
//     its plan) and reads from each only the paths it groups and aggregates.
type Aggregation struct {
	Spec *plan.Spec
	Agg  *plan.AggSpec
	// Stop, when set, is asked between chunks of records and of index
	// keys; its error ends the run (a context that is done).
	Stop func() error

	Groups  []Group
	Stats   RunStats
	Skipped []Item // unreadable records skipped, with Spec.OnError set
}

// Run computes the groups from c (nil: a collection not created yet, which
// has none). It sets the results afresh, so a read that runs it again (see
// DB.ViewSafe) gets the same answer.
func (ag *Aggregation) Run(c *Coll) error {
	ag.Groups, ag.Stats, ag.Skipped = nil, RunStats{}, nil
	if c == nil {
		return nil
	}
	defs, ready, err := c.readyIndexes()
	if err != nil {
		return err
	}
	g := newGrouper(ag.Agg)
	switch {
	case len(ag.Agg.GroupBy) > 0 && ag.Agg.CountsOnly():
		if a, ok := plan.GroupCountAccess(ag.Spec, defs, ag.Agg.GroupBy); ok {
			if err := ag.countEntries(g, a, ready); err != nil {
				return err
			}
			return ag.finish(g)
		}
	case ag.Agg.CountsOnly():
		if done, err := ag.countKeys(c); done || err != nil {
			return err
		}
	default:
		if at, ok := plan.EndsIndexes(ag.Spec, defs, ag.Agg); ok {
			return ag.readEnds(at, ready)
		}
	}
	if err := ag.scan(c, g); err != nil {
		return err
	}
	return ag.finish(g)
}

// scan feeds the records the query selects to g.
func (ag *Aggregation) scan(c *Coll, g *grouper) error {
	r := NewRun(ag.Spec)
	var lent []byte
	r.Lend(&lent)
	items := make([]Item, 0, ChunkRecords)
	var err error
	for !r.Done {
		if err := ag.stopped(); err != nil {
			return err
		}
		if items, err = r.Next(c, ChunkRecords, items[:0]); err != nil {
			return err
		}
		for _, it := range items {
			if it.Err != nil {
				if ag.Spec.OnError == nil {
					return fmt.Errorf("record %s: %w", it.ID, it.Err)
				}
				ag.Skipped = append(ag.Skipped, it)
				continue
			}
			if err := g.add(it.Payload); err != nil {
				return fmt.Errorf("record %s: %w", it.ID, err)
			}
		}
	}
	ag.Stats = r.Stats
	return nil
}

func (ag *Aggregation) stopped() error {
	if ag.Stop == nil {
		return nil
	}
	return ag.Stop()
}

// countEntries counts the whole entries of the index scan a, grouped by
// their value keys, which are the group keys: the index's paths are the
// group-by paths, in order.
func (ag *Aggregation) countEntries(g *grouper, a plan.Access, ready []*collIndex) error {
	if a.Kind == plan.AccessNone {
		return nil
	}
	s := a.Scans[0]
	ix := ready[s.Index]
	ag.Stats.Indexes = []string{ix.name}
	cur, err := ix.cursor()
	if err != nil {
		return err
	}
	w := newKeyWalk(s, true, false, nil)
	w.reposition()
	spec := ag.Spec
	var last *groupState // the entries of one value are next to each other
	for k := w.next(cur); k != nil; k = w.next(cur) {
		ag.Stats.KeysRead++
		if ag.Stats.KeysRead%ChunkExamined == 0 {
			if err := ag.stopped(); err != nil {
				return err
			}
		}
		if id := keyID(k); id.Compare(spec.Lo) < 0 || id.Compare(spec.Hi) > 0 {
			continue
		}
		if vk := k[1 : len(k)-16]; last == nil || !bytes.Equal(vk, last.key) {
			last = g.group(vk)
		}
		last.count++
	}
	return cursorDamage(cur)
}

// countKeys answers counts alone, not grouped, as CountMatching does when
// an index decides the whole condition: distinct ids among its keys. done
// is false when the index cannot (Run.Countable), and the records must be
// read.
func (ag *Aggregation) countKeys(c *Coll) (done bool, err error) {
	r := NewRun(ag.Spec)
	for !r.Done {
		if err := ag.stopped(); err != nil {
			return true, err
		}
		if err := r.Count(c); err != nil {
			return true, err
		}
		if !r.Countable() {
			return false, nil
		}
	}
	ag.Stats = r.Stats
	ag.Stats.Returned = 0
	if n := int64(r.Stats.Returned); n > 0 {
		values := make([]any, len(ag.Agg.Aggs))
		for i := range values {
			values[i] = n
		}
		ag.Groups = []Group{{Key: []any{}, Values: values}}
		ag.Stats.Returned = 1
	}
	return true, nil
}

// readEnds answers Min and Max from the ends of the indexes at[i], one per
// aggregate: the least value is the first entry past the nulls (missing
// fields and nulls, which Min skips, key as null, the least class), the
// greatest the last entry. A collection with no entry has no record: no
// group.
func (ag *Aggregation) readEnds(at []int, ready []*collIndex) error {
	values := make([]any, len(ag.Agg.Aggs))
	for i, d := range ag.Agg.Aggs {
		ix := ready[at[i]]
		if !slices.Contains(ag.Stats.Indexes, ix.name) {
			ag.Stats.Indexes = append(ag.Stats.Indexes, ix.name)
		}
		cur, err := ix.cursor()
		if err != nil {
			return err
		}
		k, _ := cur.First()
		ag.Stats.KeysRead++
		if k == nil || k[0] != entryWhole {
			return cursorDamage(cur) // no record at all
		}
		if d.Kind == plan.AggMin {
			k, _ = cur.Seek([]byte{entryWhole, order.TagNull + 1})
		} else if k, _ = cur.Seek([]byte{entryWhole + 1}); k == nil {
			k, _ = cur.Last()
		} else {
			k, _ = cur.Prev()
		}
		if err := cursorDamage(cur); err != nil {
			return err
		}
		ag.Stats.KeysRead++
		if k == nil || k[0] != entryWhole || k[1] == order.TagNull {
			continue // every value is null or missing
		}
		if values[i], _, err = order.Decode(k[1 : len(k)-16]); err != nil {
			return fmt.Errorf("%w: index %q: %v", errs.ErrCorrupt, ix.name, err)
		}
	}
	ag.Groups = []Group{{Key: []any{}, Values: values}}
	ag.Stats.Returned = 1
	return nil
}

// finish turns g's groups into results, sorted by key.
func (ag *Aggregation) finish(g *grouper) error {
	slices.SortFunc(g.groups, func(a, b *groupState) int { return bytes.Compare(a.key, b.key) })
	ag.Groups = make([]Group, 0, len(g.groups))
	for _, gs := range g.groups {
		out := Group{Key: make([]any, len(ag.Agg.GroupBy)), Values: make([]any, len(ag.Agg.Aggs))}
		rest := gs.key
		for i := range out.Key {
			var err error
			if out.Key[i], rest, err = order.Decode(rest); err != nil {
				return fmt.Errorf("%w: group key: %v", errs.ErrCorrupt, err)
			}
		}
		for i, d := range ag.Agg.Aggs {
			v, err := gs.accs[i].result(d, gs.count)
			if err != nil {
				return err
			}
			out.Values[i] = v
		}
		ag.Groups = append(ag.Groups, out)
	}
	ag.Stats.Returned = len(ag.Groups)
	return nil
}

// grouper gathers records into groups keyed by the order keys of their
// group-by values, concatenated: equal keys are equal values (the order's
// equality: 1 and 1.0 are two groups, every NaN one), and the keys sort the
// groups in the total order, path by path. A record costs no allocation
// beyond its group's first: the map is looked up by the key's bytes, and
// values are read from the payload without decoding it.
type grouper struct {
	a      *plan.AggSpec
	at     map[string]*groupState
	groups []*groupState
	key    []byte // the group key being built
	vk     []byte // the order key of a value being compared

	// The aggregate being fed by take, made once so that a record's paths
	// are walked without a closure allocated per record.
	acc  *aggState
	kind plan.AggKind
	err  error
	take func(raw []byte) bool
	// The first value a group-by path reached, set by first.
	raw   []byte
	first func(raw []byte) bool
}

type groupState struct {
	key   []byte
	count int64 // records
	accs  []aggState
}

// aggState is one aggregate's running state in one group.
type aggState struct {
	n      int64  // numbers seen (Sum, Avg)
	ints   int128 // their integers, exactly
	floats fsum   // their floats, exactly
	float  bool   // a float was among them
	best   []byte // Min, Max: the order key of the best value so far
}

func newGrouper(a *plan.AggSpec) *grouper {
	g := &grouper{a: a, at: map[string]*groupState{}}
	g.take = g.takeValue
	g.first = func(raw []byte) bool { g.raw = raw; return false }
	return g
}

// group returns the group of key, made on first sight.
func (g *grouper) group(key []byte) *groupState {
	if gs, ok := g.at[string(key)]; ok {
		return gs
	}
	gs := &groupState{key: bytes.Clone(key), accs: make([]aggState, len(g.a.Aggs))}
	g.at[string(gs.key)] = gs
	g.groups = append(g.groups, gs)
	return gs
}

// add adds one record's payload to its group.
func (g *grouper) add(payload []byte) error {
	g.key = g.key[:0]
	for _, path := range g.a.GroupBy {
		g.raw = nil
		fanned, err := mpack.PathValues(payload, path, g.first)
		if err != nil {
			return fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
		}
		if fanned {
			return fmt.Errorf("%w: the group-by path %s goes through a list in a matching record, which gives it no single value (group by the list itself, or select the records with Field(…) conditions or ElemMatch)",
				plan.ErrInvalidQuery, plan.PathString(path))
		}
		if g.key, err = order.AppendRaw(g.key, g.raw); err != nil {
			return fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
		}
	}
	gs := g.group(g.key)
	gs.count++
	for i, d := range g.a.Aggs {
		if d.Kind == plan.AggCount {
			continue
		}
		g.acc, g.kind = &gs.accs[i], d.Kind
		if _, err := mpack.PathValues(payload, d.Path, g.take); err != nil {
			return fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
		}
		if g.err != nil {
			return g.err
		}
	}
	return nil
}

// takeValue feeds one value an aggregate's path reached to g.acc.
func (g *grouper) takeValue(raw []byte) bool {
	a := g.acc
	switch g.kind {
	case plan.AggSum, plan.AggAvg:
		h, err := mpack.ReadHead(raw, 0)
		if err != nil {
			g.err = fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
			return false
		}
		switch h.Kind {
		case mpack.KindInt:
			a.ints.addInt(int64(h.Bits))
		case mpack.KindUint:
			a.ints.addUint(h.Bits)
		case mpack.KindFloat32:
			a.floats.add(float64(math.Float32frombits(uint32(h.Bits))))
			a.float = true
		case mpack.KindFloat64:
			a.floats.add(math.Float64frombits(h.Bits))
			a.float = true
		default:
			return true // not a number: skipped
		}
		a.n++
	case plan.AggMin, plan.AggMax:
		var err error
		if g.vk, err = order.AppendRaw(g.vk[:0], raw); err != nil {
			g.err = fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
			return false
		}
		if g.vk[0] == order.TagNull {
			return true
		}
		c := bytes.Compare(g.vk, a.best)
		if a.best == nil || (g.kind == plan.AggMin && c < 0) || (g.kind == plan.AggMax && c > 0) {
			a.best = append(a.best[:0], g.vk...)
		}
	}
	return true
}

// result is the aggregate's value for a group of count records.
func (a *aggState) result(d plan.AggDef, count int64) (any, error) {
	switch d.Kind {
	case plan.AggCount:
		return count, nil
	case plan.AggSum:
		if !a.float {
			v, ok := a.ints.int64()
			if !ok {
				return nil, fmt.Errorf("%w: the integer sum of %s is outside int64's range (%d to %d); it is an error rather than a wrap — Avg gives the mean as a float64",
					plan.ErrInvalidQuery, plan.PathString(d.Path), int64(math.MinInt64), int64(math.MaxInt64))
			}
			return v, nil
		}
		return a.total(), nil
	case plan.AggAvg:
		if a.n == 0 {
			return nil, nil
		}
		return a.total() / float64(a.n), nil
	}
	if a.best == nil {
		return nil, nil
	}
	v, _, err := order.Decode(a.best)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	}
	return v, nil
}

// total is the exact sum of the floats and the integers, rounded once.
func (a *aggState) total() float64 {
	f := a.floats // a copy: total may be asked twice
	f.partials = slices.Clone(f.partials)
	if f.wide != nil {
		f.wide = new(big.Float).Copy(f.wide)
	}
	// hi*2^64 is exact while |hi| < 2^53, which a count of int64s keeps;
	// lo splits into two float64s that hold it exactly.
	f.add(float64(a.ints.hi) * 0x1p64)
	f.add(float64(a.ints.lo >> 11 << 11))
	f.add(float64(a.ints.lo & 2047))
	return f.value()
}

// int128 is a two's-complement sum hi·2^64 + lo: a sum of fewer than 2^63
// int64s or uint64s cannot overflow it, so whether an integer sum fits
// int64 is decided on the total, whatever order the values came in.
type int128 struct {
	lo uint64
	hi int64
}

func (s *int128) addInt(v int64) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, uint64(v), 0)
	s.hi += int64(carry) + v>>63 // v>>63 is -1 for a negative v: its sign extension
}

func (s *int128) addUint(v uint64) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, v, 0)
	s.hi += int64(carry)
}

func (s int128) int64() (int64, bool) {
	v := int64(s.lo)
	return v, s.hi == v>>63
}

// fsum is an exact sum of float64s: Shewchuk's non-overlapping partials,
// as Python's math.fsum keeps them, rounded once at the end. Its value is
// the correctly rounded sum, so it does not depend on the order of the
// additions: an index scan and a scan by id give the same float. Partials
// cannot overflow while every value and the largest partial stay below
// 2^1020; past that the sum goes on in a big.Float wide enough to hold any
// sum of float64s exactly (rare, and slower).
type fsum struct {
	partials        []float64
	wide            *big.Float
	nan, pinf, ninf bool
}

// wideFrom is where fsum leaves partials for a big.Float.
const wideFrom = 0x1p1000

// wideBits holds a sum of float64s exactly: from 2^1024 down to 2^-1074,
// and 64 bits of carries.
const wideBits = 1024 + 1074 + 64

func (s *fsum) add(x float64) {
	switch {
	case math.IsNaN(x):
		s.nan = true
		return
	case math.IsInf(x, 1):
		s.pinf = true
		return
	case math.IsInf(x, -1):
		s.ninf = true
		return
	}
	if s.wide == nil && math.Abs(x) >= wideFrom {
		s.widen()
	}
	if s.wide != nil {
		s.wide.Add(s.wide, new(big.Float).SetFloat64(x))
		return
	}
	i := 0
	for _, y := range s.partials {
		if math.Abs(x) < math.Abs(y) {
			x, y = y, x
		}
		hi := x + y
		lo := y - (hi - x)
		if lo != 0 {
			s.partials[i] = lo
			i++
		}
		x = hi
	}
	s.partials = append(s.partials[:i], x)
	if math.Abs(x) >= 0x1p1020 { // x is the largest partial
		s.widen()
	}
}

func (s *fsum) widen() {
	s.wide = new(big.Float).SetPrec(wideBits)
	for _, p := range s.partials {
		s.wide.Add(s.wide, new(big.Float).SetFloat64(p))
	}
	s.partials = nil
}

func (s *fsum) value() float64 {
	switch {
	case s.nan || s.pinf && s.ninf:
		return math.NaN()
	case s.pinf:
		return math.Inf(1)
	case s.ninf:
		return math.Inf(-1)
	case s.wide != nil:
		f, _ := s.wide.Float64() // nearest, ±Inf beyond float64's range
		return f
	}
	p := s.partials
	n := len(p)
	if n == 0 {
		return 0
	}
	n--
	hi, lo := p[n], 0.0
	for n > 0 {
		x, y := hi, p[n-1]
		n--
		hi = x + y
		lo = y - (hi - x)
		if lo != 0 {
			break
		}
	}
	// Round half to even across the partials the loop did not reach.
	if n > 0 && (lo < 0 && p[n-1] < 0 || lo > 0 && p[n-1] > 0) {
		y := lo * 2
		x := hi + y
		if y == x-hi {
			hi = x
		}
	}
	return hi
}
