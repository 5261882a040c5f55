package order_test

import (
	"bytes"
	"slices"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/internal/order"
)

// genPair draws two values, the second often near the first.
func genPair(t *rapid.T) (any, any) {
	a := genValue(t, 3)
	return a, genNear(t, a, 3)
}

// TestKeyOrderMatchesCompare: the keys of two values compare as Compare
// says, and Compare is antisymmetric.
func TestKeyOrderMatchesCompare(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genPair(t)
		want := order.Compare(a, b)
		if back := order.Compare(b, a); back != -want {
			t.Fatalf("Compare(a, b) = %d but Compare(b, a) = %d\na = %s\nb = %s", want, back, show(a), show(b))
		}
		ka, kb := key(t, a), key(t, b)
		if got := sign(bytes.Compare(ka, kb)); got != want {
			t.Fatalf("keys compare %d, Compare says %d\na = %s\nb = %s\n%x\n%x", got, want, show(a), show(b), ka, kb)
		}
	})
}

// TestCompoundKeyOrder: concatenated keys, as a compound index stores
// them, with or without a trailing id, compare as their values
// lexicographically.
func TestCompoundKeyOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a1, b1 := genPair(t)
		a2, b2 := genPair(t)
		want := order.Compare(a1, b1)
		if want == 0 {
			want = order.Compare(a2, b2)
		}
		ka := append(key(t, a1), key(t, a2)...)
		kb := append(key(t, b1), key(t, b2)...)
		if got := sign(bytes.Compare(ka, kb)); got != want {
			t.Fatalf("compound keys compare %d, want %d\na = %s, %s\nb = %s, %s", got, want, show(a1), show(a2), show(b1), show(b2))
		}
		if want != 0 { // ids only break ties
			ka, kb = append(ka, genID(t)...), append(kb, genID(t)...)
			if got := sign(bytes.Compare(ka, kb)); got != want {
				t.Fatalf("compound keys with ids compare %d, want %d\na = %s, %s\nb = %s, %s", got, want, show(a1), show(a2), show(b1), show(b2))
			}
		}
	})
}

// TestKeysArePrefixFree: decodeKey finds where a key ends from its own
// bytes, whatever follows, and gets the value back; so no key is a proper
// prefix of another. Also: two keys of which one is a prefix are equal.
func TestKeysArePrefixFree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genPair(t)
		k := key(t, a)
		tail := rapid.SliceOfN(rapid.Byte(), 0, 20).Draw(t, "tail")
		back, n, err := decodeKey(append(slices.Clone(k), tail...))
		if err != nil || n != len(k) {
			t.Fatalf("decodeKey(key + tail) = %d, %v; key has %d bytes\n%s\n%x", n, err, len(k), show(a), k)
		}
		if order.Compare(back, a) != 0 || !bytes.Equal(key(t, back), k) {
			t.Fatalf("key of %s decodes to %s", show(a), show(back))
		}
		kb := key(t, b)
		if (bytes.HasPrefix(kb, k) || bytes.HasPrefix(k, kb)) && !bytes.Equal(k, kb) {
			t.Fatalf("key of %s is a prefix of the key of %s, or the reverse", show(a), show(b))
		}
	})
}

// TestAppendRawMatchesAppend: the key of any msgpack encoding of a value
// is Append's: from the library (compact integers or not, float32 where
// exact or not, map keys sorted or in Go's random order) and from a writer
// that picks among every encoding at random.
func TestAppendRawMatchesAppend(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genValue(t, 3)
		want := key(t, v)
		compact := rapid.Bool().Draw(t, "compactInts")
		float32s := rapid.Bool().Draw(t, "float32s")
		sorted := rapid.Bool().Draw(t, "sortMapKeys")
		raw := encodeLib(t, v, compact, float32s, sorted)
		if got := rawKey(t, raw); !bytes.Equal(got, want) {
			t.Fatalf("library encoding %x (compact %v, float32 %v, sorted %v): AppendRaw %x, Append %x\n%s", raw, compact, float32s, sorted, got, want, show(v))
		}
		raw = writeMsgpack(t, nil, v)
		prefix := []byte("dst")
		got, err := order.AppendRaw(prefix, raw)
		if err != nil || !bytes.Equal(got, append(prefix, want...)) {
			t.Fatalf("random encoding %x: AppendRaw = %x, %v; Append %x\n%s", raw, got, err, want, show(v))
		}
	})
}

// TestNumberBound: NumberBound(v, false) sorts after the key (followed by
// anything) of every number below v, before those of v; NumberBound(v,
// true) after those of v, before those above.
func TestNumberBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genNumber(t)
		x := genNear(t, v, 0)
		if order.Class(x) != order.TagNumber {
			x = genNumber(t)
		}
		lo, err := order.NumberBound(nil, v, false)
		if err != nil {
			t.Fatal(err)
		}
		hi, err := order.NumberBound(nil, v, true)
		if err != nil {
			t.Fatal(err)
		}
		k := append(key(t, x), rapid.SliceOfN(rapid.Byte(), 0, 17).Draw(t, "tail")...)
		c := order.CompareNumbers(x, v)
		if below := bytes.Compare(k, lo) < 0; below != (c < 0) {
			t.Fatalf("key of %s vs NumberBound(%s, false): below %v, but values compare %d", show(x), show(v), below, c)
		}
		if above := bytes.Compare(k, hi) >= 0; above != (c > 0) {
			t.Fatalf("key of %s vs NumberBound(%s, true): at or above %v, but values compare %d", show(x), show(v), above, c)
		}
	})
}

