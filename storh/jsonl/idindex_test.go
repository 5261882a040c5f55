package jsonl

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestIDIndex checks the index against a map, with ids in order, out of
// order and removed, across chunk boundaries.
func TestIDIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ids := make([]uuidv7.UUID, 3*idChunk)
	uuidv7.NewBatch(ids)
	var x idIndex
	want := map[uuidv7.UUID]int64{}
	line := int64(0)
	for i, id := range ids {
		if r.IntN(10) == 0 && i > 0 {
			id = ids[r.IntN(i)] // a repeat of an earlier id
		}
		if i%7 == 3 && i+5 < len(ids) {
			id = ids[i+5] // out of order: ahead of ids still to come
		}
		line++
		got, ok := x.get(id)
		w, wok := want[id]
		if ok != wok || got != w {
			t.Fatalf("line %d: get = %d, %v; want %d, %v", line, got, ok, w, wok)
		}
		if !ok {
			x.add(id, line)
			want[id] = line
		}
		if r.IntN(50) == 0 {
			x.remove(id, want[id])
			delete(want, id)
		}
	}
	for id, w := range want {
		if got, ok := x.get(id); !ok || got != w {
			t.Fatalf("get(%s) = %d, %v; want %d", id, got, ok, w)
		}
	}
}

// TestIDIndexMemory checks the cost of ids in ascending order, the order of
// an export: about 20 bytes each.
func TestIDIndexMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a million ids")
	}
	ids := make([]uuidv7.UUID, 1_000_000)
	uuidv7.NewBatch(ids)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	var x idIndex
	for i, id := range ids {
		x.add(id, int64(i+1))
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	per := float64(m1.HeapAlloc-m0.HeapAlloc) / float64(len(ids))
	if per > 24 {
		t.Errorf("%.1f bytes per id", per)
	}
	runtime.KeepAlive(x)
}
