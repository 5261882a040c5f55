package plan_test

import (
	"testing"

	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

func TestNextPrev(t *testing.T) {
	x := uuidv7.MustParse("018bcfe5-6800-7abc-8def-0123456789ff")
	next := uuidv7.MustParse("018bcfe5-6800-7abc-8def-012345678a00")
	zero := uuidv7.UUID{}
	max := uuidv7.UUID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if n, ok := plan.Next(x); !ok || n != next {
		t.Errorf("Next = %v, %v; want %v (a carry)", n, ok, next)
	}
	if _, ok := plan.Next(max); ok {
		t.Error("Next(max) ok")
	}
	if p, ok := plan.Prev(next); !ok || p != x {
		t.Errorf("Prev = %v, %v; want %v (a borrow)", p, ok, x)
	}
	if _, ok := plan.Prev(zero); ok {
		t.Error("Prev(zero) ok")
	}
}
