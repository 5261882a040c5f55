package engine

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

type shapeNode struct {
	Name string
	Next *shapeNode
}

type shapeWide struct{ A, B *shapeWide }

// shapeTree's Parent is skipped by the encoder, so its cycle is harmless.
type shapeTree struct {
	Name     string
	Children []*shapeTree
	Parent   *shapeTree `msgpack:"-"`
	up       *shapeTree
}

type shapeFlat struct {
	A string
	T time.Time
	N int
}

// A cyclic value must fail its own write: the encoder would otherwise
// recurse until Go's fatal (unrecoverable) stack overflow.
func TestCheckShapeStopsCycles(t *testing.T) {
	self := &shapeNode{Name: "a"}
	self.Next = self
	wide := &shapeWide{}
	wide.A, wide.B = wide, wide
	m := map[string]any{}
	m["a"], m["b"] = m, m
	inMap := &shapeNode{Name: "q"}
	inMap.Next = inMap
	deep := map[string]any{}
	cur := deep
	for i := 0; i < MaxDepth+1; i++ {
		next := map[string]any{}
		cur["n"] = next
		cur = next
	}
	for name, data := range map[string]any{
		"self pointer struct":  self,
		"two self references":  wide,
		"map holding itself":   m,
		"cyclic struct in map": map[string]any{"x": inMap},
		"too deep":             deep,
	} {
		if _, err := AppendValue(nil, data); !errors.Is(err, ErrInvalidData) {
			t.Errorf("%s: got %v, want ErrInvalidData", name, err)
		}
	}
}

func TestMayNest(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want bool
	}{
		{shapeFlat{}, false},
		{map[string]string{}, false},
		{shapeNode{}, true},
		{map[string]any{}, true},
		{struct{ X []any }{}, true},
	} {
		if got := mayNest(reflect.TypeOf(tc.v)); got != tc.want {
			t.Errorf("mayNest(%T) = %v, want %v", tc.v, got, tc.want)
		}
	}
	if _, err := AppendValue(nil, shapeFlat{A: "x", T: time.Unix(1, 0), N: 3}); err != nil {
		t.Fatal(err)
	}
}

func TestCheckShapeIgnoresFieldsTheEncoderSkips(t *testing.T) {
	root := &shapeTree{Name: "root"}
	child := &shapeTree{Name: "child", Parent: root}
	child.up = root
	root.Children = []*shapeTree{child}
	root.Parent, root.up = child, child // cycles only through skipped fields
	if _, err := AppendValue(nil, root); err != nil {
		t.Fatalf("a cycle through skipped fields was refused: %v", err)
	}
	if got := len(encodedFields(reflect.TypeOf(shapeTree{}))); got != 2 {
		t.Errorf("encodedFields(shapeTree) has %d fields; want Name and Children", got)
	}
}
