package storh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Change is one change of a patch, made by Set, Unset, Inc, Push, Pull or
// AddToSet and applied by Docs.Patch and Docs.PatchMatching. A Change is an
// immutable value: one may be applied to any number of records. A Change
// made from a bad path or an operand that cannot be stored carries that
// error, and a patch that holds it fails with ErrInvalidPatch.
type Change struct {
	op   changeOp
	path []string
	text string // the path as written, for errors
	// operands are the change's values encoded as a record {"0": v0,
	// "1": v1, ...}: encoded as a write encodes them, so that they take
	// the stored form (Record.Data's types), and decoded afresh for each
	// record they go into, so that no record shares a map or a list with
	// the Change or with another record.
	operands []byte
	count    int
	err      error
}

type changeOp uint8

const (
	opSet changeOp = iota + 1
	opUnset
	opInc
	opPush
	opPull
	opAddToSet
)

var changeNames = [...]string{opSet: "Set", opUnset: "Unset", opInc: "Inc", opPush: "Push", opPull: "Pull", opAddToSet: "AddToSet"}

// Set sets the field at path (dotted, as query.Field) to value, creating
// the maps on the way that are missing. A field on the way that is not a
// map makes the patch fail with ErrInvalidPatch.
func Set(path string, value any) Change { return newChange(opSet, path, value) }

// Unset removes the field at path. A field that is missing, or a path
// through a field that is not a map (where no field can be), changes
// nothing.
func Unset(path string) Change { return newChange(opUnset, path) }

// Inc adds by, a number, to the number at path; a missing field becomes
// by. Integers stay integers and never wrap: a result outside int64's and
// uint64's range together is ErrInvalidPatch. With a float on either side
// the sum is a float (an overflow to infinity is ErrInvalidPatch). A field
// that holds anything but a number is ErrInvalidPatch.
func Inc(path string, by any) Change { return newChange(opInc, path, by) }

// Push appends values to the list at path; a missing field, or null (what
// a Go struct stores for a nil slice), becomes a new list of them (an empty
// one when there are none). A field that holds anything else but a list is
// ErrInvalidPatch.
func Push(path string, values ...any) Change { return newChange(opPush, path, values...) }

// Pull removes from the list at path every element equal to value under the
// query layer's Eq (strict, typed; NaN equals nothing). A missing or null
// field changes nothing; a field that holds anything else but a list is
// ErrInvalidPatch.
func Pull(path string, value any) Change { return newChange(opPull, path, value) }

// AddToSet appends to the list at path each of values that is not Eq to an
// element already there (values are added one after the other, so of two
// equal values only the first is added). A missing or null field becomes a
// new list. A field that holds anything else but a list is ErrInvalidPatch.
func AddToSet(path string, values ...any) Change { return newChange(opAddToSet, path, values...) }

func newChange(op changeOp, path string, values ...any) Change {
	ref := query.Field(path)
	segs, err := ref.Path()
	c := Change{op: op, path: segs, text: ref.String(), count: len(values)}
	if err != nil {
		c.err = fmt.Errorf("%w: %s(%q): %w", ErrInvalidPatch, changeNames[op], path, err)
		return c
	}
	operands := make(map[string]any, len(values))
	for i, v := range values {
		operands[strconv.Itoa(i)] = v
	}
	value, err := engine.AppendValue(nil, operands)
	if err != nil {
		c.err = fmt.Errorf("%w: %s(%q): the value cannot be stored: %w", ErrInvalidPatch, changeNames[op], path, err)
		return c
	}
	c.operands = value[engine.HeaderSize:]
	if op == opInc {
		// Checked in the stored form: a named integer type is a number.
		if by, err := c.values(); err != nil || !isNumber(by[0]) {
			c.err = fmt.Errorf("%w: Inc(%q, %v): the amount must be a number, not %T", ErrInvalidPatch, path, values[0], values[0])
		}
	}
	return c
}

// values decodes the change's operands, fresh for one record.
func (c *Change) values() ([]any, error) {
	m, err := engine.DecodeMapIn(c.operands, nil)
	if err != nil {
		return nil, err
	}
	out := make([]any, c.count)
	for i := range out {
		out[i] = m[strconv.Itoa(i)]
	}
	return out, nil
}

// invalid is the error of a change that cannot apply to a record.
func (c *Change) invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s(%q): %s", ErrInvalidPatch, changeNames[c.op], c.text, fmt.Sprintf(format, args...))
}

