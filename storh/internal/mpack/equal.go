package mpack

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Normalize maps a Go value, as a user would pass it to WhereEqual, into the
// normalised form Decode produces, so that the two compare with Equal:
// signed and unsigned integers of any width become int64 (uint64 above
// math.MaxInt64), float32 becomes float64, time.Time moves to UTC, []byte is
// copied, and []any, map[string]any, pointers and other slices, arrays and
// string-keyed maps are converted element by element through reflection.
// Byte arrays become []byte and nil pointers, slices and maps become nil,
// matching how the msgpack encoder writes them.
//
// Normalize returns ErrUnsupported for values with no msgpack form here
// (structs other than time.Time, channels, functions, complex numbers, maps
// with non-string keys) and ErrTooDeep for values nested more than MaxDepth
// levels, which includes cyclic ones.
func Normalize(v any) (any, error) {
	return normalize(v, 1)
}

func normalize(v any, depth int) (any, error) {
	switch x := v.(type) {
	case nil, bool, int64, float64, string, uuidv7.UUID, objectid.ObjectID:
		return v, nil
	case *uuidv7.UUID:
		if x == nil {
			return nil, nil
		}
		return *x, nil
	case *objectid.ObjectID:
		if x == nil {
			return nil, nil
		}
		return *x, nil
	case time.Time:
		return x.UTC(), nil
	}
	// Everything else, including the other integer widths, goes through
	// reflection: Normalize runs once per query value, not per record.
	return normalizeReflect(reflect.ValueOf(v), depth)
}

func normUint(u uint64) any {
	if u > math.MaxInt64 {
		return u
	}
	return int64(u)
}

func normalizeReflect(rv reflect.Value, depth int) (any, error) {
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return normUint(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
		if depth > MaxDepth {
			return nil, tooDeep()
		}
		return normalize(rv.Elem().Interface(), depth+1)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return nil, nil
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			out := make([]byte, rv.Len()) // element-wise: the type may be named
			for i := range out {
				out[i] = byte(rv.Index(i).Uint())
			}
			return out, nil
		}
		if depth > MaxDepth {
			return nil, tooDeep()
		}
		out := make([]any, rv.Len())
		for i := range out {
			var err error
			if out[i], err = normalize(rv.Index(i).Interface(), depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		if rv.IsNil() {
			return nil, nil
		}
		if depth > MaxDepth {
			return nil, tooDeep()
		}
		out := make(map[string]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			v, err := normalize(it.Value().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[it.Key().String()] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: Go type %s", ErrUnsupported, rv.Type())
}

func tooDeep() error {
	return fmt.Errorf("%w: Go value nested more than %d levels (cyclic?)", ErrTooDeep, MaxDepth)
}

// Equal reports whether two normalised values are equal under the strict
// typed rules of EqualRaw. Values of types outside the normalised form never
// compare equal; pass them through Normalize first.
func Equal(a, b any) bool {
	return equal(a, b, 1)
}

func equal(a, b any, depth int) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int64:
		switch y := b.(type) {
		case int64:
			return x == y
		case uint64:
			return x >= 0 && uint64(x) == y
		}
	case uint64:
		switch y := b.(type) {
		case uint64:
			return x == y
		case int64:
			return y >= 0 && uint64(y) == x
		}
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case uuidv7.UUID:
		y, ok := b.(uuidv7.UUID)
		return ok && x == y
	case objectid.ObjectID:
		y, ok := b.(objectid.ObjectID)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || depth > MaxDepth {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i], depth+1) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) || depth > MaxDepth {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(xv, yv, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// EqualRaw reports whether the raw msgpack value equals want under strict
// typed equality: integers compare by numeric value whatever their width or
// signedness (uint64(5) equals int64(5), but the maximum uint64 never equals
// -1); floats compare by value (float32 widened, NaN equal to nothing); an
// integer never equals a float or a string (1, 1.0 and "1" are all
// different); str never equals bin; nil equals only nil; timestamps compare
// with time.Time.Equal; arrays compare element-wise and maps by the same key
// set with equal values.
//
// raw must be exactly one value that Decode accepts, otherwise EqualRaw
// returns its error (ErrMalformed for trailing bytes). want should already be
// normalised; other types go through Normalize, which may allocate or fail
// with ErrUnsupported. Comparing against a normalised scalar allocates
// nothing.
func EqualRaw(raw []byte, want any) (bool, error) {
	end, _, err := validate(raw, 0, 1, true)
	if err != nil {
		return false, err
	}
	if err := trailing(raw, end); err != nil {
		return false, err
	}
	eq, _, err := equalRaw(raw, 0, want)
	return eq, err
}

// equalRaw compares the validated value at b[pos] with want. The end offset
// it returns is only meaningful when the values are equal: an unequal
// comparison may stop before the end of the value.
func equalRaw(b []byte, pos int, want any) (bool, int, error) {
	h, _ := readHead(b, pos) // validated: cannot fail
	p := pos + h.size
	end := p + h.n // right for scalars and for str, bin, ext
	switch w := want.(type) {
	case nil:
		return h.k == kNil, end, nil
	case bool:
		return (h.k == kTrue && w) || (h.k == kFalse && !w), end, nil
	case int64:
		return (h.k == kInt && int64(h.u) == w) || (h.k == kUint && w >= 0 && uint64(w) == h.u), end, nil
	case uint64:
		return (h.k == kUint && h.u == w) || (h.k == kInt && int64(h.u) >= 0 && h.u == w), end, nil
	case float64:
		return (h.k == kFloat32 && float64(math.Float32frombits(uint32(h.u))) == w) ||
			(h.k == kFloat64 && math.Float64frombits(h.u) == w), end, nil
	case string:
		return h.k == kStr && string(b[p:end]) == w, end, nil
	case []byte:
		return h.k == kBin && bytes.Equal(b[p:end], w), end, nil
	case time.Time:
		if h.k != kExt || h.ext != extTimestamp {
			return false, end, nil
		}
		t, _ := timestamp(h.ext, b[p:end], p) // validated: a timestamp
		return t.Equal(w), end, nil
	case uuidv7.UUID:
		return h.k == kExt && h.ext == ExtUUID && bytes.Equal(b[p:end], w[:]), end, nil
	case objectid.ObjectID:
		return h.k == kExt && h.ext == ExtObjectID && bytes.Equal(b[p:end], w[:]), end, nil
	case []any:
		if h.k != kArray || h.n != len(w) {
			return false, end, nil
		}
		for _, wv := range w {
			eq, next, err := equalRaw(b, p, wv)
			if !eq || err != nil {
				return false, 0, err
			}
			p = next
		}
		return true, p, nil
	case map[string]any:
		if h.k != kMap || h.n != len(w) {
			return false, end, nil
		}
		// Keys in validated data are unique, so n matches with every raw
		// key present in want means the key sets are the same.
		for i := 0; i < h.n; i++ {
			key, next, _ := mapKey(b, p)
			wv, ok := w[string(key)]
			if !ok {
				return false, 0, nil
			}
			eq, vend, err := equalRaw(b, next, wv)
			if !eq || err != nil {
				return false, 0, err
			}
			p = vend
		}
		return true, p, nil
	}
	norm, err := Normalize(want)
	if err != nil {
		return false, 0, err
	}
	return equalRaw(b, pos, norm)
}
