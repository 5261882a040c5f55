package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/engine/internal/blockindex"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Secondary indexes. A collection's indexes live beside its records:
//
//	<collection>/
//	    "x"/  index definitions: name → msgpack {paths, unique, building, mark, entries, …}
//	    "i"/  index entries, one bucket per index name
//	    "l"/  the journals of blocked indexes, one bucket per index name
//	    "u"/  the claims of unique indexes, one bucket per index name (claims.go)
//
// An index's entries are keys:
//
//	0x00 ‖ value key(s) ‖ record id   one entry per record (the whole value)
//	0x01 ‖ element key  ‖ record id   one per distinct element of a list value
//	                                  (single-field indexes only, for Contains)
//	0x02 ‖ path number  ‖ record id   the record's values at that path went
//	                                  through a list (a multikey record)
//
// A path that meets a list goes on into each of its elements
// (mpack.PathValues), so it may reach several values: the record then has
// one whole entry per distinct value there, and the 0x02 mark, which tells
// the planner (one seek) that the index's entries may repeat a record on
// that path. At most one path of an index may reach several values in one
// record.
//
// A value key is the order key (package order) of the field's value, null
// for a missing field; a compound index concatenates one per path. Keys are
// ordered exactly like the values, then by id, so equality, ranges,
// prefixes and sorted reads are seeks and walks, and an entry is one key, never
// a list that grows with the values. Entries are written in the same
// transaction as their record.
//
// An index stores its entry keys in one of two layouts (indexDef.Layout):
// one bbolt key per entry (layoutKeys), or packed in blocks with a journal
// of the changes not folded into them yet (layoutBlocks, internal/blockindex).
// Both read as the same sorted keys. A bbolt file's new indexes are
// blocked: a B+tree whose pages are copied on every write pays a page per
// scattered key per commit otherwise. A PostgreSQL store's are keys: its
// B-tree writes an entry in place, and a key per entry needs no memory.
var (
	bucketIndexDefs    = []byte("x")
	bucketIndexEntries = []byte("i")
	bucketIndexJournal = []byte("l")
	bucketIndexClaims  = []byte("u")
)

const (
	layoutKeys   = 0
	layoutBlocks = 1
)

const (
	entryWhole   = 0x00
	entryElement = 0x01
	entryFanned  = 0x02
)

// maxIndexValue bounds the value key of one index entry: an indexed value
// whose order key is longer fails its write with ErrInvalidData (bbolt keys
// are limited, and a key that size would make every page hold a few).
const maxIndexValue = 4096

// maxIndexes bounds the indexes of one collection.
const maxIndexes = 64

// IndexSpec declares an index: its name, its field paths (each a list of
// map keys from the record's top level) and whether values must be unique.
type IndexSpec struct {
	Name   string
	Paths  [][]string
	Unique bool
}

// IndexInfo describes an index of a collection.
type IndexInfo struct {
	IndexSpec
	Entries   int    // index keys: one per record (one per distinct value where a path goes through a list, plus a mark), plus one per distinct list element
	Building  bool   // still being built: queries do not use it yet
	Built     int    // while building: records indexed so far (of the collection's Count)
	Layout    string // "keys" or "blocks"
	Journaled int    // blocks: changes in the journal, not folded into the blocks yet
	FoldError error  // blocks: why the index's last fold in this process failed; nil if it did not
}

// indexDef is an index as stored.
type indexDef struct {
	Paths    [][]string `msgpack:"paths"`
	Unique   bool       `msgpack:"unique"`
	Building bool       `msgpack:"building,omitempty"`
	Mark     []byte     `msgpack:"mark,omitempty"`  // while building: every record with an id <= Mark has its entries
	Built    int64      `msgpack:"built,omitempty"` // while building: records the build has indexed
	Entries  int64      `msgpack:"entries"`
	// Claims: a unique index whose values are claimed in a bucket of
	// their own, so that writers beside each other can tell a value
	// taken (claims.go). Made on a store whose writers run at once.
	Claims bool `msgpack:"claims,omitempty"`

	// A blocked index (Layout layoutBlocks) also records its journal: the
	// last sequence written and the last folded into the blocks, the
	// changes still journaled, and a fold in progress (every change up to
	// FoldTo whose key is below FoldNext is in the blocks). Inc tells this
	// index from an earlier one of the same name, for the views in memory.
	Layout   uint8  `msgpack:"layout,omitempty"`
	Inc      uint64 `msgpack:"inc,omitempty"`
	Seq      uint64 `msgpack:"seq,omitempty"`
	Floor    uint64 `msgpack:"floor,omitempty"`
	Pending  int64  `msgpack:"pending,omitempty"`
	FoldTo   uint64 `msgpack:"foldTo,omitempty"`
	FoldNext []byte `msgpack:"foldNext,omitempty"`
	// Chained: every block is of the current version, in one chain from
	// the head block (internal/blockindex), so a missing block is damage a read
	// finds. An index from a file of format 2 has blocks of version 1 until
	// chainStep rewrites them; ChainNext is where that stands (nil: not
	// started).
	Chained   bool   `msgpack:"chained,omitempty"`
	ChainNext []byte `msgpack:"chainNext,omitempty"`
	// Lists: the entries follow paths through lists (entryKeys). An index
	// made before that reads its paths through maps only: on single fields
	// its entries are the same, on a dotted path queries do not use it,
	// and an open for writing rebuilds it (upgradeLists), as Repair does.
	Lists bool `msgpack:"lists,omitempty"`
}