// checkChanges returns the error a change was made with, before anything
// is read.
func checkChanges(changes []Change) error {
	for i := range changes {
		if changes[i].op == 0 {
			return fmt.Errorf("%w: change %d is the zero Change; make changes with Set, Unset, Inc, Push, Pull or AddToSet", ErrInvalidPatch, i)
		}
		if err := changes[i].err; err != nil {
			return err
		}
	}
	return nil
}

// applyChanges applies changes in order to the record payload and returns
// the stored value (engine.AppendValue's form) of the result, or nil when
// the result is the record as it was: the same bytes.
func applyChanges(payload []byte, changes []Change) ([]byte, error) {
	data, err := engine.DecodeMapIn(payload, nil)
	if err != nil {
		return nil, err
	}
	for i := range changes {
		if err := changes[i].apply(data); err != nil {
			return nil, err
		}
	}
	value, err := engine.AppendValue(nil, data)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(value[engine.HeaderSize:], payload) {
		return nil, nil
	}
	return value, nil
}

// apply applies the change to data, a record in the form Record.Data
// gives.
func (c *Change) apply(data map[string]any) error {
	values, err := c.values()
	if err != nil {
		return err
	}
	removes := c.op == opUnset || c.op == opPull
	parent, err := c.parent(data, !removes)
	if parent == nil || err != nil {
		return err
	}
	key := c.path[len(c.path)-1]
	cur, present := parent[key]
	switch c.op {
	case opSet:
		parent[key] = values[0]
	case opUnset:
		delete(parent, key)
	case opInc:
		if !present {
			parent[key] = values[0]
			return nil
		}
		sum, err := add(cur, values[0])
		if err != nil {
			return c.invalid("%s", err)
		}
		parent[key] = sum
	case opPush, opPull, opAddToSet:
		// Null is an empty list: a Go struct stores its nil slices as null.
		if !present || cur == nil {
			if c.op == opPull {
				return nil
			}
			cur = []any{}
		}
		list, ok := cur.([]any)
		if !ok {
			return c.invalid("the field holds %s, not a list", describe(cur))
		}
		switch c.op {
		case opPush:
			list = append(list, values...)
		case opPull:
			list = slices.DeleteFunc(list, func(e any) bool { return mpack.Equal(e, values[0]) })
		case opAddToSet:
			for _, v := range values {
				if !slices.ContainsFunc(list, func(e any) bool { return mpack.Equal(e, v) }) {
					list = append(list, v)
				}
			}
		}
		parent[key] = list
	}
	return nil
}

// parent returns the map that holds the change's field. With create the
// maps missing on the way are made, and a field on the way that is not a
// map is ErrInvalidPatch; without, either gives a nil map: the field is
// missing, as a query sees it.
func (c *Change) parent(data map[string]any, create bool) (map[string]any, error) {
	m := data
	for i, seg := range c.path[:len(c.path)-1] {
		next, present := m[seg]
		if !present && create {
			made := map[string]any{}
			m[seg] = made
			m = made
			continue
		}
		sub, ok := next.(map[string]any)
		if !ok {
			if !create || !present {
				return nil, nil
			}
			return nil, c.invalid("%s holds %s, not a map", query.FieldPath(c.path[:i+1]...), describe(next))
		}
		m = sub
	}
	return m, nil
}

// add is Inc's sum of two numbers in the stored form: exact over the
// integers of int64 and uint64, a float64 when either is a float.
func add(cur, by any) (any, error) {
	if !isNumber(cur) {
		return nil, fmt.Errorf("the field holds %s, not a number", describe(cur))
	}
	_, curFloat := cur.(float64)
	_, byFloat := by.(float64)
	if curFloat || byFloat {
		a, b := toFloat(cur), toFloat(by)
		sum := a + b
		if math.IsInf(sum, 0) && !math.IsInf(a, 0) && !math.IsInf(b, 0) {
			return nil, fmt.Errorf("%v + %v overflows a float64", a, b)
		}
		return sum, nil
	}
	sum := new(big.Int).Add(toBig(cur), toBig(by))
	switch {
	case sum.IsInt64():
		return sum.Int64(), nil
	case sum.IsUint64():
		return sum.Uint64(), nil // as a write of a uint64 above MaxInt64 stores it
	}
	return nil, fmt.Errorf("%v + %v = %v is out of the range of int64 and uint64", cur, by, sum)
}

func isNumber(v any) bool {
	switch v.(type) {
	case int64, uint64, float64:
		return true
	}
	return false
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	}
	return v.(float64)
}

