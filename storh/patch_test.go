package storh_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The patch model test applies random change lists to random records, by
// Patch (DB-level and inside Update) and by PatchMatching, and applies the
// same lists to Go maps with a reference written here from the documented
// semantics (docs/queries.md, "Patches"), sharing no code with storh's.
// After every step each record must equal its model, and queries answered
// through the indexes on the patched fields must agree with the models.

// refChange is a change as the reference applies it.
type refChange struct {
	op     string // "set", "unset", "inc", "push", "pull", "addToSet"
	path   string
	values []any
}

func (c refChange) change() storh.Change {
	switch c.op {
	case "set":
		return storh.Set(c.path, c.values[0])
	case "unset":
		return storh.Unset(c.path)
	case "inc":
		return storh.Inc(c.path, c.values[0])
	case "push":
		return storh.Push(c.path, c.values...)
	case "pull":
		return storh.Pull(c.path, c.values[0])
	case "addToSet":
		return storh.AddToSet(c.path, c.values...)
	}
	panic("unknown op " + c.op)
}

func (c refChange) String() string { return fmt.Sprintf("%s(%s, %v)", c.op, c.path, c.values) }

var errRefInvalid = errors.New("invalid")

// refEqual is Eq as docs/queries.md's table states it, for the values the
// model draws: an integer never equals a float, lists and maps compare
// deeply.
func refEqual(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !refEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !refEqual(v, w) {
				return false
			}
		}
		return true
	case int64:
		switch y := b.(type) {
		case int64:
			return x == y
		case uint64:
			return x >= 0 && uint64(x) == y
		}
		return false
	case uint64:
		switch y := b.(type) {
		case uint64:
			return x == y
		case int64:
			return y >= 0 && uint64(y) == x
		}
		return false
	}
	return reflect.TypeOf(a) == reflect.TypeOf(b) && a == b
}

// refApply applies changes to a copy of m, all or none.
func refApply(m map[string]any, changes []refChange) (map[string]any, error) {
	out := modelNorm(m).(map[string]any)
	for _, c := range changes {
		if err := refApplyOne(out, c); err != nil {
			return m, err
		}
	}
	return out, nil
}

func refApplyOne(m map[string]any, c refChange) error {
	segs := strings.Split(c.path, ".")
	creates := c.op != "unset" && c.op != "pull"
	for _, s := range segs[:len(segs)-1] {
		next, ok := m[s]
		if !ok {
			if !creates {
				return nil
			}
			next = map[string]any{}
			m[s] = next
		}
		sub, isMap := next.(map[string]any)
		if !isMap {
			if !creates {
				return nil
			}
			return errRefInvalid
		}
		m = sub
	}
	last := segs[len(segs)-1]
	cur, present := m[last]
	switch c.op {
	case "set":
		m[last] = modelNorm(c.values[0])
	case "unset":
		delete(m, last)
	case "inc":
		if !present {
			m[last] = c.values[0]
			return nil
		}
		sum, err := refAdd(cur, c.values[0])
		if err != nil {
			return err
		}
		m[last] = sum
	default:
		if !present || cur == nil {
			if c.op == "pull" {
				return nil
			}
			cur = []any{}
		}
		list, ok := cur.([]any)
		if !ok {
			return errRefInvalid
		}
		switch c.op {
		case "push":
			for _, v := range c.values {
				list = append(list, modelNorm(v))
			}
		case "pull":
			var kept []any
			for _, e := range list {
				if !refEqual(e, c.values[0]) {
					kept = append(kept, e)
				}
			}
			list = append([]any{}, kept...)
		case "addToSet":
			for _, v := range c.values {
				if !slices.ContainsFunc(list, func(e any) bool { return refEqual(e, v) }) {
					list = append(list, modelNorm(v))
				}
			}
		}
		m[last] = list
	}
	return nil
}