// collIndex is one index of a collection inside a transaction.
type collIndex struct {
	name    string
	def     indexDef
	entries kv.Bucket // the entry keys (layoutKeys) or the blocks (layoutBlocks)
	delta   int64
	changed bool // def changed (build progress): rewrite it at flush

	// A unique index's claims (def.Claims), and the claims this
	// transaction made or gave up, by value; inserted: one was made with
	// kv.Inserter, which only the server checks (blindConflict).
	claims   kv.Bucket
	claimed  map[string]claim
	inserted bool

	// A blocked index's journal, and as this transaction sees it: the
	// journal's sequences when the transaction began (base), the committed
	// changes (view, resolved on first use), the changes it made since its
	// last flush (pend) and those it journaled at a flush (flushed).
	journal  kv.Bucket
	base     struct{ Seq, Floor uint64 }
	view     *blockindex.View
	viewDone bool
	pend     *blockindex.Pending
	flushed  []journaled
	folded   bool     // a fold finished in this transaction
	collect  [][]byte // a rebuild's entries, collected instead of changed
	unique   [][]byte // … and its whole entries a unique index constrains
	coll     string
	mems     *ixMems     // the DB's views; nil outside a DB
	fail     func(error) // records damage found while reading (Coll.fail)
}

// journaled is one flush's changes, in key order: the records after
// sequence before, up to after.
type journaled struct {
	before, after uint64
	seg           *blockindex.Segment
}

// maintains reports whether writes of id must update this index: every
// ready index, and a building one for the ids its build has passed.
func (ix *collIndex) maintains(id uuidv7.UUID) bool {
	return !ix.def.Building || len(ix.def.Mark) == 16 && bytes.Compare(id[:], ix.def.Mark) <= 0
}

func (ix *collIndex) spec() IndexSpec {
	return IndexSpec{Name: ix.name, Paths: ix.def.Paths, Unique: ix.def.Unique}
}

// ValidateIndexSpec checks a declared index and fills in its default name,
// the paths joined with ",".
func ValidateIndexSpec(s *IndexSpec) error {
	if len(s.Paths) == 0 {
		return fmt.Errorf("%w: an index needs at least one field path", errs.ErrInvalidIndex)
	}
	names := make([]string, len(s.Paths))
	for i, p := range s.Paths {
		if len(p) == 0 || len(p) > api.MaxDepth {
			return fmt.Errorf("%w: index path %d has %d segments; want 1 to %d", errs.ErrInvalidIndex, i+1, len(p), api.MaxDepth)
		}
		for _, seg := range p {
			if seg == "" {
				return fmt.Errorf("%w: index path %q has an empty segment", errs.ErrInvalidIndex, strings.Join(p, "."))
			}
		}
		names[i] = plan.PathString(p)
		for _, q := range s.Paths[:i] {
			if slices.Equal(p, q) {
				return fmt.Errorf("%w: index names the path %q twice", errs.ErrInvalidIndex, names[i])
			}
		}
	}
	if s.Name == "" {
		s.Name = strings.Join(names, ",")
	}
	if err := validateName(s.Name); err != nil {
		return fmt.Errorf("%w: index name: %v", errs.ErrInvalidIndex, strings.TrimPrefix(err.Error(), "storh: "))
	}
	return nil
}

// indexes loads the collection's indexes once per transaction.
func (c *Coll) indexes() ([]*collIndex, error) {
	if c.idxLoaded {
		return c.idx, nil
	}
	c.idxLoaded = true
	defs := c.root.Bucket(bucketIndexDefs)
	if defs == nil {
		return nil, nil
	}
	entries := c.root.Bucket(bucketIndexEntries)
	journals := c.root.Bucket(bucketIndexJournal)
	claims := c.root.Bucket(bucketIndexClaims)
	err := forEach(defs, func(k, v []byte) error {
		ix := &collIndex{name: string(k), coll: c.Name, mems: c.mems, fail: c.fail}
		if err := msgpack.Unmarshal(v, &ix.def); err != nil || len(ix.def.Paths) == 0 || ix.def.Layout > layoutBlocks {
			return fmt.Errorf("%w: collection %q: index %q has an unreadable definition", errs.ErrCorrupt, c.Name, k)
		}
		if entries != nil {
			ix.entries = entries.Bucket(k)
		}
		if ix.entries == nil {
			return fmt.Errorf("%w: collection %q: index %q lacks its entries bucket", errs.ErrCorrupt, c.Name, k)
		}
		if ix.def.Claims {
			if claims != nil {
				ix.claims = claims.Bucket(k)
			}
			if ix.claims == nil {
				return fmt.Errorf("%w: collection %q: index %q lacks its claims bucket", errs.ErrCorrupt, c.Name, k)
			}
		}
		if ix.def.Layout == layoutBlocks {
			if journals != nil {
				ix.journal = journals.Bucket(k)
			}
			if ix.journal == nil {
				return fmt.Errorf("%w: collection %q: index %q lacks its journal bucket", errs.ErrCorrupt, c.Name, k)
			}
			ix.base.Seq, ix.base.Floor = ix.def.Seq, ix.def.Floor
		}
		if c.writable {
			ix.setFill()
		}
		c.idx = append(c.idx, ix)
		return nil
	})
	if err != nil {
		c.idx = nil
		c.idxLoaded = false
		return nil, err
	}
	return c.idx, nil
}