func toBig(v any) *big.Int {
	if u, ok := v.(uint64); ok {
		return new(big.Int).SetUint64(u)
	}
	return big.NewInt(v.(int64))
}

// describe names the kind of a stored value, for errors.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int64, uint64, float64:
		return "a number"
	case string:
		return "a string"
	case []byte:
		return "bytes"
	case time.Time:
		return "a time"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	case uuidv7.UUID:
		return "a UUID"
	case objectid.ObjectID:
		return "an ObjectID"
	}
	return fmt.Sprintf("a %T", v)
}

// patchStored patches the record id in etx: it reads the record (beside
// other writers, with its row locked: no concurrent change is lost),
// applies changes and, when the result differs, writes it through the put
// path, so indexes, unique constraints, counters and Watch see it as a
// put. With matches, a record that is gone or no longer matches is left
// alone: PatchMatching's run may have found it in an earlier transaction.
// check, when set, vets the new payload before it is written. It returns
// the payload the record holds afterwards, which aliases the transaction's
// memory when nothing changed, and whether it changed.
func patchStored(etx *engine.Tx, ec *engine.Coll, id uuidv7.UUID, changes []Change, matches *plan.Matcher, check func(payload []byte) error) ([]byte, bool, error) {
	stored, err := etx.Get(ec, id)
	if matches != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, false, nil
		}
		if err == nil {
			var ok bool
			if ok, err = matches.Match(stored); err == nil && !ok {
				return stored, false, nil
			}
		}
	}
	if err != nil {
		return nil, false, err
	}
	value, err := applyChanges(stored, changes)
	if err != nil || value == nil {
		return stored, false, err
	}
	payload := value[engine.HeaderSize:]
	if check != nil {
		if err := check(payload); err != nil {
			return nil, false, err
		}
	}
	// The value is the put's alone (bbolt holds it until the transaction
	// ends): the caller gets its own copy.
	out := append([]byte(nil), payload...)
	if err := etx.Put(ec, id, value, false); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// patch patches the record id: in the handle's transaction, or as one op
// of a group commit. check is patchStored's.
func (c *coll) patch(id uuidv7.UUID, changes []Change, check func(payload []byte) error) (Record, error) {
	const op = "patch"
	if err := checkID(id, false); err != nil {
		return Record{}, opErr(op, c.name, id.String(), -1, err)
	}
	if err := checkChanges(changes); err != nil {
		return Record{}, opErr(op, c.name, id.String(), -1, err)
	}
	var out []byte
	fn := func(etx *engine.Tx, ec *engine.Coll) error {
		out = nil // a group commit may run fn again
		if ec == nil {
			return ErrNotFound
		}
		if c.expires() {
			// An expired record is gone to the handle's readers: patching it
			// must not bring it back (with a new time, say).
			if stored, err := etx.Get(ec, id); err == nil && c.hidden(id, stored) {
				return errExpired
			}
		}
		p, changed, err := patchStored(etx, ec, id, changes, nil, check)
		if err == nil {
			out = p
			if !changed {
				out = append([]byte(nil), p...)
			}
		}
		return err
	}
	var err error
	if c.tx != nil {
		if err = c.tx.usable(true); err == nil {
			err = c.inTxUse(false, engine.HoldRows, fn)
		}
	} else {
		err = c.submitOp(false, engine.HoldRows, fn)
	}
	if err != nil {
		return Record{}, opErr(op, c.name, id.String(), -1, err)
	}
	return Record{ID: id, payload: out}, nil
}