// TestBound: [Bound(v, false), Bound(v, true)) holds the keys, followed
// by anything, of exactly the values equal to v (numbers by value), below
// it those of smaller values, above it those of larger ones.
func TestBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v, x := genPair(t)
		lo, err := order.Bound(nil, v, false)
		if err != nil {
			t.Fatal(err)
		}
		hi, err := order.Bound([]byte("dst"), v, true)
		if err != nil || string(hi[:3]) != "dst" {
			t.Fatalf("Bound with dst: %q, %v", hi, err)
		}
		hi = hi[3:]
		k := append(key(t, x), rapid.SliceOfN(rapid.Byte(), 0, 17).Draw(t, "tail")...)
		c := cmpByValue(x, v)
		if below := bytes.Compare(k, lo) < 0; below != (c < 0) {
			t.Fatalf("key of %s vs Bound(%s, false) = %x: below %v, but values compare %d", show(x), show(v), lo, below, c)
		}
		if above := bytes.Compare(k, hi) >= 0; above != (c > 0) {
			t.Fatalf("key of %s vs Bound(%s, true) = %x: at or above %v, but values compare %d", show(x), show(v), hi, above, c)
		}
	})
}

// cmpByValue is Compare with numbers compared by value alone.
func cmpByValue(x, v any) int {
	if order.Class(x) == order.TagNumber && order.Class(v) == order.TagNumber {
		return order.CompareNumbers(x, v)
	}
	return order.Compare(x, v)
}

// TestStringPrefix: the keys (followed by anything) in [StringPrefix(p),
// PrefixEnd(StringPrefix(p))) are exactly those of the strings starting
// with p, and all of them start with StringPrefix(p).
func TestStringPrefix(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genString(t, "p")
		var x any
		if rapid.IntRange(0, 3).Draw(t, "nonString") == 0 {
			x = genValue(t, 2)
		} else {
			x = p + genString(t, "rest")
			if rapid.Bool().Draw(t, "nudge") {
				x = genNear(t, x, 0)
			}
		}
		lo := order.StringPrefix([]byte("dst"), p)[3:]
		hi := order.PrefixEnd(lo)
		if hi == nil {
			t.Fatalf("PrefixEnd(StringPrefix(%q)) is nil", p)
		}
		k := append(key(t, x), rapid.SliceOfN(rapid.Byte(), 0, 17).Draw(t, "tail")...)
		s, isString := x.(string)
		want := isString && strings.HasPrefix(s, p)
		if in := bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0; in != want {
			t.Fatalf("key of %s in the Prefix(%q) range: %v, want %v", show(x), p, in, want)
		}
		if has := bytes.HasPrefix(k, lo); has != want {
			t.Fatalf("key of %s starts with StringPrefix(%q): %v, want %v", show(x), p, has, want)
		}
	})
}

// TestPrefixEnd: PrefixEnd(p) is above every string with prefix p and is
// the least such: a string in [p, PrefixEnd(p)) has prefix p. It is nil
// only for p all 0xFF, and leaves p alone.
func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ p, want string }{
		{"", ""}, {"\xff", ""}, {"\xff\xff", ""},
		{"a", "b"}, {"a\xff", "b"}, {"a\xff\xff", "b"}, {"a\x00", "a\x01"}, {"\x00", "\x01"}, {"a\xfe\xff", "a\xff"},
	} {
		got := order.PrefixEnd([]byte(tc.p))
		if string(got) != tc.want || (got == nil) != (tc.want == "") {
			t.Errorf("PrefixEnd(%q) = %q, want %q", tc.p, got, tc.want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		p := rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, 5).Draw(t, "p")
		q := rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, 7).Draw(t, "q")
		if rapid.Bool().Draw(t, "extend") {
			q = append(slices.Clone(p), q...)
		}
		orig := slices.Clone(p)
		end := order.PrefixEnd(p)
		if !bytes.Equal(p, orig) {
			t.Fatalf("PrefixEnd modified p")
		}
		has := bytes.HasPrefix(q, p)
		if end == nil {
			if len(bytes.Trim(p, "\xff")) != 0 {
				t.Fatalf("PrefixEnd(%x) = nil", p)
			}
			return
		}
		if in := bytes.Compare(q, p) >= 0 && bytes.Compare(q, end) < 0; in != has {
			t.Fatalf("q %x in [p %x, PrefixEnd %x): %v, has prefix p: %v", q, p, end, in, has)
		}
	})
}

// indexEntry is one entry of a simulated index.
type indexEntry struct {
	v   any
	key []byte
}

