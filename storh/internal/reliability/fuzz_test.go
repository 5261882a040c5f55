package reliability

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/; the f.Add seeds below
// cover the shapes worth starting from. CI runs every target listed in
// .ci/fuzz-targets.txt for a few seconds.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fuzzKey is the id FuzzStoredValue's values are stored under: the checksum
// covers the key as well as the payload.
var fuzzKey = uuidv7.MustParse("018bcfe5-6800-7000-8000-00000000f022")

// FuzzStoredValue feeds arbitrary bytes to the read path of a stored value:
// engine.Payload (header and checksum), then engine.DecodeMapIn. Neither may
// panic; their errors must wrap ErrCorrupt; DecodeMap must accept exactly
// what mpack.ValidateRecord (used by Verify and by reads) accepts; and a map
// it returns must store again and decode to the same value, with stable
// bytes. With fix set the fuzzer's bytes get a valid header and checksum, so
// the decoder sees arbitrary payloads instead of checksum failures.
func FuzzStoredValue(f *testing.F) {
	for _, m := range []map[string]any{
		{},
		{"a": int64(1)},
		{"t": "tag", "n": int64(-5), "f": 1.5, "b": []byte{1, 2}, "l": []any{int64(1), "x", nil}, "m": map[string]any{"ok": true}},
		{"ts": time.Unix(1_700_000_000, 123).UTC(), "u": uint64(math.MaxUint64), "z": time.Time{}.UTC()},
		{"nan": math.NaN(), "inf": math.Inf(-1), "f32": float32(0.1)},
	} {
		v, err := engine.AppendValue(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		seal(v, fuzzKey)
		f.Add(v, false)
		f.Add(v[engine.HeaderSize:], true)
	}
	f.Add([]byte{}, false)
	f.Add([]byte{1, 0, 0, 0, 0}, false)
	f.Add([]byte{2, 0, 0, 0, 0, 0x80}, true)
	f.Add([]byte{0, 0, 0, 0, 0, 0x81, 0xa1, 'a', 0xc1}, true)
	f.Fuzz(func(t *testing.T, value []byte, fix bool) {
		if fix {
			// The payload is value itself: prepend a valid header.
			hdr := make([]byte, engine.HeaderSize, engine.HeaderSize+len(value))
			hdr[0] = 1
			sum := crc32.Update(crc32.Checksum(value, castagnoli), castagnoli, fuzzKey[:])
			binary.BigEndian.PutUint32(hdr[1:], sum)
			value = append(hdr, value...)
		}
		payload, err := engine.Payload(fuzzKey[:], value)
		if err != nil {
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("Payload error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		m, err := engine.DecodeMapIn(payload, nil)
		verr := mpack.ValidateRecord(payload)
		if (err == nil) != (verr == nil) {
			t.Fatalf("DecodeMap says %v but ValidateRecord says %v for %x", err, verr, payload)
		}
		if err != nil {
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("DecodeMap error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if m == nil {
			t.Fatalf("DecodeMap accepted %x but returned a nil map", payload)
		}
		again, err := engine.AppendValue(nil, m)
		if err != nil {
			if len(payload) > api.MaxRecordSize/2 {
				return // re-encoding may widen float32s past the limit
			}
			t.Fatalf("a decoded record cannot be stored again: %v\nrecord %#v", err, m)
		}
		seal(again, fuzzKey)
		p2, err := engine.Payload(fuzzKey[:], again)
		if err != nil {
			t.Fatalf("re-encoded value fails its own checksum: %v", err)
		}
		m2, err := engine.DecodeMapIn(p2, nil)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !mpack.Equal(m, m2) && !order.HasNaN(m) {
			t.Fatalf("round trip changed the record:\nfirst  %#v\nsecond %#v", m, m2)
		}
		third, err := engine.AppendValue(nil, m2)
		if err == nil {
			seal(third, fuzzKey)
		}
		if err != nil || !bytes.Equal(third, again) {
			t.Fatalf("encoding is not stable: %x then %x (%v)", again, third, err)
		}
	})
}

// FuzzWhereEqualProbe checks the raw-bytes probe behind WhereEqual against
// the slow path. A record is built from the fuzzer's bytes and stored with
// engine.AppendValue (so it has exactly the bytes a real record has); a
// field and a value are chosen, often a field of the record and its value
// in another Go type (uint8 for int64, float32 for float64, a typed slice
// for []any, []byte for a string...). query.All().WhereEqual(f,
// v)'s filter, run on the payload, must agree with decoding the whole record with
// engine.DecodeMapIn and comparing with mpack.Equal against the normalised v,
// on every input.
func FuzzWhereEqualProbe(f *testing.F) {
	f.Add([]byte{2, 0, 14, 1, 9, 3, 'a', 'b', 'c'}, "a", uint8(5))
	f.Add([]byte{3, 1, 5, 0, 0, 0, 0, 0, 0, 0, 7, 2, 15, 3}, "b", uint8(1))
	f.Add([]byte{4, 3, 8, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0, 7, 0x3f, 0x80, 0, 0}, "x", uint8(0x25))
	f.Add([]byte{2, 2, 12, 3, 14, 2, 9, 1, 'z', 16, 1}, "c", uint8(0x45))
	f.Add([]byte{1, 4, 13, 2, 0, 1, 1, 0, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "t", uint8(0x07))
	f.Add([]byte{2, 0, 11, 0, 0, 0x65, 0x53, 0xf1, 0, 0, 0, 5, 10, 2, 'h', 'i'}, "", uint8(0x0d))
	f.Add([]byte{1, 1, 7, 0x7f, 0xc0, 0, 0}, "b", uint8(0x05))
	f.Fuzz(func(t *testing.T, data []byte, field string, pick uint8) { probeAgrees(t, data, field, pick) })
}

// probeAgrees is the property of FuzzWhereEqualProbe. It reports whether the
// probe ran on a valid query and what it answered.
func probeAgrees(t testing.TB, data []byte, field string, pick uint8) (ran, matched bool) {
	g := &fuzzGen{b: data}
	rec := g.record()
	value, err := engine.AppendValue(nil, rec)
	if err != nil {
		return false, false // not storable (too deep): not a record
	}
	payload := value[engine.HeaderSize:]

	keys := make([]string, 0, len(rec))
	for k := range rec {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if pick&1 == 1 && len(keys) > 0 {
		field = keys[int(pick>>4)%len(keys)]
	}
	var want any
	if v, ok := rec[field]; ok && pick&2 == 2 {
		want = retype(v, pick>>2)
	} else {
		want = g.value(1)
	}

	q := query.All().WhereEqual(field, want)
	norm, nerr := mpack.Normalize(want)
	if err := q.Validate(); err != nil {
		if !errors.Is(err, query.ErrInvalidQuery) {
			t.Fatalf("Validate: %v does not wrap ErrInvalidQuery", err)
		}
		if field != "" && len(field) <= query.MaxFieldLength && nerr == nil {
			t.Fatalf("WhereEqual(%q, %#v) rejected though the value normalises: %v", field, want, err)
		}
		return false, false
	}
	if nerr != nil {
		t.Fatalf("WhereEqual(%q, %#v) accepted a value Normalize rejects: %v", field, want, nerr)
	}
	p, err := plan.Compile(q)
	if err != nil {
		t.Fatalf("compile a valid query: %v", err)
	}
	got, err := plan.NewMatcher(p.Cond).Match(payload)
	if err != nil {
		t.Fatalf("Match on a valid record: %v\nrecord %#v", err, rec)
	}
	decoded, err := engine.DecodeMapIn(payload, nil)
	if err != nil {
		t.Fatalf("DecodeMap of a stored record: %v", err)
	}
	fv, present := decoded[field]
	if model := present && mpack.Equal(fv, norm); got != model {
		t.Fatalf("WhereEqual(%q, %#v).Match = %v, decoding says %v\nfield value %#v (present %v)\nrecord %#v",
			field, want, got, model, fv, present, rec)
	}
	return true, got
}

// TestWhereEqualProbeReach runs the probe property over pseudo-random
// inputs and checks the generator reaches both answers often: a fuzz target
// whose probe always says "no" would prove nothing.
func TestWhereEqualProbeReach(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ran, matched := 0, 0
	for range 20000 {
		data := make([]byte, r.IntN(64))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		ok, m := probeAgrees(t, data, []string{"a", "b", "zz", ""}[r.IntN(4)], uint8(r.Uint32()))
		if ok {
			ran++
		}
		if m {
			matched++
		}
	}
	t.Logf("%d valid probes, %d matched", ran, matched)
	if ran < 10000 || matched < ran/20 || matched > ran*9/10 {
		t.Errorf("%d valid probes of 20000, %d matched: the generator no longer exercises both answers", ran, matched)
	}
}

// fuzzGen turns fuzzer bytes into records and values. It reads past the end
// as zeros, so every input gives something.
type fuzzGen struct{ b []byte }

func (g *fuzzGen) u8() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *fuzzGen) uint(n int) uint64 {
	var v uint64
	for range n {
		v = v<<8 | uint64(g.u8())
	}
	return v
}

func (g *fuzzGen) str() string {
	b := make([]byte, g.u8()%12)
	for i := range b {
		b[i] = g.u8()
	}
	return string(b)
}

// key picks mostly from a few names, so fields collide with the queries.
func (g *fuzzGen) key() string {
	c := g.u8()
	if names := []string{"a", "b", "c", "t", "x", ""}; int(c%8) < len(names) {
		return names[c%8]
	}
	return g.str()
}

func (g *fuzzGen) record() map[string]any {
	m := map[string]any{}
	for range g.u8() % 8 {
		m[g.key()] = g.value(2)
	}
	return m
}

var fuzzZone = time.FixedZone("fuzz", 5*3600+30*60)

func (g *fuzzGen) value(depth int) any {
	switch g.u8() % 20 {
	case 0:
		return nil
	case 1:
		return g.u8()&1 == 1
	case 2:
		return int64(int8(g.u8()))
	case 3:
		return int64(int16(g.uint(2)))
	case 4:
		return int64(int32(g.uint(4)))
	case 5:
		return int64(g.uint(8))
	case 6:
		return g.uint(8) // above MaxInt64 half the time
	case 7:
		return math.Float32frombits(uint32(g.uint(4))) // stored as float32
	case 8:
		return math.Float64frombits(g.uint(8))
	case 9:
		return g.str()
	case 10:
		return []byte(g.str())
	case 11:
		sec := int64(g.uint(5)) - 1<<39
		return time.Unix(sec, int64(g.uint(4)%1e9)).In(fuzzZone)
	case 12:
		if depth >= 6 {
			return nil
		}
		l := make([]any, g.u8()%4)
		for i := range l {
			l[i] = g.value(depth + 1)
		}
		return l
	case 13:
		if depth >= 6 {
			return nil
		}
		m := map[string]any{}
		for range g.u8() % 4 {
			m[g.key()] = g.value(depth + 1)
		}
		return m
	case 14, 15:
		return int64(g.u8() % 3) // small numbers that collide...
	case 16:
		return float64(g.u8() % 3) // ...with the same numbers as floats...
	case 17:
		return string(rune('0' + g.u8()%3)) // ...and as strings
	case 18:
		return uint8(g.u8() % 3) // non-normalised Go types
	default:
		return []int64{int64(g.u8() % 3)}
	}
}

// retype returns v in another Go type, equal or not under the typed rules,
// to test that the probe normalises exactly like the decoder.
func retype(v any, sel byte) any {
	switch x := v.(type) {
	case int64:
		switch sel % 6 {
		case 0:
			if x >= 0 && x <= math.MaxUint8 {
				return uint8(x)
			}
		case 1:
			if x >= math.MinInt32 && x <= math.MaxInt32 {
				return int32(x)
			}
		case 2:
			if x >= 0 {
				return uint64(x)
			}
		case 3:
			return float64(x) // an int never equals a float
		case 4:
			return int(x)
		}
	case uint64:
		if sel%2 == 0 {
			return uint(x)
		}
		return float64(x)
	case float64:
		switch sel % 3 {
		case 0:
			if float64(float32(x)) == x {
				return float32(x)
			}
		case 1:
			if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
				return int64(x) // a float never equals an int
			}
		}
	case string:
		if sel%2 == 0 {
			return []byte(x) // str never equals bin
		}
	case []byte:
		if sel%2 == 0 {
			return string(x)
		}
		if len(x) == 2 {
			return [2]byte{x[0], x[1]} // byte arrays are bin
		}
	case time.Time:
		return x.In(time.UTC) // same instant
	case []any:
		if sel%2 == 0 {
			out := make([]int64, 0, len(x))
			for _, e := range x {
				n, ok := e.(int64)
				if !ok {
					return v
				}
				out = append(out, n)
			}
			return out
		}
	case map[string]any:
		if sel%2 == 0 {
			out := map[string]string{}
			for k, e := range x {
				s, ok := e.(string)
				if !ok {
					return v
				}
				out[k] = s
			}
			return out
		}
	}
	return v
}
