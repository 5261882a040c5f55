package query_test

import (
	"bytes"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

var (
	zeroKey = uuidv7.UUID{}
	maxKey  = uuidv7.UUID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// add returns u + d as a 128-bit big-endian integer (d may be negative),
// without wrapping checks: the tests only use it away from the ends.
func add(u uuidv7.UUID, d int) uuidv7.UUID {
	carry := d
	for i := 15; i >= 0 && carry != 0; i-- {
		v := int(u[i]) + carry
		carry = 0
		for v < 0 {
			v += 256
			carry--
		}
		for v > 255 {
			v -= 256
			carry++
		}
		u[i] = byte(v)
	}
	return u
}

func TestRange(t *testing.T) {
	const ms = 1_700_000_000_000
	x := uuidv7.MustParse("018bcfe5-6800-7abc-8def-0123456789ab") // at ms
	minMs, maxMs := uuidv7.MinForTimestampMs(ms), uuidv7.MaxForTimestampMs(ms)
	lastByte := func(u uuidv7.UUID, b byte) uuidv7.UUID { u[15] = b; return u }
	tests := []struct {
		name   string
		q      query.Query
		lo, hi uuidv7.UUID
		ok     bool
	}{
		{"all", query.All(), zeroKey, maxKey, true},
		{"all reversed", query.All().Reverse(), zeroKey, maxKey, true},
		{"after", query.All().After(x), add(x, 1), maxKey, true},
		{"after carries", query.All().After(lastByte(x, 0xff)), add(lastByte(x, 0xff), 1), maxKey, true},
		{"after the largest key", query.All().After(maxKey), zeroKey, maxKey, false},
		{"after zero", query.All().After(zeroKey), add(zeroKey, 1), maxKey, true},
		{"before", query.All().Before(x), zeroKey, add(x, -1), true},
		{"before borrows", query.All().Before(lastByte(x, 0)), zeroKey, add(lastByte(x, 0), -1), true},
		{"before zero", query.All().Before(zeroKey), zeroKey, maxKey, false},
		{"before the largest key", query.All().Before(maxKey), zeroKey, add(maxKey, -1), true},
		{"after and before the same id", query.All().After(x).Before(x), add(x, 1), add(x, -1), false},
		{"after and before adjacent ids", query.All().After(x).Before(add(x, 1)), add(x, 1), x, false},
		{"one key between", query.All().After(x).Before(add(x, 2)), add(x, 1), add(x, 1), true},
		{"after replaced", query.All().After(maxKey).After(x), add(x, 1), maxKey, true},
		{"before replaced", query.All().Before(zeroKey).Before(x), zeroKey, add(x, -1), true},
		{"window", query.All().TimeRangeMs(ms, ms+10), minMs, uuidv7.MaxForTimestampMs(ms + 10), true},
		{"one-ms window", query.All().TimeRangeMs(ms, ms), minMs, maxMs, true},
		{"inverted window", query.All().TimeRangeMs(ms+1, ms), zeroKey, maxKey, false},
		{"open window", query.All().TimeRangeMs(math.MinInt64, math.MaxInt64),
			uuidv7.MinForTimestampMs(0), uuidv7.MaxForTimestampMs(uuidv7.MaxTimestampMs), true},
		{"window from before the epoch", query.All().TimeRangeMs(-5, 3), uuidv7.MinForTimestampMs(0), uuidv7.MaxForTimestampMs(3), true},
		{"window past the last ms", query.All().TimeRangeMs(uuidv7.MaxTimestampMs-1, uuidv7.MaxTimestampMs+9),
			uuidv7.MinForTimestampMs(uuidv7.MaxTimestampMs - 1), uuidv7.MaxForTimestampMs(uuidv7.MaxTimestampMs), true},
		{"after inside the window", query.All().TimeRangeMs(ms, ms+10).After(x), add(x, 1), uuidv7.MaxForTimestampMs(ms + 10), true},
		{"after before the window", query.All().TimeRangeMs(ms+1, ms+10).After(x), uuidv7.MinForTimestampMs(ms + 1), uuidv7.MaxForTimestampMs(ms + 10), true},
		{"before inside the window", query.All().TimeRangeMs(ms-10, ms).Before(x), uuidv7.MinForTimestampMs(ms - 10), add(x, -1), true},
		{"after past the window", query.All().TimeRangeMs(ms-10, ms-1).After(x), add(x, 1), uuidv7.MaxForTimestampMs(ms - 1), false},
		{"before the window", query.All().TimeRangeMs(ms+1, ms+10).Before(x), uuidv7.MinForTimestampMs(ms + 1), add(x, -1), false},
		{"after the window's last id", query.All().TimeRangeMs(ms, ms).After(maxMs), add(maxMs, 1), maxMs, false},
		{"before the window's first id", query.All().TimeRangeMs(ms, ms).Before(minMs), minMs, add(minMs, -1), false},
		{"limit and conditions do not narrow the range", query.All().Limit(3).WhereEqual("a", 1).Reverse(), zeroKey, maxKey, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi, ok := keyRange(t, tc.q)
			if ok != tc.ok {
				t.Fatalf("%v.Range() ok = %v; want %v (lo %v, hi %v)", tc.q, ok, tc.ok, lo, hi)
			}
			if ok && (lo != tc.lo || hi != tc.hi) {
				t.Errorf("%v.Range() = [%v, %v]; want [%v, %v]", tc.q, lo, hi, tc.lo, tc.hi)
			}
		})
	}
}

// TestRangeWindowOutsideIDSpace: a window that lies wholly before the epoch
// or after the last representable millisecond holds no UUIDv7, so it must
// match nothing. Clamping both ends separately would turn [-10, -5] into
// [0, 0] and match the records of millisecond 0.
func TestRangeWindowOutsideIDSpace(t *testing.T) {
	for _, w := range [][2]int64{
		{-10, -5},
		{math.MinInt64, -1},
		{uuidv7.MaxTimestampMs + 1, uuidv7.MaxTimestampMs + 5},
		{uuidv7.MaxTimestampMs + 1, math.MaxInt64},
	} {
		q := query.All().TimeRangeMs(w[0], w[1])
		if lo, hi, ok := keyRange(t, q); ok {
			t.Errorf("%v.Range() = [%v, %v], true; want an empty range", q, lo, hi)
		}
	}
}

// inQuery is the definition of the range conditions, evaluated for one id.
func inQuery(id uuidv7.UUID, after, before *uuidv7.UUID, window *[2]int64) bool {
	if after != nil && id.Compare(*after) <= 0 {
		return false
	}
	if before != nil && id.Compare(*before) >= 0 {
		return false
	}
	if window != nil {
		ms := id.TimestampMs()
		if ms < window[0] || ms > window[1] {
			return false
		}
	}
	return true
}

// asV7 forces the version and variant bits, keeping everything else.
func asV7(b []byte) uuidv7.UUID {
	var u uuidv7.UUID
	copy(u[:], b)
	u[6] = 0x70 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	return u
}

// FuzzRange checks Range against the definition of After, Before and
// TimeRangeMs: a UUIDv7 lies in the key range exactly when it satisfies all
// three.
func FuzzRange(f *testing.F) {
	id := uuidv7.MustParse("018bcfe5-6800-7abc-8def-0123456789ab")
	f.Add(id[:], true, id[:], true, int64(0), int64(0), false, id[:])
	f.Add(id[:], true, maxKey[:], false, int64(1_700_000_000_000), int64(1_700_000_000_000), true, id[:])
	f.Add(zeroKey[:], false, zeroKey[:], true, int64(-5), int64(5), true, zeroKey[:])
	f.Fuzz(func(t *testing.T, afterB []byte, hasAfter bool, beforeB []byte, hasBefore bool, from, until int64, hasWindow bool, candB []byte) {
		q := query.All()
		var after, before *uuidv7.UUID
		var window *[2]int64
		if hasAfter {
			var a uuidv7.UUID
			copy(a[:], afterB)
			after, q = &a, q.After(a)
		}
		if hasBefore {
			var b uuidv7.UUID
			copy(b[:], beforeB)
			before, q = &b, q.Before(b)
		}
		if hasWindow {
			window, q = &[2]int64{from, until}, q.TimeRangeMs(from, until)
		}
		lo, hi, ok := keyRange(t, q)
		// Candidates: the fuzzed id, and ids at and next to every bound.
		cands := []uuidv7.UUID{asV7(candB), asV7(lo[:]), asV7(hi[:])}
		for _, p := range []*uuidv7.UUID{after, before} {
			if p != nil {
				next, prev := add(*p, 1), add(*p, -1)
				cands = append(cands, asV7(p[:]), asV7(next[:]), asV7(prev[:]))
			}
		}
		for _, ms := range []int64{from, until, from - 1, until + 1, 0, uuidv7.MaxTimestampMs} {
			cands = append(cands, uuidv7.MinForTimestampMs(ms), uuidv7.MaxForTimestampMs(ms))
		}
		for _, c := range cands {
			inRange := ok && c.Compare(lo) >= 0 && c.Compare(hi) <= 0
			if want := inQuery(c, after, before, window); inRange != want {
				t.Fatalf("%v: id %v (ms %d) in Range [%v, %v] ok=%v: %v; by definition: %v",
					q, c, c.TimestampMs(), lo, hi, ok, inRange, want)
			}
		}
	})
}

func TestImmutability(t *testing.T) {
	id := uuidv7.MustParse("018bcfe5-6800-7abc-8def-0123456789ab")
	base := query.All().WhereEqual("a", 1)
	// Derive two queries from one base: neither may see the other's condition.
	q1 := base.WhereEqual("b", 2)
	q2 := base.WhereEqual("c", 3)
	fields := func(q query.Query) string {
		var s []string
		for _, m := range regexp.MustCompile(`Where\((\w+) `).FindAllStringSubmatch(q.String(), -1) {
			s = append(s, m[1])
		}
		return strings.Join(s, ",")
	}
	if got := fields(base); got != "a" {
		t.Errorf("base conditions %q; want a", got)
	}
	if got := fields(q1); got != "a,b" {
		t.Errorf("q1 conditions %q; want a,b", got)
	}
	if got := fields(q2); got != "a,c" {
		t.Errorf("q2 conditions %q; want a,c", got)
	}
	// Built up to capacity and beyond, still independent.
	wide := base
	for _, f := range []string{"d", "e", "f", "g"} {
		wide = wide.WhereEqual(f, 0)
	}
	w1, w2 := wide.WhereEqual("x", 1), wide.WhereEqual("y", 1)
	if fields(w1) != "a,d,e,f,g,x" || fields(w2) != "a,d,e,f,g,y" {
		t.Errorf("derived from a wide base: %q, %q", fields(w1), fields(w2))
	}
	// Other modifiers do not touch the base either.
	derived := base.After(id).Before(id).TimeRangeMs(1, 2).Limit(5).Reverse()
	if base.String() != `All().Where(a = 1)` {
		t.Errorf("base changed to %s", base)
	}
	if p := compile(t, derived); p.Limit != 5 || !p.Reverse {
		t.Error("derived query lost its modifiers")
	}
	if p := compile(t, base); p.Limit != 0 || p.Reverse || p.Empty || p.Lo != zeroKey || p.Hi != maxKey {
		t.Error("base query gained modifiers")
	}
	// A query is a value: assigning copies it.
	c := derived
	c = c.Limit(9)
	if p := compile(t, derived); p.Limit != 5 {
		t.Error("Limit on a copy changed the original")
	}
}

func TestValidate(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	tests := []struct {
		name    string
		q       query.Query
		mention string // "" means valid
	}{
		{"all", query.All(), ""},
		{"limit 1", query.All().Limit(1), ""},
		{"everything valid", query.All().After(uuidv7.UUID{}).TimeRangeMs(5, 1).WhereEqual("a", nil).WhereEqual("b", []int{1}).Reverse().Limit(10), ""},
		{"zero value", query.Query{}, "query.All()"},
		{"zero value with modifiers", query.Query{}.Limit(3), "query.All()"},
		{"limit 0", query.All().Limit(0), "Limit(0)"},
		{"limit -1", query.All().Limit(-1), "Limit(-1)"},
		{"limit MinInt", query.All().Limit(math.MinInt), "Limit("},
		{"limit fixed later", query.All().Limit(0).Limit(2), ""},
		{"empty field", query.All().WhereEqual("", 1), "field name"},
		{"long field", query.All().WhereEqual(strings.Repeat("f", query.MaxFieldLength+1), 1), "limit"},
		{"longest field", query.All().WhereEqual(strings.Repeat("f", query.MaxFieldLength), 1), ""},
		{"chan value", query.All().WhereEqual("f", make(chan int)), `"f"`},
		{"func value", query.All().WhereEqual("g", func() {}), `"g"`},
		{"complex value", query.All().WhereEqual("c", 1i), "complex128"},
		{"struct value", query.All().WhereEqual("s", struct{ A int }{1}), `"s"`},
		{"non-string map keys", query.All().WhereEqual("m", map[int]int{1: 1}), `"m"`},
		{"cyclic value", query.All().WhereEqual("cy", cyclic), `"cy"`},
		{"bad condition after good ones", query.All().WhereEqual("ok", 1).WhereEqual("bad", make(chan int)), `"bad"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.q.Validate()
			if tc.mention == "" {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, query.ErrInvalidQuery) {
				t.Fatalf("Validate() = %v; want ErrInvalidQuery", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "storh: invalid query") || !strings.Contains(msg, tc.mention) {
				t.Errorf("message %q; want the prefix and %q", msg, tc.mention)
			}
		})
	}
}

func TestString(t *testing.T) {
	id := uuidv7.MustParse("018bcfe5-6800-7abc-8def-0123456789ab")
	tests := []struct {
		q    query.Query
		want string
	}{
		{query.All(), "All()"},
		{query.All().Reverse(), "All().Reverse()"},
		{query.All().Limit(100).After(id), "All().After(018bcfe5-6800-7abc-8def-0123456789ab).Limit(100)"},
		{query.All().Before(id).TimeRangeMs(-1, 2), "All().Before(018bcfe5-6800-7abc-8def-0123456789ab).TimeRangeMs(-1, 2)"},
		{query.All().WhereEqual("n", int8(3)).WhereEqual("s", "x").WhereEqual("z", nil).WhereEqual("f", float32(0.5)),
			`All().Where(n = 3).Where(s = "x").Where(z = null).Where(f = 0.5)`},
		{query.All().Reverse().Limit(0), "All().Reverse().Limit(0)"},
	}
	for _, tc := range tests {
		if got := tc.q.String(); got != tc.want {
			t.Errorf("String() = %s\nwant       %s", got, tc.want)
		}
	}
}

// encode writes a record the way the engine stores it: sorted keys, compact
// integers.
func encode(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestMatch(t *testing.T) {
	rec := encode(t, map[string]any{
		"i": 1, "big": uint64(math.MaxUint64), "neg": -200, "f": 1.0, "h": float32(0.5),
		"s": "1", "b": true, "n": nil, "l": []any{1, "a"}, "m": map[string]any{"k": "v"},
		"bin": []byte("1"),
	})
	tests := []struct {
		q    query.Query
		want bool
	}{
		{query.All(), true},
		{query.All().WhereEqual("i", 1), true},
		{query.All().WhereEqual("i", int8(1)), true},
		{query.All().WhereEqual("i", uint64(1)), true},
		{query.All().WhereEqual("i", 1.0), false},
		{query.All().WhereEqual("i", "1"), false},
		{query.All().WhereEqual("i", true), false},
		{query.All().WhereEqual("i", 2), false},
		{query.All().WhereEqual("big", uint64(math.MaxUint64)), true},
		{query.All().WhereEqual("big", -1), false},
		{query.All().WhereEqual("neg", int16(-200)), true},
		{query.All().WhereEqual("f", 1.0), true},
		{query.All().WhereEqual("f", float32(1)), true},
		{query.All().WhereEqual("f", 1), false},
		{query.All().WhereEqual("h", 0.5), true},
		{query.All().WhereEqual("s", "1"), true},
		{query.All().WhereEqual("s", []byte("1")), false},
		{query.All().WhereEqual("bin", []byte("1")), true},
		{query.All().WhereEqual("bin", "1"), false},
		{query.All().WhereEqual("b", true), true},
		{query.All().WhereEqual("b", false), false},
		{query.All().WhereEqual("n", nil), true},
		{query.All().WhereEqual("missing", nil), false},
		{query.All().WhereEqual("n", 0), false},
		{query.All().WhereEqual("l", []any{1, "a"}), true},
		{query.All().WhereEqual("l", []any{"a", 1}), false},
		{query.All().WhereEqual("l", []int{1}), false},
		{query.All().WhereEqual("m", map[string]string{"k": "v"}), true},
		{query.All().WhereEqual("m", map[string]any{"k": "v", "x": nil}), false},
		{query.All().WhereEqual("k", "v"), false}, // nested fields are not top-level
		{query.All().WhereEqual("i", 1).WhereEqual("s", "1").WhereEqual("b", true), true},
		{query.All().WhereEqual("i", 1).WhereEqual("s", "2"), false},
	}
	for _, tc := range tests {
		got, err := match(t, tc.q, rec)
		if err != nil || got != tc.want {
			t.Errorf("%v.Match = %v, %v; want %v", tc.q, got, err, tc.want)
		}
	}
	// Malformed payloads are errors, not misses.
	for _, bad := range [][]byte{{0x81, 0xa1, 'i'}, {0x81, 0xa1, 'i', 0xcd, 0x01}, {0xc1}} {
		if _, err := match(t, query.All().WhereEqual("i", 1), bad); err == nil {
			t.Errorf("Match(%x) accepted a malformed payload", bad)
		}
	}
}

func TestMatchAllocatesNothing(t *testing.T) {
	rec := encode(t, map[string]any{"a": 1, "name": "ada", "score": 0.5, "ok": true, "tags": []any{"x"}, "z": nil})
	for _, q := range []query.Query{
		query.All().WhereEqual("name", "ada"),
		query.All().WhereEqual("a", 1),
		query.All().WhereEqual("score", float32(0.5)),
		query.All().WhereEqual("ok", true).WhereEqual("z", nil),
		query.All().WhereEqual("missing", 3),
		query.All().WhereEqual("name", "bob"),
	} {
		var ok bool
		m := plan.NewMatcher(compile(t, q).Cond).Match
		allocs := testing.AllocsPerRun(100, func() { ok, _ = m(rec) })
		if allocs != 0 {
			t.Errorf("%v.Match allocates %v times per call; want 0", q, allocs)
		}
		_ = ok
	}
}

func TestContinueOnError(t *testing.T) {
	if compile(t, query.All()).OnError != nil {
		t.Error("All() has an error callback")
	}
	called := false
	q := query.All().ContinueOnError(func(uuidv7.UUID, error) { called = true })
	compile(t, q).OnError(uuidv7.UUID{}, nil)
	if !called {
		t.Error("the plan does not carry the callback")
	}
}

// compile returns the spec the engine runs for q.
func compile(t testing.TB, q query.Query) *plan.Spec {
	t.Helper()
	p, err := plan.Compile(q)
	if err != nil {
		t.Fatalf("compile %v: %v", q, err)
	}
	return p
}

func keyRange(t testing.TB, q query.Query) (lo, hi uuidv7.UUID, ok bool) {
	p := compile(t, q)
	return p.Lo, p.Hi, !p.Empty
}

// match runs q's filter on a payload; a query without conditions matches
// everything.
func match(t testing.TB, q query.Query, payload []byte) (bool, error) {
	return plan.NewMatcher(compile(t, q).Cond).Match(payload)
}

// TestBoolRanges: false and true are one class, false < true.
func TestBoolRanges(t *testing.T) {
	f, tr := encode(t, map[string]any{"b": false}), encode(t, map[string]any{"b": true})
	n := encode(t, map[string]any{"b": 1})
	for _, tc := range []struct {
		c             query.Cond
		onF, onT, onN bool
	}{
		{query.Field("b").Gt(false), false, true, false},
		{query.Field("b").Gte(false), true, true, false},
		{query.Field("b").Lt(true), true, false, false},
		{query.Field("b").Lte(true), true, true, false},
		{query.Field("b").Lt(false), false, false, false},
		{query.Field("b").Gt(true), false, false, false},
		{query.Field("b").Between(false, true), true, true, false},
		{query.Field("b").Between(true, false), false, false, false},
	} {
		q := query.All().Where(tc.c)
		for _, x := range []struct {
			rec  []byte
			want bool
		}{{f, tc.onF}, {tr, tc.onT}, {n, tc.onN}} {
			if got, err := match(t, q, x.rec); err != nil || got != x.want {
				t.Errorf("%v on %x = %v, %v; want %v", tc.c, x.rec, got, err, x.want)
			}
		}
	}
}

// TestNullRangeBound: a null bound is invalid on every range operator, and
// never panics while the condition is built.
func TestNullRangeBound(t *testing.T) {
	f := query.Field("a")
	for _, c := range []query.Cond{f.Gt(nil), f.Gte(nil), f.Lt(nil), f.Lte(nil), f.Between(nil, 1), f.Between(1, nil)} {
		if err := query.All().Where(c).Validate(); !errors.Is(err, query.ErrInvalidQuery) || !strings.Contains(err.Error(), "null") {
			t.Errorf("%v: Validate = %v; want ErrInvalidQuery naming the null bound", c, err)
		}
	}
}

// TestMatchThroughLists: a path that meets a list goes on into each element
// that is a map, and a condition holds when some value it reaches passes;
// Neq, NotIn and Missing hold when none passes Eq, In and Exists. Elements
// that are not maps, lists of lists included, reach nothing.
func TestMatchThroughLists(t *testing.T) {
	order := encode(t, map[string]any{
		"items": []any{
			map[string]any{"sku": "X", "qty": 1},
			map[string]any{"sku": "Y", "qty": 5, "tags": []any{"a"}},
			map[string]any{"qty": 3},
			map[string]any{"sku": nil},
			"loose",
			[]any{map[string]any{"sku": "deep"}},
		},
		"ship": map[string]any{"boxes": []any{map[string]any{"w": 2}, map[string]any{"w": 9}}},
	})
	F := query.Field
	for _, tc := range []struct {
		name string
		c    query.Cond
		want bool
	}{
		{"Eq holds when some element's value is equal", F("items.sku").Eq("X"), true},
		{"Eq holds for no element", F("items.sku").Eq("Z"), false},
		{"a list in a list is not descended", F("items.sku").Eq("deep"), false},
		{"Eq(nil) matches a present null in some element", F("items.sku").Eq(nil), true},
		{"Neq is Not Eq: some element has X", F("items.sku").Neq("X"), false},
		{"Neq holds when no element is equal", F("items.sku").Neq("Z"), true},
		{"In: some element", F("items.sku").In("Z", "Y"), true},
		{"NotIn: some element is in", F("items.sku").NotIn("Z", "Y"), false},
		{"NotIn: none is in", F("items.sku").NotIn("Z"), true},
		{"Gt: some element", F("items.qty").Gt(4), true},
		{"Lt: some element", F("items.qty").Lt(2), true},
		{"Between: some element", F("items.qty").Between(2, 4), true},
		{"Between: none", F("items.qty").Between(6, 8), false},
		{"Gt and Lt may hold for two elements", query.And(F("items.qty").Gt(4), F("items.qty").Lt(2)), true},
		{"ElemMatch needs one element for both", F("items").ElemMatch(query.And(F("qty").Gt(4), F("qty").Lt(2))), false},
		{"ElemMatch: one element with both", F("items").ElemMatch(query.And(F("sku").Eq("Y"), F("qty").Eq(5))), true},
		{"ElemMatch: sku and qty of two items", F("items").ElemMatch(query.And(F("sku").Eq("X"), F("qty").Eq(5))), false},
		{"ElemMatch: a non-map element has no fields", F("items").ElemMatch(query.And(F("sku").Missing(), F("qty").Missing())), true},
		{"Prefix: some element", F("items.sku").Prefix("Y"), true},
		{"Exists: some element has sku", F("items.sku").Exists(), true},
		{"Missing: Not Exists", F("items.sku").Missing(), false},
		{"Missing: no element has it", F("items.color").Missing(), true},
		{"Contains: some element's list", F("items.tags").Contains("a"), true},
		{"Not Eq is Neq", query.Not(F("items.sku").Eq("X")), false},
		{"a path through a map then a list", F("ship.boxes.w").Gt(5), true},
		{"a path through a list's element into a scalar is missing", F("items.sku.x").Exists(), false},
		{"the list itself is one value", F("items").Contains("loose"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := match(t, query.All().Where(tc.c), order)
			if err != nil || got != tc.want {
				t.Errorf("%v = %v, %v; want %v", tc.c, got, err, tc.want)
			}
		})
	}
}