func refAdd(a, b any) (any, error) {
	toBig := func(v any) (*big.Int, bool) {
		switch x := v.(type) {
		case int64:
			return big.NewInt(x), true
		case uint64:
			return new(big.Int).SetUint64(x), true
		}
		return nil, false
	}
	ai, aInt := toBig(a)
	bi, bInt := toBig(b)
	if aInt && bInt {
		s := ai.Add(ai, bi)
		if s.IsInt64() {
			return s.Int64(), nil
		}
		if s.IsUint64() {
			return s.Uint64(), nil
		}
		return nil, errRefInvalid
	}
	asFloat := func(v any) (float64, bool) {
		switch x := v.(type) {
		case float64:
			return x, true
		case int64:
			return float64(x), true
		case uint64:
			return float64(x), true
		}
		return 0, false
	}
	af, ok1 := asFloat(a)
	bf, ok2 := asFloat(b)
	if !ok1 || !ok2 {
		return nil, errRefInvalid
	}
	if math.IsInf(af+bf, 0) {
		return nil, errRefInvalid
	}
	return af + bf, nil
}

var (
	modelPaths   = []string{"n", "f", "s", "l", "a", "a.b", "a.c.d", "l.x"}
	modelScalars = []any{int64(0), int64(1), int64(-2), int64(7), 0.5, 1.0, -2.5, "x", "y", true, nil, int64(math.MaxInt64), int64(math.MinInt64), math.MaxFloat64}
	modelIncs    = []any{int64(1), int64(-1), int64(5), 0.5, -1.5, int64(math.MaxInt64), int64(math.MinInt64), math.MaxFloat64}
)

func drawValue(t *rapid.T, label string, depth int) any {
	kind := rapid.IntRange(0, 5).Draw(t, label+"kind")
	if depth > 1 || kind < 4 {
		return rapid.SampledFrom(modelScalars).Draw(t, label)
	}
	n := rapid.IntRange(0, 2).Draw(t, label+"n")
	if kind == 4 {
		l := make([]any, n)
		for i := range l {
			l[i] = drawValue(t, fmt.Sprintf("%s[%d]", label, i), depth+1)
		}
		return l
	}
	m := map[string]any{}
	for i := range n {
		m[rapid.SampledFrom([]string{"b", "c", "d"}).Draw(t, fmt.Sprint(label, ".k", i))] = drawValue(t, fmt.Sprint(label, ".v", i), depth+1)
	}
	return m
}

func drawRecord(t *rapid.T, label string) map[string]any {
	m := map[string]any{}
	for _, k := range []string{"n", "f", "s", "l", "a"} {
		if !rapid.Bool().Draw(t, label+k+"?") {
			continue
		}
		switch k {
		case "n":
			m[k] = rapid.SampledFrom([]any{int64(0), int64(1), int64(7), int64(math.MaxInt64 - 1)}).Draw(t, label+k)
		case "l":
			l := make([]any, rapid.IntRange(0, 3).Draw(t, label+"ln"))
			for i := range l {
				l[i] = rapid.SampledFrom(modelScalars[:6]).Draw(t, fmt.Sprint(label, "l", i))
			}
			m[k] = l
		case "a":
			m[k] = map[string]any{"b": rapid.SampledFrom(modelScalars[:8]).Draw(t, label+"ab")}
		default:
			m[k] = drawValue(t, label+k, 1)
		}
	}
	return m
}

func drawChanges(t *rapid.T) []refChange {
	n := rapid.IntRange(1, 4).Draw(t, "changes")
	out := make([]refChange, n)
	for i := range out {
		label := fmt.Sprint("c", i)
		c := refChange{op: rapid.SampledFrom([]string{"set", "unset", "inc", "push", "pull", "addToSet"}).Draw(t, label+"op"),
			path: rapid.SampledFrom(modelPaths).Draw(t, label+"path")}
		switch c.op {
		case "set", "pull":
			c.values = []any{drawValue(t, label+"v", 1)}
		case "inc":
			c.values = []any{rapid.SampledFrom(modelIncs).Draw(t, label+"by")}
		case "push", "addToSet":
			c.values = make([]any, rapid.IntRange(0, 3).Draw(t, label+"n"))
			for j := range c.values {
				c.values[j] = drawValue(t, fmt.Sprint(label, "v", j), 2)
			}
		}
		out[i] = c
	}
	return out
}