// TestRangeRecipes runs the recipes of the package doc over a simulated
// index (value keys followed by a 16-byte id, sorted) and checks that the
// [lo, hi) range holds exactly the entries the operator's definition
// selects: within the bound's class (booleans one class, NaN in no range),
// numbers by value; the "Any" operators over the whole order.
func TestRangeRecipes(t *testing.T) {
	ops := []string{"class", "eq", "eqTyped", "gt", "gte", "lt", "lte", "between", "prefix", "gtAny", "lteAny"}
	rapid.Check(t, func(t *rapid.T) {
		var index []indexEntry
		for i, n := 0, rapid.IntRange(0, 40).Draw(t, "entries"); i < n; i++ {
			v := genValue(t, 1)
			index = append(index, indexEntry{v, append(key(t, v), genID(t)...)})
		}
		slices.SortFunc(index, func(a, b indexEntry) int { return bytes.Compare(a.key, b.key) })

		op := rapid.SampledFrom(ops).Draw(t, "op")
		var q, q2 any
		for {
			if len(index) > 0 && rapid.Bool().Draw(t, "fromIndex") {
				q = index[rapid.IntRange(0, len(index)-1).Draw(t, "pick")].v
			} else {
				q = genScalar(t)
			}
			if op == "prefix" {
				if _, ok := q.(string); !ok {
					q = genString(t, "prefix")
				}
			}
			q2 = genNear(t, q, 0)
			switch op {
			case "gt", "gte", "lt", "lte", "between":
				// A NaN bound is the query's to handle (as matching
				// nothing); Bound of NaN bounds only the NaN keys.
				if order.IsNaN(q) || order.IsNaN(q2) {
					continue
				}
			}
			if op != "between" || sameRangeClass(q, q2) {
				break
			}
		}
		lo, hi, err := recipe(op, q, q2)
		if err != nil {
			t.Fatal(err)
		}
		from := sort.Search(len(index), func(i int) bool { return bytes.Compare(index[i].key, lo) >= 0 })
		to := len(index)
		if hi != nil {
			to = sort.Search(len(index), func(i int) bool { return bytes.Compare(index[i].key, hi) >= 0 })
		}
		for i, e := range index {
			in := i >= from && i < to
			if want := selects(op, e.v, q, q2); in != want {
				t.Fatalf("%s %s %s: entry %s in [%x, %x): %v, want %v", op, show(q), show(q2), show(e.v), lo, hi, in, want)
			}
		}
	})
}

// rangeClass is the class of v for range operators: booleans are one.
func rangeClass(v any) (lo, hi byte) {
	c := order.Class(v)
	switch c {
	case order.TagFalse, order.TagTrue:
		return order.TagFalse, order.TagTrue + 1
	}
	return c, c + 1
}

func sameRangeClass(a, b any) bool {
	la, _ := rangeClass(a)
	lb, _ := rangeClass(b)
	return la == lb
}

// recipe builds [lo, hi) for op as the package doc says; hi nil is open.
func recipe(op string, q, q2 any) (lo, hi []byte, err error) {
	clo, chi := rangeClass(q)
	classLo, classHi := order.ClassStart(nil, clo), order.ClassStart(nil, chi)
	if clo == order.TagNumber {
		classLo = order.AfterNaN(nil)
	}
	must := func(b []byte, e error) []byte {
		if err == nil {
			err = e
		}
		return b
	}
	switch op {
	case "class":
		return classLo, classHi, nil
	case "eq":
		return must(order.Bound(nil, q, false)), must(order.Bound(nil, q, true)), err
	case "eqTyped":
		k := must(order.Append(nil, q))
		return k, order.PrefixEnd(k), err
	case "gt":
		return must(order.Bound(nil, q, true)), classHi, err
	case "gte":
		return must(order.Bound(nil, q, false)), classHi, err
	case "lt":
		return classLo, must(order.Bound(nil, q, false)), err
	case "lte":
		return classLo, must(order.Bound(nil, q, true)), err
	case "between":
		return must(order.Bound(nil, q, false)), must(order.Bound(nil, q2, true)), err
	case "prefix":
		p := order.StringPrefix(nil, q.(string))
		return p, order.PrefixEnd(p), nil
	case "gtAny":
		return must(order.Bound(nil, q, true)), nil, err
	case "lteAny":
		return nil, must(order.Bound(nil, q, true)), err
	}
	panic(op)
}

// selects is the definition of op, without keys.
func selects(op string, x, q, q2 any) bool {
	switch op {
	case "gtAny":
		return cmpByValue(x, q) > 0
	case "lteAny":
		return cmpByValue(x, q) <= 0
	case "eq":
		return cmpByValue(x, q) == 0
	case "eqTyped":
		return order.Compare(x, q) == 0
	case "prefix":
		s, ok := x.(string)
		return ok && strings.HasPrefix(s, q.(string))
	}
	if !sameRangeClass(x, q) || order.IsNaN(x) {
		return false
	}
	c := cmpByValue(x, q)
	switch op {
	case "class":
		return true
	case "gt":
		return c > 0
	case "gte":
		return c >= 0
	case "lt":
		return c < 0
	case "lte":
		return c <= 0
	case "between":
		return c >= 0 && cmpByValue(x, q2) <= 0
	}
	panic(op)
}
