package engine

import (
	"fmt"
	"reflect"
	"sync"
)

// The msgpack encoder recurses without a limit, and a stack overflow is a
// fatal error in Go, not a panic: a cyclic value passed to Put would kill the
// process. So every value that can nest without a static bound is walked
// first, with a depth limit (MaxDepth) and a node budget (a cyclic value with
// several self-references would otherwise take exponential time to reach the
// depth limit).
const nodeBudget = MaxRecordSize // a record cannot hold more values than bytes

// checkShape rejects what cannot be a record before encoding: nil, scalars,
// slices, channels, funcs, and values nested too deeply or cyclic.
func checkShape(data any) error {
	switch v := data.(type) {
	case nil:
		return fmt.Errorf("%w: data is nil; pass a map or a struct", ErrInvalidData)
	case map[string]any:
		if v == nil {
			return fmt.Errorf("%w: data is a nil map", ErrInvalidData)
		}
		budget := nodeBudget
		return checkDepth(v, 1, &budget)
	}
	rv := reflect.ValueOf(data)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return fmt.Errorf("%w: data is a nil %T", ErrInvalidData, data)
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Map:
		if rv.IsNil() {
			return fmt.Errorf("%w: data is a nil map", ErrInvalidData)
		}
		if rv.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("%w: map keys must be strings, got %s", ErrInvalidData, rv.Type().Key())
		}
	case reflect.Struct:
	default:
		return fmt.Errorf("%w: data must be a map or a struct, got %T", ErrInvalidData, data)
	}
	if !mayNest(rv.Type()) {
		return nil
	}
	budget := nodeBudget
	return walkDepth(rv, 1, &budget)
}

func errTooDeep() error {
	return fmt.Errorf("%w: nested deeper than %d levels, or cyclic", ErrInvalidData, MaxDepth)
}

// checkDepth is walkDepth for the generic map form, without reflection.
// depth is the level v would have in the record; only maps and lists count
// against MaxDepth (a scalar inside the deepest allowed map is fine).
func checkDepth(v any, depth int, budget *int) error {
	if *budget--; *budget < 0 {
		return errTooDeep()
	}
	switch t := v.(type) {
	case map[string]any:
		if depth > MaxDepth {
			return errTooDeep()
		}
		for _, e := range t {
			if err := checkDepth(e, depth+1, budget); err != nil {
				return err
			}
		}
	case []any:
		if depth > MaxDepth {
			return errTooDeep()
		}
		for _, e := range t {
			if err := checkDepth(e, depth+1, budget); err != nil {
				return err
			}
		}
	default:
		if v != nil && !isScalar(v) {
			return walkDepth(reflect.ValueOf(v), depth, budget)
		}
	}
	return nil
}

func isScalar(v any) bool {
	switch v.(type) {
	case string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64,
		float32, float64, []byte:
		return true
	}
	return false
}

// walkDepth bounds the nesting of an arbitrary value the way the encoder
// will traverse it (pointers and interfaces are transparent).
func walkDepth(v reflect.Value, depth int, budget *int) error {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if *budget--; *budget < 0 {
		return errTooDeep()
	}
	if !mayNest(v.Type()) {
		// Bounded by its type; ValidateRecord checks the encoded depth.
		return nil
	}
	if depth > MaxDepth {
		return errTooDeep()
	}
	switch v.Kind() {
	case reflect.Struct:
		for _, i := range encodedFields(v.Type()) {
			if err := walkDepth(v.Field(i), depth+1, budget); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if err := walkDepth(v.Index(i), depth+1, budget); err != nil {
				return err
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if err := walkDepth(it.Value(), depth+1, budget); err != nil {
				return err
			}
		}
	}
	return nil
}

var nestCache sync.Map // reflect.Type → bool

// mayNest reports whether values of t can nest without a bound fixed by the
// type: t reaches an interface or itself. Plain structs of scalars, strings
// and times (the common case) are never walked.
func mayNest(t reflect.Type) bool {
	if v, ok := nestCache.Load(t); ok {
		return v.(bool)
	}
	r := typeMayNest(t, map[reflect.Type]bool{})
	nestCache.Store(t, r)
	return r
}

func typeMayNest(t reflect.Type, onPath map[reflect.Type]bool) bool {
	if onPath[t] {
		return true
	}
	onPath[t] = true
	defer delete(onPath, t)
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return typeMayNest(t.Elem(), onPath)
	case reflect.Map:
		return typeMayNest(t.Key(), onPath) || typeMayNest(t.Elem(), onPath)
	case reflect.Struct:
		for _, i := range encodedFields(t) {
			if typeMayNest(t.Field(i).Type, onPath) {
				return true
			}
		}
	}
	return false
}

var fieldCache sync.Map // reflect.Type → []int

// encodedFields lists the fields of struct type t that msgpack encodes:
// exported ones not tagged "-", and embedded ones (which it may inline).
// A cycle through a field the encoder skips is harmless and must not fail
// the write.
func encodedFields(t reflect.Type) []int {
	if v, ok := fieldCache.Load(t); ok {
		return v.([]int)
	}
	var idx []int
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if (!f.IsExported() && !f.Anonymous) || f.Tag.Get("msgpack") == "-" {
			continue
		}
		idx = append(idx, i)
	}
	fieldCache.Store(t, idx)
	return idx
}