func storhChanges(cs []refChange) []storh.Change {
	out := make([]storh.Change, len(cs))
	for i, c := range cs {
		out[i] = c.change()
	}
	return out
}

// refMatches evaluates the model test's conditions on a model record.
func refMatches(m map[string]any, cond string) bool {
	switch cond {
	case "all":
		return true
	case "n>0":
		switch x := m["n"].(type) {
		case int64:
			return x > 0
		case uint64:
			return true
		case float64:
			return x > 0
		}
		return false
	case "a.b=x":
		a, ok := m["a"].(map[string]any)
		if !ok {
			return false
		}
		b, ok := a["b"]
		return ok && refEqual(b, "x")
	case "l exists":
		_, ok := m["l"]
		return ok
	}
	panic(cond)
}

var modelConds = map[string]query.Cond{
	"n>0":      query.Field("n").Gt(0),
	"a.b=x":    query.Field("a.b").Eq("x"),
	"l exists": query.Field("l").Exists(),
}

func modelQuery(cond string) query.Query {
	if cond == "all" {
		return query.All()
	}
	return query.All().Where(modelConds[cond])
}

func TestPatchModel(t *testing.T) {
	db := openTemp(t)
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		var opts []storh.CollectionOption
		indexed := rapid.Bool().Draw(rt, "indexed")
		if indexed {
			opts = append(opts, storh.WithIndex(storh.Index("n")), storh.WithIndex(storh.Index("a.b")))
		}
		docs, err := db.Docs(fmt.Sprint("patch", round), opts...)
		if err != nil {
			rt.Fatal(err)
		}
		model := map[uuidv7.UUID]map[string]any{}
		var ids []uuidv7.UUID
		for i := range rapid.IntRange(1, 4).Draw(rt, "records") {
			m := drawRecord(rt, fmt.Sprint("r", i))
			r, err := docs.Put(m)
			if err != nil {
				rt.Fatal(err)
			}
			model[r.ID], ids = m, append(ids, r.ID)
		}
		for step := range rapid.IntRange(1, 6).Draw(rt, "steps") {
			cs := drawChanges(rt)
			switch how := rapid.SampledFrom([]string{"patch", "update", "matching"}).Draw(rt, "how"); how {
			case "patch", "update":
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				want, wantErr := refApply(model[id], cs)
				var got storh.Record
				if how == "patch" {
					got, err = docs.Patch(id, storhChanges(cs)...)
				} else {
					err = db.Update(func(tx *storh.Tx) error {
						d, err := tx.Docs(docs.Name())
						if err != nil {
							return err
						}
						got, err = d.Patch(id, storhChanges(cs)...)
						return err
					})
				}
				if (err != nil) != (wantErr != nil) || err != nil && !errors.Is(err, storh.ErrInvalidPatch) {
					rt.Fatalf("step %d: %s %v on %v: error %v, the model's %v", step, how, cs, model[id], err, wantErr)
				}
				if err == nil && !refEqual(map[string]any(got.Data()), want) {
					rt.Fatalf("step %d: %s %v on %v returned %v, want %v", step, how, cs, model[id], got.Data(), want)
				}
				model[id] = want
			case "matching":
				cond := rapid.SampledFrom([]string{"all", "n>0", "a.b=x", "l exists"}).Draw(rt, "cond")
				next := map[uuidv7.UUID]map[string]any{}
				changed := 0
				var wantErr error
				for _, id := range ids {
					next[id] = model[id]
					if !refMatches(model[id], cond) {
						continue
					}
					m, err := refApply(model[id], cs)
					if err != nil {
						wantErr = err
						break
					}
					if !refEqual(m, model[id]) {
						changed++
					}
					next[id] = m
				}
				n, err := docs.PatchMatching(modelQuery(cond), storhChanges(cs)...)
				if (err != nil) != (wantErr != nil) || err != nil && !errors.Is(err, storh.ErrInvalidPatch) {
					rt.Fatalf("step %d: PatchMatching(%s, %v): error %v, the model's %v", step, cond, cs, err, wantErr)
				}
				if wantErr == nil {
					// One transaction for so few records: an error changes
					// nothing at all.
					model = next
					if n != changed {
						rt.Fatalf("step %d: PatchMatching(%s, %v) = %d, the model changed %d", step, cond, cs, n, changed)
					}
				}
			}
			checkPatchModel(rt, docs, ids, model)
		}
	})
}