// indexFillPercent is between bbolt's default and the records' 1.0: index
// keys arrive in value order, not id order, so pages split in the middle and
// need room to take more keys.
const indexFillPercent = 0.7

// setFill sets the fill of ix's buckets for a write transaction.
func (ix *collIndex) setFill() {
	ix.entries.SetFillPercent(entriesFill(ix.def.Layout))
	if ix.def.Layout == layoutBlocks {
		ix.journal.SetFillPercent(appendFillPercent) // it grows at its end
	}
}

// entriesFill is the fill of an index's entries bucket in a layout: room
// for keys that arrive anywhere, or, for blocks, pages packed full (a
// block is about a page, rewritten whole, never grown in place). Compact
// fills its copies the same way.
func entriesFill(layout uint8) float64 {
	if layout == layoutBlocks {
		return appendFillPercent
	}
	return indexFillPercent
}

// index returns the index named name, or nil.
func (c *Coll) index(name string) (*collIndex, error) {
	all, err := c.indexes()
	for _, ix := range all {
		if ix.name == name {
			return ix, err
		}
	}
	return nil, err
}

// ReadyIndexes returns the indexes a query may use, as the planner sees
// them, and their entries in the same order.
func (c *Coll) readyIndexes() ([]plan.IndexDef, []*collIndex, error) {
	all, err := c.indexes()
	if err != nil {
		return nil, nil, err
	}
	var defs []plan.IndexDef
	var ixs []*collIndex
	for _, ix := range all {
		if ix.def.Building || ix.mapsOnly() {
			continue
		}
		d := plan.IndexDef{Name: ix.name, Paths: ix.def.Paths, Unique: ix.def.Unique}
		if d.Fanned, err = ix.fanned(); err != nil {
			return nil, nil, err
		}
		defs = append(defs, d)
		ixs = append(ixs, ix)
	}
	return defs, ixs, nil
}

// mapsOnly reports whether ix reads a dotted path through maps only, made
// before paths went through lists: its entries miss the values a query
// finds through lists, so queries must not use it until it is rebuilt.
func (ix *collIndex) mapsOnly() bool {
	if ix.def.Lists {
		return false
	}
	for _, p := range ix.def.Paths {
		if len(p) > 1 {
			return true
		}
	}
	return false
}

// fanned reports, per path of ix, whether some record's values there went
// through a list: one seek per dotted path for its mark (entryFanned).
func (ix *collIndex) fanned() ([]bool, error) {
	var out []bool
	var cur kv.Cursor
	for p, path := range ix.def.Paths {
		if len(path) == 1 {
			continue
		}
		if cur == nil {
			var err error
			if cur, err = ix.cursor(); err != nil {
				return nil, err
			}
			out = make([]bool, len(ix.def.Paths))
		}
		mark := []byte{entryFanned, byte(p)}
		k, _ := cur.Seek(mark)
		if err := cursorDamage(cur); err != nil {
			return nil, err
		}
		out[p] = bytes.HasPrefix(k, mark)
	}
	return out, nil
}

