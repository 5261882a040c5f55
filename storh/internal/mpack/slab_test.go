package mpack

import (
	"math"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// slabRecords are records whose values box in every way a slab boxes:
// small and large, negative and unsigned integers, floats, strings, lists
// (short and long), nested maps.
func slabRecords(t testing.TB, n int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		long := make([]any, 100)
		for j := range long {
			long[j] = int64(j * i)
		}
		rec := map[string]any{
			"small": int64(i % 200),
			"big":   int64(1000 + i),
			"neg":   int64(-i - 1),
			"huge":  uint64(math.MaxUint64 - uint64(i)),
			"f":     float64(i) / 3,
			"s":     "string number " + string(rune('a'+i%26)),
			"list":  []any{"x", int64(300 + i), 2.5},
			"long":  long,
			"m":     map[string]any{"inner": int64(-7000 - i), "t": "y"},
		}
		b, err := msgpack.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// TestSlabDecodesAlike: decoding through a shared slab, a record's own
// slab or none gives equal values of the same types, and they stay intact
// through garbage collections and further decoding into the same slab.
func TestSlabDecodesAlike(t *testing.T) {
	recs := slabRecords(t, 600) // several blocks of every kind
	var slab Slab
	shared := make([]map[string]any, len(recs))
	for i, b := range recs {
		m, err := DecodeMapIn(b, &slab)
		if err != nil {
			t.Fatal(err)
		}
		shared[i] = m
	}
	runtime.GC()
	runtime.GC()
	for i, b := range recs {
		own, err := DecodeMap(b)
		if err != nil {
			t.Fatal(err)
		}
		var plain map[string]any
		if err := msgpack.Unmarshal(b, &plain); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(shared[i], own) {
			t.Fatalf("record %d: shared slab %v, own slab %v", i, shared[i], own)
		}
		if got, want := shared[i]["big"], int64(1000+i); got != want {
			t.Fatalf("record %d: big = %#v; want %#v", i, got, want)
		}
		if got, want := shared[i]["huge"], uint64(math.MaxUint64-uint64(i)); got != want {
			t.Fatalf("record %d: huge = %#v; want %#v", i, got, want)
		}
		if got, want := shared[i]["f"], float64(i)/3; got != want {
			t.Fatalf("record %d: f = %#v; want %#v", i, got, want)
		}
		if got := shared[i]["m"].(map[string]any)["inner"]; got != int64(-7000-i) {
			t.Fatalf("record %d: m.inner = %#v", i, got)
		}
	}
	// A list handed out by the slab has no room to grow into its
	// neighbour's elements.
	l := shared[0]["list"].([]any)
	grown := append(l, "more")
	if shared[1]["list"].([]any)[0] != "x" || len(grown) != 4 {
		t.Fatal("appending to a decoded list wrote into another record's list")
	}
}

// TestSlabConcurrent: records of one page decoded by many goroutines at
// once (run with -race) agree with decoding them alone.
func TestSlabConcurrent(t *testing.T) {
	recs := slabRecords(t, 64)
	var slab Slab
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < len(recs); i += 8 {
				got, err := DecodeMapIn(recs[i], &slab)
				if err != nil {
					t.Error(err)
					return
				}
				want, _ := DecodeMap(recs[i])
				if !reflect.DeepEqual(got, want) {
					t.Errorf("record %d decoded concurrently differs", i)
				}
			}
		})
	}
	wg.Wait()
}

// TestSlabAllocations: a page of records decoded through one slab
// allocates the maps, each record's string copy and a few blocks: far
// fewer than one box per value.
func TestSlabAllocations(t *testing.T) {
	recs := slabRecords(t, 100)
	own := testing.AllocsPerRun(5, func() {
		for _, b := range recs {
			if _, err := DecodeMap(b); err != nil {
				t.Fatal(err)
			}
		}
	})
	shared := testing.AllocsPerRun(5, func() {
		var slab Slab
		for _, b := range recs {
			if _, err := DecodeMapIn(b, &slab); err != nil {
				t.Fatal(err)
			}
		}
	})
	// A record's own slab makes its blocks for that record alone (a box
	// per 16 bytes of it, so these records with a hundred numbers need
	// several, plus the slab itself); a shared slab hands out page-sized
	// blocks. The maps, the string copy and the long list cost the same
	// either way.
	perOwn, perShared := own/float64(len(recs)), shared/float64(len(recs))
	if perShared > perOwn-4 {
		t.Errorf("decoding through a shared slab: %.1f allocations per record, through its own %.1f; want at least 4 fewer", perShared, perOwn)
	}
}

// TestDecodeMakesNoSlabItDoesNotNeed: a value that needs no box (a small
// integer, a bool) or boxes itself (a timestamp) costs no slab.
func TestDecodeMakesNoSlabItDoesNotNeed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v      any
		allocs float64
	}{
		{"small int", int64(200), 0},
		{"bool", true, 0},
		{"timestamp", time.Unix(1700000000, 5).UTC(), 1},
	} {
		b, err := msgpack.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		got := testing.AllocsPerRun(100, func() {
			if _, _, err := Decode(b); err != nil {
				t.Fatal(err)
			}
		})
		if got > tc.allocs {
			t.Errorf("Decode(%s) allocates %.0f times; want %.0f", tc.name, got, tc.allocs)
		}
	}
}