// checkPatchModel compares every record with its model, and every model
// condition's answer (through the indexes, where the collection has them)
// with the models'.
func checkPatchModel(t *rapid.T, docs *storh.Docs, ids []uuidv7.UUID, model map[uuidv7.UUID]map[string]any) {
	for _, id := range ids {
		r, err := docs.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if !refEqual(map[string]any(r.Data()), model[id]) {
			t.Fatalf("record %s = %v, the model's %v", id, r.Data(), model[id])
		}
	}
	for name := range modelConds {
		var want []uuidv7.UUID
		for _, id := range ids {
			if refMatches(model[id], name) {
				want = append(want, id)
			}
		}
		recs, err := docs.Find(modelQuery(name))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]uuidv7.UUID, len(recs))
		for i, r := range recs {
			got[i] = r.ID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Find(%s) = %v, the model's %v", name, got, want)
		}
	}
}

// Every way a patch can fail, each leaving the record exactly as it was.
func TestPatchErrors(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("errs")
	if err != nil {
		t.Fatal(err)
	}
	data := storh.Map{"n": 1, "s": "text", "l": []any{1}, "a": storh.Map{"b": 2}, "big": int64(math.MaxInt64), "f": math.MaxFloat64}
	r, err := docs.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		changes []storh.Change
		want    error
		mention []string
	}{
		{"empty path", []storh.Change{storh.Set("", 1)}, storh.ErrInvalidPatch, []string{"field name"}},
		{"empty segment", []storh.Change{storh.Unset("a..b")}, storh.ErrInvalidPatch, []string{"empty segment"}},
		{"zero change", []storh.Change{{}}, storh.ErrInvalidPatch, []string{"zero Change"}},
		{"value that cannot be stored", []storh.Change{storh.Set("x", make(chan int))}, storh.ErrInvalidPatch, []string{"cannot be stored"}},
		{"Set through a string", []storh.Change{storh.Set("s.x", 1)}, storh.ErrInvalidPatch, []string{"s holds a string, not a map"}},
		{"Set through a list", []storh.Change{storh.Set("l.0", 1)}, storh.ErrInvalidPatch, []string{"l holds a list, not a map"}},
		{"Inc of a string", []storh.Change{storh.Inc("s", 1)}, storh.ErrInvalidPatch, []string{"holds a string, not a number"}},
		{"Inc by a string", []storh.Change{storh.Inc("n", "1")}, storh.ErrInvalidPatch, []string{"must be a number"}},
		{"Inc by nil", []storh.Change{storh.Inc("n", nil)}, storh.ErrInvalidPatch, []string{"must be a number"}},
		{"Inc past MaxUint64", []storh.Change{storh.Inc("big", uint64(math.MaxUint64))}, storh.ErrInvalidPatch, []string{"out of the range"}},
		{"Inc below MinInt64", []storh.Change{storh.Set("m", int64(math.MinInt64)), storh.Inc("m", -1)}, storh.ErrInvalidPatch, []string{"out of the range"}},
		{"Inc to infinity", []storh.Change{storh.Inc("f", math.MaxFloat64)}, storh.ErrInvalidPatch, []string{"overflows"}},
		{"Push to a map", []storh.Change{storh.Push("a", 1)}, storh.ErrInvalidPatch, []string{"holds a map, not a list"}},
		{"Pull from a number", []storh.Change{storh.Pull("n", 1)}, storh.ErrInvalidPatch, []string{"holds a number, not a list"}},
		{"AddToSet to a string", []storh.Change{storh.AddToSet("s", 1)}, storh.ErrInvalidPatch, []string{"holds a string, not a list"}},
		{"failure after changes that applied", []storh.Change{storh.Set("x", 1), storh.Unset("s"), storh.Push("l", 2), storh.Inc("a", 1)}, storh.ErrInvalidPatch, []string{`Inc("a")`}},
		{"result past MaxRecordSize", []storh.Change{storh.Set("huge", strings.Repeat("x", storh.MaxRecordSize))}, storh.ErrInvalidData, nil},
		{"result past MaxDepth", []storh.Change{storh.Set(strings.Repeat("d.", storh.MaxDepth-1)+"d", storh.Map{"x": 1})}, storh.ErrInvalidData, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := docs.Patch(r.ID, tc.changes...)
			checkErr(t, err, tc.want, append(tc.mention, r.ID.String(), `"errs"`)...)
			n, err := docs.PatchMatching(query.All(), tc.changes...)
			checkErr(t, err, tc.want, tc.mention...)
			if n != 0 {
				t.Errorf("PatchMatching = %d, want 0", n)
			}
			err = db.Update(func(tx *storh.Tx) error {
				d, err := tx.Docs("errs")
				if err != nil {
					return err
				}
				_, err = d.Patch(r.ID, tc.changes...)
				return err
			})
			checkErr(t, err, tc.want, tc.mention...)
			got, err := docs.Get(r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Raw(), r.Raw()) {
				t.Fatalf("the record changed: %v, was %v", got.Data(), r.Data())
			}
		})
	}

	t.Run("not found", func(t *testing.T) {
		_, err := docs.Patch(uuidv7.New(), storh.Set("x", 1))
		checkErr(t, err, storh.ErrNotFound, "patch")
		none, err := db.Docs("never-written")
		if err != nil {
			t.Fatal(err)
		}
		_, err = none.Patch(uuidv7.New(), storh.Set("x", 1))
		checkErr(t, err, storh.ErrNotFound)
		if n, err := none.PatchMatching(query.All(), storh.Set("x", 1)); n != 0 || err != nil {
			t.Fatalf("PatchMatching on an empty collection = %d, %v", n, err)
		}
	})
	t.Run("invalid id", func(t *testing.T) {
		_, err := docs.Patch(v4ID, storh.Set("x", 1))
		checkErr(t, err, storh.ErrInvalidID)
	})
}