// Indexes lists the collection's indexes.
func (c *Coll) Indexes() ([]IndexInfo, error) {
	all, err := c.indexes()
	out := make([]IndexInfo, 0, len(all))
	for _, ix := range all {
		info := IndexInfo{IndexSpec: ix.spec(), Entries: int(c.entryCount(ix)), Building: ix.def.Building, Built: int(ix.def.Built), Layout: "keys"}
		if ix.def.Layout == layoutBlocks {
			info.Layout, info.Journaled = "blocks", int(ix.def.Pending)
			if c.mems != nil {
				info.FoldError = c.mems.foldFailure(c.Name, ix.name, ix.def.Inc)
			}
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b IndexInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// entryCount is ix's entries as this transaction sees them: the
// definition's count, the DBs' slots (slots.go) and its own changes.
func (c *Coll) entryCount(ix *collIndex) int64 {
	sum, _ := entrySlotSum(c.slotRows(), ix.name)
	return ix.def.Entries + sum + ix.delta
}

// entryKeys appends to keys the index keys of a record's payload for ix,
// cut from buf: its whole entries first (wholes of them, in key order),
// then its fan-out mark, then its element entries, one per distinct element
// of a list (single-field indexes). A path that goes through a list may
// reach several values (mpack.PathValues): the record then has a whole
// entry per distinct value there, a multikey index, and a mark that says
// which path fanned out; at most one path of an index may fan out in one
// record, else the record cannot be indexed (ErrInvalidIndex). The first
// nulls whole entries hold a null or missing value, which unique indexes
// do not constrain.
func (ix *collIndex) entryKeys(buf []byte, keys [][]byte, payload []byte, id uuidv7.UUID) (_ []byte, _ [][]byte, wholes, nulls int, err error) {
	start, first := len(buf), len(keys)
	fail := func(err error) ([]byte, [][]byte, int, int, error) { return buf[:start], keys[:first], 0, 0, err }
	buf = append(buf, entryWhole)
	null := false
	fanAt, cut := -1, 0 // the path that fanned out, and where its value goes in the template
	var fanned [][]byte // the distinct value keys it reached
	for p, path := range ix.def.Paths {
		var one []byte
		reached := 0
		var keyErr error
		fans, err := ix.reach(payload, path, func(raw []byte) bool {
			reached++
			one = raw
			return true
		})
		if err != nil {
			return fail(fmt.Errorf("%w: %v", errs.ErrCorrupt, err))
		}
		if !fans {
			if reached == 0 {
				one = nil
			}
			vstart := len(buf)
			if buf, err = order.AppendRaw(buf, one); err != nil {
				return fail(fmt.Errorf("%w: %v", errs.ErrCorrupt, err))
			}
			null = null || buf[vstart] == order.TagNull
			continue
		}
		if fanAt >= 0 {
			return fail(fmt.Errorf("%w: index %q: record %s reaches lists at both %s and %s; a compound index may go through a list on one of its paths only",
				errs.ErrInvalidIndex, ix.name, id, plan.PathString(ix.def.Paths[fanAt]), plan.PathString(path)))
		}
		fanAt, cut = p, len(buf)
		_, err = ix.reach(payload, path, func(raw []byte) bool {
			var k []byte
			if k, keyErr = order.AppendRaw(nil, raw); keyErr == nil {
				fanned = append(fanned, k)
			}
			return keyErr == nil
		})
		if err == nil {
			err = keyErr
		}
		if err != nil {
			return fail(fmt.Errorf("%w: %v", errs.ErrCorrupt, err))
		}
		if len(fanned) == 0 {
			missing, _ := order.AppendRaw(nil, nil)
			fanned = append(fanned, missing)
		}
		slices.SortFunc(fanned, bytes.Compare)
		fanned = slices.CompactFunc(fanned, bytes.Equal)
	}
	if fanAt < 0 {
		if buf, err = ix.appendWhole(buf, start, buf[start+1:], nil, nil, id); err != nil {
			return fail(err)
		}
		keys = append(keys, buf[start:len(buf):len(buf)])
		wholes = 1
		if null {
			nulls = 1
		}
	} else {
		template := len(buf)
		for _, v := range fanned {
			s := len(buf)
			if buf, err = ix.appendWhole(buf, s, buf[start+1:cut], v, buf[cut:template], id); err != nil {
				return fail(err)
			}
			keys = append(keys, buf[s:len(buf):len(buf)])
		}
		wholes = len(fanned)
		switch {
		case null:
			nulls = wholes
		case fanned[0][0] == order.TagNull:
			nulls = 1 // null sorts first
		}
		s := len(buf)
		buf = append(buf, entryFanned, byte(fanAt))
		buf = append(buf, id[:]...)
		keys = append(keys, buf[s:len(buf):len(buf)])
	}
	if len(ix.def.Paths) != 1 {
		return buf, keys, wholes, nulls, nil
	}
	elemsFrom := len(keys)
	var elemErr error
	_, err = ix.reach(payload, ix.def.Paths[0], func(raw []byte) bool {
		_, err := mpack.Elements(raw, func(elem []byte) bool {
			s := len(buf)
			buf = append(buf, entryElement)
			if buf, elemErr = order.AppendRaw(buf, elem); elemErr != nil {
				return false
			}
			if len(buf)-s-1 > maxIndexValue {
				elemErr = fmt.Errorf("%w: an element of %s is %d bytes as a key of index %q; an indexed value must fit in %d",
					errs.ErrInvalidData, plan.PathString(ix.def.Paths[0]), len(buf)-s-1, ix.name, maxIndexValue)
				return false
			}
			buf = append(buf, id[:]...)
			keys = append(keys, buf[s:len(buf):len(buf)])
			return true
		})
		if elemErr == nil {
			elemErr = err
		}
		return elemErr == nil
	})
	if err == nil {
		err = elemErr
	}
	if err != nil {
		return fail(err)
	}
	elems := keys[elemsFrom:]
	slices.SortFunc(elems, bytes.Compare)
	keys = keys[:elemsFrom+len(slices.CompactFunc(elems, bytes.Equal))]
	return buf, keys, wholes, nulls, nil
}

// appendWhole appends at buf the whole entry key entryWhole ‖ before ‖
// value ‖ after ‖ id (start is where it begins), within the size an
// indexed value may have. before may alias buf: it is copied first.
func (ix *collIndex) appendWhole(buf []byte, start int, before, value, after []byte, id uuidv7.UUID) ([]byte, error) {
	if start == len(buf) {
		buf = append(buf, entryWhole)
		buf = append(buf, before...)
		buf = append(buf, value...)
		buf = append(buf, after...)
	}
	if n := len(buf) - start - 1; n > maxIndexValue {
		return buf, fmt.Errorf("%w: the value of %s is %d bytes as a key of index %q; an indexed value must fit in %d",
			errs.ErrInvalidData, plan.PathString(ix.def.Paths[0]), n, ix.name, maxIndexValue)
	}
	return append(buf, id[:]...), nil
}

// reach calls fn with each value path reaches in payload, and reports
// whether it went through a list. An index made before paths went through
// lists (Lists unset) keeps reading paths through maps only, the way its
// entries were made, until it is rebuilt.
func (ix *collIndex) reach(payload []byte, path []string, fn func(raw []byte) bool) (fanned bool, err error) {
	if ix.def.Lists || len(path) == 1 {
		return mpack.PathValues(payload, path, fn)
	}
	raw, ok, err := mpack.FieldPath(payload, path)
	if ok && err == nil {
		fn(raw)
	}
	return false, err
}

// errUnique is the UniqueViolation of a record whose values, in payload,
// another record holds in ix.
func errUnique(ix *collIndex, payload []byte, other uuidv7.UUID) error {
	e := &errs.UniqueViolation{Index: ix.name, Paths: ix.def.Paths, Values: make([]any, len(ix.def.Paths)), Existing: other}
	for i, path := range ix.def.Paths {
		if raw, ok, err := mpack.FieldPath(payload, path); err == nil && ok {
			e.Values[i], _, _ = mpack.Decode(raw)
		}
	}
	return e
}

// conflict returns the id of another record holding the whole-entry key's
// value in a unique index, if any.
func (ix *collIndex) conflict(key []byte, self uuidv7.UUID) (uuidv7.UUID, bool, error) {
	prefix := key[:len(key)-16]
	cur, err := ix.cursor()
	if err != nil {
		return uuidv7.UUID{}, false, err
	}
	for k, _ := cur.Seek(prefix); k != nil && len(k) == len(key) && bytes.HasPrefix(k, prefix); k, _ = cur.Next() {
		var other uuidv7.UUID
		copy(other[:], k[len(prefix):])
		if other != self {
			return other, true, nil
		}
	}
	// A walk that met damage proves nothing absent: the write fails closed.
	return uuidv7.UUID{}, false, cursorDamage(cur)
}

// cursorDamage returns the damage a cursor of an index met (a damaged or
// missing block), which ended its walk early.
func cursorDamage(cur kv.Cursor) error {
	switch c := cur.(type) {
	case *blockindex.BlockCursor:
		return c.Err()
	case *blockindex.Cursor:
		return c.Err()
	}
	return nil
}

// cursor returns a cursor over ix's entry keys as this transaction sees
// them. Its moves return a nil value.
func (ix *collIndex) cursor() (kv.Cursor, error) {
	if ix.def.Layout == layoutKeys {
		return ix.entries.Cursor(), nil
	}
	blocks := ix.blockCursor()
	var view *blockindex.View
	if ix.base.Seq > ix.base.Floor {
		var err error
		if view, err = ix.committedView(); err != nil {
			return nil, err
		}
	}
	if (view == nil || view.Empty()) && ix.pend.Empty() && len(ix.flushed) == 0 {
		return blocks, nil // nothing journaled, nothing changed
	}
	srcs := make([]blockindex.Source, 0, 2+len(ix.flushed))
	if view != nil && !view.Empty() {
		srcs = append(srcs, view.Source(ix.base.Seq))
	}
	for _, f := range ix.flushed {
		srcs = append(srcs, blockindex.SegmentSource(f.seg))
	}
	if !ix.pend.Empty() {
		srcs = append(srcs, ix.pend.Source())
	}
	return blockindex.NewCursor(blocks, srcs...), nil
}

// blockCursor returns a cursor over the blocks of a blocked index alone.
func (ix *collIndex) blockCursor() *blockindex.BlockCursor {
	return blockindex.NewBlockCursor(ix.entries, ix.name, ix.def.Chained, ix.fail)
}

// put adds the entry key (the caller knows it is missing), del removes it.
// A blocked index keeps the change with the transaction, and journals it
// at flush.
func (ix *collIndex) put(key []byte) error {
	if ix.def.Layout == layoutKeys {
		return mapStoreErr(ix.entries.Put(key, nil))
	}
	ix.change(key, false)
	return nil
}

func (ix *collIndex) del(key []byte) error {
	if ix.def.Layout == layoutKeys {
		return mapStoreErr(ix.entries.Delete(key))
	}
	ix.change(key, true)
	return nil
}

func (ix *collIndex) change(key []byte, del bool) {
	if ix.collect != nil {
		ix.collect = append(ix.collect, bytes.Clone(key))
		return
	}
	if ix.pend == nil {
		ix.pend = &blockindex.Pending{}
	}
	ix.pend.Add(key, del)
}

// journalErr describes a damaged journal of ix.
func (ix *collIndex) journalErr(err error) error {
	return fmt.Errorf("index %q of collection %q: %w (Repair rebuilds the index)", ix.name, ix.coll, err)
}

// indexScratch holds the keys of one write's old and new entries.
type indexScratch struct {
	buf          []byte
	oldKs, newKs [][]byte
	bounds       []int    // per index: end of its keys in oldKs and newKs, interleaved
	constrained  [][4]int // per index: its old and new whole entries a unique index constrains, as ranges of oldKs and newKs
}

// updateIndexes moves the index entries of record id from those of its old
// payload (nil for a new record) to those of its new one (nil for a
// delete). It checks every unique index before it changes anything, so a
// violation leaves the transaction as it was.
func (t *Tx) updateIndexes(c *Coll, id uuidv7.UUID, oldPayload, newPayload []byte) error {
	ixs, err := c.indexes()
	if err != nil || len(ixs) == 0 {
		return err
	}
	s := &t.scratch
	s.buf, s.oldKs, s.newKs, s.bounds, s.constrained = s.buf[:0], s.oldKs[:0], s.newKs[:0], s.bounds[:0], s.constrained[:0]
	for _, ix := range ixs {
		var constrained [4]int
		if !ix.maintains(id) {
			s.bounds = append(s.bounds, len(s.oldKs), len(s.newKs))
			s.constrained = append(s.constrained, constrained)
			continue
		}
		if oldPayload != nil {
			// A damaged old record gives no keys: its entries are left for
			// Verify to report and Repair to rebuild.
			if buf, ks, wholes, nulls, err := ix.entryKeys(s.buf, s.oldKs, oldPayload, id); err == nil {
				constrained[0], constrained[1] = len(s.oldKs)+nulls, len(s.oldKs)+wholes
				s.buf, s.oldKs = buf, ks
			}
		}
		if newPayload != nil {
			buf, ks, wholes, nulls, err := ix.entryKeys(s.buf, s.newKs, newPayload, id)
			if err != nil {
				return err
			}
			s.buf = buf
			constrained[2], constrained[3] = len(s.newKs)+nulls, len(s.newKs)+wholes
			s.newKs = ks
			if ix.def.Unique {
				// Each value the record holds, once: a record may hold a
				// value at several elements of a list, but not one another
				// record holds.
				for _, whole := range s.newKs[constrained[2]:constrained[3]] {
					other, taken, err := t.uniqueHolder(c, ix, whole, id)
					if err != nil {
						return err
					}
					if taken {
						return errUnique(ix, newPayload, other)
					}
				}
			}
		}
		s.bounds = append(s.bounds, len(s.oldKs), len(s.newKs))
		s.constrained = append(s.constrained, constrained)
	}
	oldFrom, newFrom := 0, 0
	for i, ix := range ixs {
		oldTo, newTo := s.bounds[2*i], s.bounds[2*i+1]
		olds, news := s.oldKs[oldFrom:oldTo], s.newKs[newFrom:newTo]
		oldFrom, newFrom = oldTo, newTo
		for _, k := range olds {
			if !containsKey(news, k) {
				if err := ix.del(k); err != nil {
					return err
				}
				ix.delta--
			}
		}
		for _, k := range news {
			if !containsKey(olds, k) {
				if err := ix.put(k); err != nil {
					return err
				}
				ix.delta++
			}
		}
		if ix.def.Claims {
			r := s.constrained[i]
			if err := ix.moveClaims(c, s.oldKs[r[0]:r[1]], s.newKs[r[2]:r[3]], id); err != nil {
				return err
			}
		}
	}
	return nil
}

func containsKey(ks [][]byte, k []byte) bool {
	for _, x := range ks {
		if bytes.Equal(x, k) {
			return true
		}
	}
	return false
}

// flushIndexes journals the changes of blocked indexes and writes the
// definitions whose entry count, journal or build state changed in this
// transaction.
func (c *Coll) flushIndexes() error {
	if !c.idxLoaded {
		return nil
	}
	defs := c.root.Bucket(bucketIndexDefs)
	for _, ix := range c.idx {
		if !ix.pend.Empty() {
			before := ix.def.Seq
			after, changes, seg, err := ix.pend.Journal(ix.journal, before)
			if err != nil {
				return mapStoreErr(err)
			}
			ix.def.Seq, ix.def.Pending = after, ix.def.Pending+changes
			ix.flushed = append(ix.flushed, journaled{before: before, after: after, seg: seg})
			ix.pend, ix.changed = nil, true
		}
		if ix.delta == 0 && !ix.changed {
			continue
		}
		ix.def.Entries += ix.delta
		ix.delta, ix.changed = 0, false
		if err := putDef(defs, ix.name, &ix.def); err != nil {
			return err
		}
	}
	return nil
}

func putDef(defs kv.Bucket, name string, d *indexDef) error {
	b, err := msgpack.Marshal(d)
	if err != nil {
		return fmt.Errorf("storh: internal error: encoding index %q: %v", name, err)
	}
	return mapStoreErr(defs.Put([]byte(name), b))
}

// createIndex adds the definition and the empty entries bucket of s. On an
// empty collection the index is ready at once; otherwise it is building
// and buildIndexes must fill it.
func (t *Tx) createIndex(c *Coll, s IndexSpec) (*collIndex, error) {
	if all, err := c.indexes(); err != nil {
		return nil, err
	} else if len(all) >= maxIndexes {
		return nil, fmt.Errorf("%w: collection %q has %d indexes, the most it may have", errs.ErrInvalidIndex, c.Name, maxIndexes)
	}
	defs, err := c.root.CreateBucketIfNotExists(bucketIndexDefs)
	if err != nil {
		return nil, mapStoreErr(err)
	}
	entriesRoot, err := c.root.CreateBucketIfNotExists(bucketIndexEntries)
	if err != nil {
		return nil, mapStoreErr(err)
	}
	entries, err := entriesRoot.CreateBucket([]byte(s.Name))
	if err != nil {
		return nil, mapStoreErr(err)
	}
	ix := &collIndex{name: s.Name, coll: c.Name, mems: c.mems, fail: c.fail, entries: entries,
		def: indexDef{Paths: s.Paths, Unique: s.Unique, Building: c.Count() > 0, Lists: !tune.PreLists}}
	layout := t.newIndexLayout()
	if _, shared := t.ktx.(kv.Locker); shared && s.Unique && layout == layoutKeys {
		claims, err := c.root.CreateBucketIfNotExists(bucketIndexClaims)
		if err != nil {
			return nil, mapStoreErr(err)
		}
		if ix.claims, err = claims.CreateBucket([]byte(s.Name)); err != nil {
			return nil, mapStoreErr(err)
		}
		ix.def.Claims = true
	}
	if layout == layoutBlocks {
		if err := t.needFormat(formatChained); err != nil {
			return nil, err
		}
		if err := blockindex.WriteBlocks(entries, nil); err != nil {
			return nil, mapStoreErr(err)
		}
		journals, err := c.root.CreateBucketIfNotExists(bucketIndexJournal)
		if err != nil {
			return nil, mapStoreErr(err)
		}
		if ix.journal, err = journals.CreateBucket([]byte(s.Name)); err != nil {
			return nil, mapStoreErr(err)
		}
		ix.def.Layout, ix.def.Inc, ix.def.Chained = layoutBlocks, rand.Uint64()|1, true
	}
	ix.setFill()
	if err := putDef(defs, s.Name, &ix.def); err != nil {
		return nil, err
	}
	c.idx = append(c.idx, ix)
	return ix, nil
}

// newIndexLayout is the layout of the indexes this transaction creates:
// blocks in a bbolt file, keys elsewhere (see the layouts above), unless
// tests force one.
func (t *Tx) newIndexLayout() uint8 {
	switch tune.IndexLayout {
	case "keys":
		return layoutKeys
	case "blocks":
		return layoutBlocks
	}
	if t.btx != nil {
		return layoutBlocks
	}
	return layoutKeys
}

// DropIndex removes the index name and its entries.
func (t *Tx) DropIndex(c *Coll, name string) error {
	if !t.ktx.Writable() {
		return errs.ErrReadOnly
	}
	ix, err := c.index(name)
	if err != nil {
		return err
	}
	if ix == nil {
		return fmt.Errorf("%w: collection %q has no index %q", errs.ErrNotFound, c.Name, name)
	}
	if err := c.root.Bucket(bucketIndexEntries).DeleteBucket([]byte(name)); err != nil {
		return mapStoreErr(err)
	}
	if ix.def.Layout == layoutBlocks {
		if err := c.root.Bucket(bucketIndexJournal).DeleteBucket([]byte(name)); err != nil {
			return mapStoreErr(err)
		}
		if c.mems != nil {
			c.mems.drop(c.Name, name) // a view is a cache: losing it if this rolls back costs a rebuild
		}
	}
	if ix.def.Claims {
		claims := c.root.Bucket(bucketIndexClaims)
		if err := claims.DeleteBucket([]byte(name)); err != nil {
			return mapStoreErr(err)
		}
		// The last one's bucket goes too: a unique index refused at its
		// build leaves nothing behind.
		if k, _ := claims.Cursor().First(); k == nil {
			if err := c.root.DeleteBucket(bucketIndexClaims); err != nil {
				return mapStoreErr(err)
			}
		}
	}
	// Its entry slots, which a later index of the name must not inherit.
	if err := c.deleteSlots(entrySlotKey(name, nil)); err != nil {
		return err
	}
	if err := c.root.Bucket(bucketIndexDefs).Delete([]byte(name)); err != nil {
		return mapStoreErr(err)
	}
	c.idx = slices.DeleteFunc(c.idx, func(x *collIndex) bool { return x == ix })
	return nil
}

// ensureIndexes creates the declared indexes the collection lacks, and
// fails when one exists under the same name with another definition.
func (t *Tx) ensureIndexes(c *Coll, specs []IndexSpec) error {
	for _, s := range specs {
		ix, err := c.index(s.Name)
		if err != nil {
			return err
		}
		if ix != nil {
			if !slices.EqualFunc(ix.def.Paths, s.Paths, slices.Equal) || ix.def.Unique != s.Unique {
				return fmt.Errorf("%w: collection %q already has an index %q on %s (unique %v), declared now on %s (unique %v); drop it first to change it",
					errs.ErrInvalidIndex, c.Name, s.Name, pathsString(ix.def.Paths), ix.def.Unique, pathsString(s.Paths), s.Unique)
			}
			continue
		}
		if !t.ktx.Writable() {
			return fmt.Errorf("%w: collection %q has no index %q, and a read-only transaction cannot create it", errs.ErrReadOnly, c.Name, s.Name)
		}
		t.holdAlone(c)
		if _, err := t.createIndex(c, s); err != nil {
			return err
		}
	}
	return nil
}

func pathsString(paths [][]string) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = plan.PathString(p)
	}
	return "(" + strings.Join(names, ", ") + ")"
}

// buildStep adds the entries of up to max records past the index's mark and
// moves the mark; done reports that the index is complete (and ready).
func (t *Tx) buildStep(c *Coll, ix *collIndex, max int) (done bool, err error) {
	cur := c.records.Cursor()
	var k, v []byte
	if len(ix.def.Mark) == 16 {
		k, v = cur.Seek(ix.def.Mark)
		if k != nil && bytes.Equal(k, ix.def.Mark) {
			k, v = cur.Next()
		}
	} else {
		k, v = cur.First()
	}
	s := &t.scratch
	for n := 0; k != nil && n < max; k, v = cur.Next() {
		var id uuidv7.UUID
		if len(k) != len(id) || v == nil {
			continue // not a record: Verify reports it
		}
		if len(ix.def.Mark) == 16 && bytes.Compare(k, ix.def.Mark) <= 0 {
			// Resuming behind the mark would build forever.
			return false, fmt.Errorf("building index %q: %w", ix.name, errOutOfOrder)
		}
		copy(id[:], k)
		payload, err := Payload(k, v)
		if err != nil {
			return false, fmt.Errorf("building index %q: record %s: %w", ix.name, id, err)
		}
		buf, keys, wholes, nulls, err := ix.entryKeys(s.buf[:0], s.newKs[:0], payload, id)
		if err != nil {
			return false, fmt.Errorf("building index %q: record %s: %w", ix.name, id, err)
		}
		s.buf, s.newKs = buf, keys
		for _, whole := range keys[nulls:wholes] {
			if !ix.def.Unique {
				break
			}
			if ix.collect != nil {
				ix.unique = append(ix.unique, bytes.Clone(whole)) // checked once all are in
				continue
			}
			other, taken, err := ix.conflict(whole, id)
			if err != nil {
				return false, err
			}
			if taken {
				return false, errUnique(ix, payload, other)
			}
		}
		if ix.def.Unique && ix.def.Claims && ix.collect == nil {
			if err := ix.moveClaims(c, nil, keys[nulls:wholes], id); err != nil {
				return false, err
			}
		}
		for _, key := range keys {
			if err := ix.put(key); err != nil {
				return false, err
			}
			ix.delta++
		}
		ix.def.Mark = append(ix.def.Mark[:0], k...)
		ix.def.Built++
		ix.changed = true
		n++
	}
	if k == nil {
		ix.def.Building, ix.def.Mark, ix.def.Built, ix.changed = false, nil, 0, true
		return true, nil
	}
	return false, nil
}

// buildIndexes fills the indexes of h's collection that are still
// building, one bounded transaction at a time: every commit leaves records
// and entries consistent (writes in between maintain the entries of the
// part already built), and a crash resumes where the last commit stopped.
// A unique index that meets a duplicate is removed again and the error is
// ErrUniqueViolation; so is an index that meets a record going through
// lists on two of its paths, with ErrInvalidIndex. The caller must hold
// Enter.
func (db *DB) buildIndexes(h Handle) error {
	for {
		var building string
		done := true
		err := db.UpdateSafe(func(tx *Tx) error {
			c, err := tx.Use(h, false)
			if err != nil || c == nil {
				return err
			}
			all, err := c.indexes()
			if err != nil {
				return err
			}
			for _, ix := range all {
				if ix.def.Building {
					building = ix.name
					done, err = tx.buildStep(c, ix, tune.IndexBuildBatch)
					if err == nil && done {
						done = !slices.ContainsFunc(all, func(x *collIndex) bool { return x.def.Building })
					}
					return err
				}
			}
			return nil
		})
		if errors.Is(err, errs.ErrUniqueViolation) || errors.Is(err, errs.ErrInvalidIndex) {
			// A duplicate, or a record that goes through lists on two
			// paths of the index: it cannot be built over this data.
			if derr := db.UpdateSafe(func(tx *Tx) error {
				c, err := tx.Use(h, false)
				if err != nil || c == nil {
					return err
				}
				return tx.DropIndex(c, building)
			}); derr != nil {
				return fmt.Errorf("%w (and removing the partly built index failed: %v)", err, derr)
			}
			return fmt.Errorf("%w (the index was not created)", err)
		}
		if err != nil || done {
			return err
		}
	}
}

// EnsureIndexes creates the indexes h declares that its collection lacks
// (or fails when one of that name has another definition) and builds every
// index still building. A collection not created yet gets its declared
// indexes with its first write. Blocked indexes of a file of format 2 get
// their blocks chained (chainStep), so that from this open on a missing
// block is found by the reads that cross it; a fold that fails there is
// kept for the index, as any fold's failure (runFolds). The caller must
// hold Enter.
func (db *DB) EnsureIndexes(h Handle) error {
	missing, building := false, false
	var unchained []string
	err := db.ViewSafe(func(tx *Tx) error {
		missing, building, unchained = false, false, nil
		c, err := tx.Use(h, false)
		if err != nil || c == nil {
			return err
		}
		all, err := c.indexes()
		if err != nil {
			return err
		}
		for _, s := range h.Indexes {
			ix, _ := c.index(s.Name)
			if ix == nil || !slices.EqualFunc(ix.def.Paths, s.Paths, slices.Equal) || ix.def.Unique != s.Unique {
				missing = true
			}
		}
		for _, ix := range all {
			building = building || ix.def.Building
			if ix.def.Layout == layoutBlocks && !ix.def.Chained {
				unchained = append(unchained, ix.name)
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case db.opts.ReadOnly && missing:
		return fmt.Errorf("%w: collection %q lacks a declared index, and a read-only database cannot create it", errs.ErrReadOnly, h.Name)
	case db.opts.ReadOnly:
		return nil // queries do not use an index still building; a writer finishes it
	}
	if len(unchained) > 0 {
		for _, name := range unchained {
			db.blocked.folds.add(h.Name, name)
		}
		db.runFolds()
	}
	if !missing && !building {
		return nil
	}
	if err := db.UpdateSafe(func(tx *Tx) error {
		c, err := tx.Use(h, false)
		if err != nil || c == nil {
			return err
		}
		return tx.ensureIndexes(c, h.Indexes)
	}); err != nil {
		return err
	}
	return db.buildIndexes(h)
}

// EnsureIndexes is DB.EnsureIndexes inside the caller's transaction: the
// declared indexes c lacks are created and, like any index still building,
// built to completion in this one transaction. In a read-only transaction
// a missing index is ErrReadOnly and a building one is left as it is
// (queries do not use it).
func (t *Tx) EnsureIndexes(c *Coll, specs []IndexSpec) error {
	if err := t.ensureIndexes(c, specs); err != nil || !t.ktx.Writable() {
		return err
	}
	all, err := c.indexes()
	if err != nil {
		return err
	}
	for _, ix := range all {
		for ix.def.Building {
			if _, err := t.buildStep(c, ix, tune.IndexBuildBatch); err != nil {
				return err
			}
		}
	}
	return nil
}
