package mpack_test

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// encodeUnsorted writes v with map keys in Go's random order, as the
// library does without SetSortMapKeys (and, with it, for typed maps).
func encodeUnsorted(t *rapid.T, v any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encode: %v", err)
	}
	return buf.Bytes()
}

// TestAppendSortedIsTheSortedEncoding: whatever order a record's maps were
// written in, AppendSorted gives exactly the bytes the library writes with
// sorted keys, of the same length; its output is reported sorted, and
// sorting it again changes nothing.
func TestAppendSortedIsTheSortedEncoding(t *testing.T) {
	var s mpack.Sorter
	rapid.Check(t, func(t *rapid.T) {
		rec := testkit.GoMap(t, 1)
		want := encode(t, rec, true)
		in := encodeUnsorted(t, rec)
		sorted, err := mpack.ValidateRecordSorted(in)
		if err != nil {
			t.Fatalf("ValidateRecordSorted: %v", err)
		}
		got := s.AppendSorted(nil, in)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendSorted(%x)\n= %x\nwant %x", in, got, want)
		}
		if sorted != bytes.Equal(in, want) {
			t.Fatalf("ValidateRecordSorted said sorted=%v for %x (sorted form %x)", sorted, in, want)
		}
		if again, err := mpack.ValidateRecordSorted(got); err != nil || !again {
			t.Fatalf("the sorted form is not reported sorted: %v, %v", again, err)
		}
		prefix := []byte{1, 2, 3}
		if twice := s.AppendSorted(prefix, got); !bytes.Equal(twice[3:], got) || !bytes.Equal(twice[:3], prefix) {
			t.Fatalf("sorting the sorted form changed it, or lost dst")
		}
	})
}

func TestAppendSortedNested(t *testing.T) {
	// {"b": [{"z":1,"a":2}], "a": {"y": {"q":1,"p":2}, "x": 0}} written in
	// exactly this order, a map inside a list inside a map.
	in := []byte{0x82,
		0xa1, 'b', 0x91, 0x82, 0xa1, 'z', 0x01, 0xa1, 'a', 0x02,
		0xa1, 'a', 0x82, 0xa1, 'y', 0x82, 0xa1, 'q', 0x01, 0xa1, 'p', 0x02, 0xa1, 'x', 0x00,
	}
	want := []byte{0x82,
		0xa1, 'a', 0x82, 0xa1, 'x', 0x00, 0xa1, 'y', 0x82, 0xa1, 'p', 0x02, 0xa1, 'q', 0x01,
		0xa1, 'b', 0x91, 0x82, 0xa1, 'a', 0x02, 0xa1, 'z', 0x01,
	}
	if sorted, err := mpack.ValidateRecordSorted(in); err != nil || sorted {
		t.Fatalf("ValidateRecordSorted = %v, %v; want unsorted", sorted, err)
	}
	var s mpack.Sorter
	if got := s.AppendSorted(nil, in); !bytes.Equal(got, want) {
		t.Errorf("AppendSorted = % x\nwant          % x", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { s.AppendSorted(make([]byte, 0, 64)[:0], in) }); n > 1 {
		t.Errorf("AppendSorted allocates %v times with a warm Sorter; want at most the dst", n)
	}
}

func BenchmarkAppendSorted(b *testing.B) {
	rec := map[string]any{"user": "u-12345", "status": "paid", "amount": int64(12999), "tags": []any{"alpha", "beta", "gamma"},
		"note": "a note long enough to make the record about two hundred bytes in all, like most records here"}
	var in []byte
	for {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		if err := enc.Encode(rec); err != nil {
			b.Fatal(err)
		}
		if sorted, _ := mpack.ValidateRecordSorted(buf.Bytes()); !sorted {
			in = buf.Bytes()
			break
		}
	}
	b.Run("validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := mpack.ValidateRecordSorted(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sort", func(b *testing.B) {
		b.ReportAllocs()
		var s mpack.Sorter
		out := make([]byte, 0, len(in))
		for b.Loop() {
			out = s.AppendSorted(out[:0], in)
		}
	})
}

// FuzzCanonicalRecord: CanonicalRecord accepts exactly what ValidateRecord
// accepts, and what it returns is the same record (equal decoded data) of
// the same length with every map in order; sorting that again changes
// nothing.
func FuzzCanonicalRecord(f *testing.F) {
	f.Add([]byte{0x82, 0xa1, 'b', 0x01, 0xa1, 'a', 0x02})
	f.Add([]byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02})
	f.Add([]byte{0x81, 0xa1, 'm', 0x82, 0xa1, 'z', 0x90, 0xa1, 'y', 0x91, 0x80})
	f.Add(sampleRecord(f))
	var s mpack.Sorter
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := s.CanonicalRecord(nil, data)
		if verr := mpack.ValidateRecord(data); (err == nil) != (verr == nil) {
			t.Fatalf("CanonicalRecord error %v, ValidateRecord error %v", err, verr)
		}
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("error %v is not a sentinel", err)
			}
			return
		}
		if len(out) != len(data) {
			t.Fatalf("length %d became %d", len(data), len(out))
		}
		if sorted, err := mpack.ValidateRecordSorted(out); err != nil || !sorted {
			t.Fatalf("output %x: sorted=%v, %v", out, sorted, err)
		}
		before, _ := mpack.DecodeMap(data)
		after, err := mpack.DecodeMap(out)
		if err != nil || !same(before, after) {
			t.Fatalf("the data changed: %#v became %#v (%v)", before, after, err)
		}
		if again := s.AppendSorted(nil, out); !bytes.Equal(again, out) {
			t.Fatalf("sorting the canonical form changed it")
		}
	})
}