func TestPatchUniqueViolation(t *testing.T) {
	db := openTemp(t)
	users, err := db.Docs("users", storh.WithIndex(storh.Index("email").Unique()))
	if err != nil {
		t.Fatal(err)
	}
	ann, err := users.Put(storh.Map{"email": "ann@x"})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := users.Put(storh.Map{"email": "bob@x", "n": 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = users.Patch(bob.ID, storh.Inc("n", 1), storh.Set("email", "ann@x"))
	checkErr(t, err, storh.ErrUniqueViolation, "ann@x")
	var uv *storh.UniqueViolation
	if !errors.As(err, &uv) || uv.Existing != ann.ID {
		t.Fatalf("error %v does not name %s as the holder", err, ann.ID)
	}
	n, err := users.PatchMatching(query.All().Where(query.Field("email").Eq("bob@x")), storh.Set("email", "ann@x"))
	checkErr(t, err, storh.ErrUniqueViolation)
	if n != 0 {
		t.Fatalf("PatchMatching = %d", n)
	}
	got, err := users.Get(bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Raw(), bob.Raw()) {
		t.Fatalf("bob changed: %v", got.Data())
	}
	for email, want := range map[string]uuidv7.UUID{"ann@x": ann.ID, "bob@x": bob.ID} {
		r, err := users.First(query.All().Where(query.Field("email").Eq(email)))
		if err != nil || r.ID != want {
			t.Fatalf("First(email = %s) = %s, %v; want %s", email, r.ID, err, want)
		}
	}
	// Freed by a patch, the value can be taken by another.
	if _, err := users.Patch(ann.ID, storh.Set("email", "ann@y")); err != nil {
		t.Fatal(err)
	}
	if _, err := users.Patch(bob.ID, storh.Set("email", "ann@x")); err != nil {
		t.Fatal(err)
	}
}

// Inc's numbers: integers stay integers, any float makes a float, and the
// range of integers is int64's and uint64's together.
func TestPatchIncNumbers(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("inc")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		start, by, want any
	}{
		{nil, int8(3), int64(3)},
		{nil, float32(0.5), 0.5},
		{int64(1), uint16(2), int64(3)},
		{int64(1), 0.5, 1.5},
		{0.5, int64(1), 1.5},
		{int64(5), int64(-7), int64(-2)},
		{int64(math.MaxInt64), int64(1), uint64(math.MaxInt64) + 1},
		{uint64(math.MaxUint64), int64(-1), uint64(math.MaxUint64 - 1)},
		{uint64(math.MaxInt64) + 1, int64(-1), int64(math.MaxInt64)},
		{int64(math.MinInt64), uint64(math.MaxUint64), int64(math.MaxInt64)},
	} {
		data := storh.Map{}
		if tc.start != nil {
			data["v"] = tc.start
		}
		r, err := docs.Put(data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := docs.Patch(r.ID, storh.Inc("v", tc.by))
		if err != nil {
			t.Fatalf("%v + %v: %v", tc.start, tc.by, err)
		}
		if v := got.Data()["v"]; v != tc.want {
			t.Errorf("%v (%T) + %v (%T) = %v (%T), want %v (%T)", tc.start, tc.start, tc.by, tc.by, v, v, tc.want, tc.want)
		}
	}
}

// A patch that leaves the record as it was writes nothing and counts for
// nothing.
func TestPatchUnchanged(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("same")
	if err != nil {
		t.Fatal(err)
	}
	r, err := docs.Put(storh.Map{"n": 1, "l": []any{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	noop := []storh.Change{storh.Unset("missing"), storh.Set("n", 1), storh.AddToSet("l", "a"), storh.Pull("l", "b"), storh.Pull("gone", 1)}
	got, err := docs.Patch(r.ID, noop...)
	if err != nil || !bytes.Equal(got.Raw(), r.Raw()) {
		t.Fatalf("Patch = %v, %v; want the record as it was", got.Data(), err)
	}
	n, err := docs.PatchMatching(query.All(), noop...)
	if n != 0 || err != nil {
		t.Fatalf("PatchMatching = %d, %v; want 0", n, err)
	}
	n, err = docs.PatchMatching(query.All(), storh.Inc("n", 1))
	if n != 1 || err != nil {
		t.Fatalf("PatchMatching = %d, %v; want 1", n, err)
	}
}

// A patch that moves a record's indexed value moves its index entry, and
// PatchMatching through an index patches every record it selects once,
// across transactions of its own and when the patch moves the records
// along the index it reads.
func TestPatchIndexes(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("ix", storh.WithIndex(storh.Index("status")), storh.WithIndex(storh.Index("n")))
	if err != nil {
		t.Fatal(err)
	}
	// Past two of PatchMatching's transactions (shrunk by STORH_TEST_TUNE
	// under the invariant checks, which check every commit whole).
	total := 2*tune.MatchingBatch + 300
	items := make([]any, total)
	for i := range items {
		items[i] = storh.Map{"status": []string{"open", "closed"}[i%2], "n": int64(i)}
	}
	if _, err := docs.PutMany(items); err != nil {
		t.Fatal(err)
	}
	agree := func(c query.Cond, want int) {
		t.Helper()
		viaIndex, err := docs.Find(query.All().Where(c))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for r, err := range docs.Stream(query.All()) {
			if err != nil {
				t.Fatal(err)
			}
			if matchesCond(r.Data(), c) {
				got++
			}
		}
		if len(viaIndex) != want || got != want {
			t.Fatalf("%v: %d through the index, %d by a scan, want %d", c, len(viaIndex), got, want)
		}
	}
	n, err := docs.PatchMatching(query.All().Where(query.Field("status").Eq("open")), storh.Set("status", "done"), storh.Inc("n", 1_000_000))
	if err != nil || n != total/2 {
		t.Fatalf("PatchMatching = %d, %v; want %d", n, err, total/2)
	}
	plan, err := docs.Explain(query.All().Where(query.Field("status").Eq("done")))
	if err != nil || len(plan.Indexes) == 0 {
		t.Fatalf("Explain = %+v, %v; want the status index", plan, err)
	}
	agree(query.Field("status").Eq("open"), 0)
	agree(query.Field("status").Eq("done"), total/2)
	agree(query.Field("n").Gte(1_000_000), total/2)
	// Ordered by the field it increments, a limited patch takes each of the
	// first records once, though each moves past the others.
	n, err = docs.PatchMatching(query.All().Where(query.Field("n").Gte(0)).OrderBy("n", query.Asc).Limit(10), storh.Inc("n", 10_000_000))
	if err != nil || n != 10 {
		t.Fatalf("ordered PatchMatching = %d, %v; want 10", n, err)
	}
	agree(query.Field("n").Gte(10_000_000), 10)
	for i := range int64(10) {
		if c, err := docs.CountMatching(query.All().Where(query.Field("n").Eq(10_000_000 + 2*i + 1))); err != nil || c != 1 {
			t.Fatalf("n = %d: %d records, %v; want 1", 10_000_000+2*i+1, c, err)
		}
	}
	// Without a limit, each record once, though the patch moves each ahead
	// of the walk through the index.
	sumN := func() (sum int64) {
		for r, err := range docs.Stream(query.All()) {
			if err != nil {
				t.Fatal(err)
			}
			sum += r.Data()["n"].(int64)
		}
		return sum
	}
	before := sumN()
	n, err = docs.PatchMatching(query.All().Where(query.Field("n").Gte(0)).OrderBy("n", query.Asc), storh.Inc("n", 3))
	if err != nil || n != total {
		t.Fatalf("ordered PatchMatching = %d, %v; want %d", n, err, total)
	}
	if after := sumN(); after != before+3*int64(total) {
		t.Fatalf("the sum of n went from %d to %d, want +%d", before, after, 3*total)
	}
}

// matchesCond evaluates the few conditions TestPatchIndexes asks, by hand.
func matchesCond(m storh.Map, c query.Cond) bool {
	switch c.String() {
	case `status = "open"`:
		return m["status"] == "open"
	case `status = "done"`:
		return m["status"] == "done"
	case "n >= 1000000":
		return m["n"].(int64) >= 1_000_000
	case "n >= 10000000":
		return m["n"].(int64) >= 10_000_000
	}
	panic(c.String())
}

// incConcurrently runs goroutines × per Inc of one field of record id,
// spread over the handles (DB-level Patch, and Patch inside Update, in
// turn), and checks that every one counted.
func incConcurrently(t *testing.T, dbs []*storh.DB, coll string, id uuidv7.UUID, goroutines, per int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		db := dbs[g%len(dbs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			docs, err := db.Docs(coll)
			if err != nil {
				errs <- err
				return
			}
			for range per {
				if g%2 == 0 {
					_, err = docs.Patch(id, storh.Inc("n", 1))
				} else {
					err = db.Update(func(tx *storh.Tx) error {
						d, err := tx.Docs(coll)
						if err != nil {
							return err
						}
						_, err = d.Patch(id, storh.Inc("n", 1))
						return err
					})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	docs, err := dbs[0].Docs(coll)
	if err != nil {
		t.Fatal(err)
	}
	r, err := docs.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Data()["n"], int64(goroutines*per); got != want {
		t.Fatalf("n = %v after %d increments", got, want)
	}
}

// No Inc is lost: 16 goroutines × 1000 increments of one record.
func TestPatchConcurrentInc(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("counter")
	if err != nil {
		t.Fatal(err)
	}
	r, err := docs.Put(storh.Map{"n": 0})
	if err != nil {
		t.Fatal(err)
	}
	incConcurrently(t, []*storh.DB{db}, "counter", r.ID, 16, 1000)
}

type patchedItem struct {
	Name  string   `msgpack:"name"`
	Count int      `msgpack:"count"`
	Tags  []string `msgpack:"tags"`
}

// A typed collection's patches return the item as T, and refuse a result
// that would no longer decode into T, leaving the record as it was.
func TestTypedPatch(t *testing.T) {
	db := openTemp(t)
	items, err := storh.DocsOf[patchedItem](db, "typed")
	if err != nil {
		t.Fatal(err)
	}
	it, err := items.Put(patchedItem{Name: "a", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := items.Patch(it.ID, storh.Inc("count", 2), storh.Push("tags", "x"), storh.AddToSet("tags", "x", "y"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (patchedItem{Name: "a", Count: 3, Tags: []string{"x", "y"}}); !reflect.DeepEqual(got.Value, want) || got.ID != it.ID {
		t.Fatalf("Patch = %+v, want %+v", got, want)
	}
	before, err := items.Untyped().Get(it.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = items.Patch(it.ID, storh.Set("count", "many"))
	checkErr(t, err, storh.ErrTypeMismatch, "count")
	n, err := items.PatchMatching(query.All(), storh.Set("name", 5))
	checkErr(t, err, storh.ErrTypeMismatch, "name", it.ID.String())
	if n != 0 {
		t.Fatalf("PatchMatching = %d", n)
	}
	after, err := items.Untyped().Get(it.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after.Raw(), before.Raw()) {
		t.Fatalf("the record changed: %v", after.Data())
	}
	n, err = items.PatchMatching(query.All().Where(query.Field("tags").Contains("y")), storh.Pull("tags", "x"))
	if err != nil || n != 1 {
		t.Fatalf("PatchMatching = %d, %v", n, err)
	}
	if got, err := items.Get(it.ID); err != nil || !slices.Equal(got.Value.Tags, []string{"y"}) {
		t.Fatalf("Get = %+v, %v", got, err)
	}
}

// PatchMatchingContext stops when its context is done, having changed
// nothing in the transaction it stopped.
func TestPatchMatchingContext(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("ctx")
	if err != nil {
		t.Fatal(err)
	}
	r, err := docs.Put(storh.Map{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n, err := docs.PatchMatchingContext(ctx, query.All(), storh.Inc("n", 1))
	checkErr(t, err, context.Canceled)
	if got, _ := docs.Get(r.ID); n != 0 || !bytes.Equal(got.Raw(), r.Raw()) {
		t.Fatalf("PatchMatchingContext = %d; the record is %v", n, got.Data())
	}
}

// A patch is a put to Watch: a watcher hears of the patched record, with
// its new data, and hears nothing of a patch that changed nothing.
func TestPatchWatch(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("watched")
	if err != nil {
		t.Fatal(err)
	}
	r, err := docs.Put(storh.Map{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	// The watch starts after r, and its catch-up yields a newer marker: r,
	// not after the cursor, can only come by the notices of commits.
	marker, err := docs.Put(storh.Map{"marker": true})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	seen := make(chan []storh.Record)
	go func() { seen <- watchUntil(t, docs, r.ID, 3, started) }()
	<-started
	if _, err := docs.Patch(r.ID, storh.Set("n", 1)); err != nil { // changes nothing
		t.Fatal(err)
	}
	if _, err := docs.Patch(r.ID, storh.Inc("n", 1)); err != nil {
		t.Fatal(err)
	}
	if n, err := docs.PatchMatching(query.All().Where(query.Field("n").Exists()), storh.Inc("n", 1)); n != 1 || err != nil {
		t.Fatalf("PatchMatching = %d, %v", n, err)
	}
	got := <-seen
	if got[0].ID != marker.ID || got[1].ID != r.ID || got[1].Data()["n"] != int64(2) || got[2].ID != r.ID || got[2].Data()["n"] != int64(3) {
		t.Fatalf("the watch saw %v", got)
	}
}