// patchMatching patches the records q selects and returns how many it
// changed. It plans and batches as deleteMatching does; each record is
// read again in the transaction that patches it, and patched only if it
// still matches q's condition. A query with an order runs in one
// transaction and finds its records before it patches any: a patch that
// moves a record in the order must not bring it round again, nor count
// twice against the Limit.
func (c *coll) patchMatching(ctx context.Context, q query.Query, changes []Change, check func(payload []byte) error) (int, error) {
	const op = "patch"
	if err := checkChanges(changes); err != nil {
		return 0, opErr(op, c.name, "", -1, err)
	}
	spec, err := c.compile(q)
	if err != nil {
		return 0, opErr(op, c.name, "", -1, err)
	}
	matches := plan.NewMatcher(spec.Cond)
	r := engine.NewRun(spec)
	total := 0
	var items, skipped []engine.Item
	var failed uuidv7.UUID
	step := func(etx *engine.Tx, ec *engine.Coll) (int, error) {
		skipped = skipped[:0]
		if ec == nil {
			r.Done = true
			return 0, nil
		}
		var ids []uuidv7.UUID
		for !r.Done && (len(ids) < tune.MatchingBatch || c.tx != nil || spec.Order != nil) {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			var err error
			if items, err = r.Next(ec, engine.ChunkRecords, items[:0]); err != nil {
				return 0, err
			}
			for _, it := range items {
				if it.Err != nil {
					if spec.OnError != nil {
						skipped = append(skipped, it)
						continue
					}
					failed = it.ID
					return 0, it.Err
				}
				ids = append(ids, it.ID)
			}
		}
		changed := 0
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			_, ok, err := patchStored(etx, ec, id, changes, matches, check)
			if err != nil {
				failed = id
				return 0, err
			}
			if ok {
				changed++
			}
		}
		return changed, nil
	}
	for !r.Done {
		if err := ctx.Err(); err != nil {
			return total, opErr(op, c.name, "", -1, err)
		}
		n := 0
		run := func(etx *engine.Tx, ec *engine.Coll) (err error) {
			n, err = step(etx, ec)
			return err
		}
		if c.tx != nil {
			err = c.inTx(true, run)
		} else {
			err = c.update(false, run)
		}
		if err != nil {
			id := ""
			if !failed.IsZero() {
				id = failed.String()
			}
			return total, opErr(op, c.name, id, -1, err)
		}
		total += n
		for _, it := range skipped {
			spec.OnError(it.ID, opErr(op, c.name, it.ID.String(), -1, it.Err))
		}
	}
	return total, nil
}

// Patch applies changes, in order, to the record id and returns the record
// as it then is. The changes apply all or none: on any error the record is
// as it was. A change that cannot apply is ErrInvalidPatch; a result a Put
// would refuse (past MaxRecordSize or MaxDepth) is ErrInvalidData; a result
// whose value a unique index holds for another record is
// ErrUniqueViolation. A valid id that is not stored is ErrNotFound. The
// record is read and written in one transaction, its row locked on
// PostgreSQL, so concurrent patches of one record (Inc from many
// goroutines or processes) all count. A patch that leaves the record as it
// was writes nothing. docs/queries.md ("Patches") has the semantics.
func (d *Docs) Patch(id uuidv7.UUID, changes ...Change) (Record, error) {
	return d.coll.patch(id, changes, nil)
}

// PatchMatching applies changes to every document q selects (using its
// indexes, as DeleteMatching does) and returns how many changed: a record
// the patch leaves as it was is not written and not counted. A record is
// patched only if it matches q when its transaction reads it. On a
// DB-level handle a large patch runs in transactions of a few thousand
// records; if it fails part way (an error names the record), the
// transactions before stay committed and the count says how many records
// they changed, the failing one changed nothing. A query with OrderBy runs
// in one transaction. Errors are Patch's; a record that cannot be read
// fails it unless q has ContinueOnError.
func (d *Docs) PatchMatching(q query.Query, changes ...Change) (int, error) {
	return d.coll.patchMatching(context.Background(), q, changes, nil)
}

// PatchMatchingContext is PatchMatching that stops when ctx is done,
// between records: the transactions committed before stay.
func (d *Docs) PatchMatchingContext(ctx context.Context, q query.Query, changes ...Change) (int, error) {
	return d.coll.patchMatching(ctx, q, changes, nil)
}

// Patch is Docs.Patch that returns the record as an Item; a result that
// does not decode into T is ErrTypeMismatch, and changes nothing, so the
// collection stays readable as T.
func (t *TypedDocs[T]) Patch(id uuidv7.UUID, changes ...Change) (Item[T], error) {
	r, err := t.c.patch(id, changes, t.fits)
	if err != nil {
		return Item[T]{}, err
	}
	it := Item[T]{ID: id}
	if err := t.tc.Decode(r.payload, &it.Value); err != nil {
		return Item[T]{}, opErr("patch", t.c.name, id.String(), -1, err)
	}
	return it, nil
}

// PatchMatching is Docs.PatchMatching; a record whose result does not
// decode into T is ErrTypeMismatch, as for Patch.
func (t *TypedDocs[T]) PatchMatching(q query.Query, changes ...Change) (int, error) {
	return t.c.patchMatching(context.Background(), q, changes, t.fits)
}

// fits vets a patched payload for a typed collection: it must decode into
// T, as every read of the collection will.
func (t *TypedDocs[T]) fits(payload []byte) error {
	var v T
	return t.tc.Decode(payload, &v)
}
