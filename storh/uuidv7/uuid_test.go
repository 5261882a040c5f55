package uuidv7

import (
	"bytes"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// rfcVector is the UUIDv7 example of RFC 9562 appendix A.6.
const rfcVector = "017f22e2-79b0-7cc3-98c4-dc0c0c07398f"

func TestRFC9562Vector(t *testing.T) {
	u, err := Parse(rfcVector)
	if err != nil {
		t.Fatal(err)
	}
	want := UUID{0x01, 0x7f, 0x22, 0xe2, 0x79, 0xb0, 0x7c, 0xc3, 0x98, 0xc4, 0xdc, 0x0c, 0x0c, 0x07, 0x39, 0x8f}
	if u != want {
		t.Fatalf("bytes %x, want %x", u[:], want[:])
	}
	if got := u.TimestampMs(); got != 1645557742000 {
		t.Errorf("TimestampMs = %d, want 1645557742000", got)
	}
	if ms, err := TimestampMs(rfcVector); err != nil || ms != 1645557742000 {
		t.Errorf("TimestampMs(string) = %d, %v", ms, err)
	}
	if got, want := u.Time(), time.Date(2022, 2, 22, 19, 22, 22, 0, time.UTC); !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("Time = %v, want %v", got, want)
	}
	if u.Version() != 7 || !u.IsV7() || u.IsZero() {
		t.Errorf("Version %d, IsV7 %v, IsZero %v", u.Version(), u.IsV7(), u.IsZero())
	}
	if u.String() != rfcVector {
		t.Errorf("String = %s", u)
	}
}

func TestMinMaxForTimestampMs(t *testing.T) {
	if got, want := MinForTimestampMs(t0).String(), "018bcfe5-6800-7000-8000-000000000000"; got != want {
		t.Errorf("Min = %s, want %s", got, want)
	}
	if got, want := MaxForTimestampMs(t0).String(), "018bcfe5-6800-7fff-bfff-ffffffffffff"; got != want {
		t.Errorf("Max = %s, want %s", got, want)
	}
	for _, tc := range []struct{ in, clamped int64 }{
		{-1, 0}, {math.MinInt64, 0}, {MaxTimestampMs + 1, MaxTimestampMs}, {math.MaxInt64, MaxTimestampMs},
	} {
		if MinForTimestampMs(tc.in) != MinForTimestampMs(tc.clamped) || MaxForTimestampMs(tc.in) != MaxForTimestampMs(tc.clamped) {
			t.Errorf("ms %d not clamped to %d", tc.in, tc.clamped)
		}
	}
	for _, ms := range []int64{0, 1, t0, MaxTimestampMs} {
		lo, hi := MinForTimestampMs(ms), MaxForTimestampMs(ms)
		if !lo.IsV7() || !hi.IsV7() || lo.TimestampMs() != ms || hi.TimestampMs() != ms {
			t.Errorf("ms %d: bounds %s %s", ms, lo, hi)
		}
		if ms > 0 && MaxForTimestampMs(ms-1).Compare(lo) >= 0 {
			t.Errorf("ms %d: windows of adjacent ms overlap", ms)
		}
	}
}

func TestEveryIDLiesBetweenMinAndMax(t *testing.T) {
	// Extremes of the random bits first: all zeros gives the minimum
	// itself; all ones plus counting to the top gives the maximum.
	for _, fill := range []byte{0x00, 0xff, 0x5a} {
		for _, ms := range []int64{0, 1, t0, MaxTimestampMs - 1} {
			c := &fakeClock{ms: ms}
			g := NewGenerator(WithClock(c.now), WithRandom(fillReader(fill)))
			check := func(u UUID) {
				t.Helper()
				lo, hi := MinForTimestampMs(u.TimestampMs()), MaxForTimestampMs(u.TimestampMs())
				if lo.Compare(u) > 0 || u.Compare(hi) > 0 {
					t.Fatalf("%s outside [%s, %s]", u, lo, hi)
				}
			}
			for range 3 {
				check(g.New())
				u, err := g.NewAt(ms)
				if err != nil {
					t.Fatal(err)
				}
				check(u)
			}
			g.seq = counter{a: randAMask, b: randBMask - 1}
			check(g.New())
			check(g.New()) // overflowed into ms+1
		}
	}
	// Random ones.
	for range 10000 {
		u := New()
		ms := u.TimestampMs()
		if MinForTimestampMs(ms).Compare(u) > 0 || u.Compare(MaxForTimestampMs(ms)) > 0 {
			t.Fatalf("%s outside its millisecond's bounds", u)
		}
	}
}

func TestCompare(t *testing.T) {
	a := MustParse("017f22e2-79b0-7cc3-98c4-dc0c0c07398f")
	b := MustParse("017f22e2-79b0-7cc3-98c4-dc0c0c073990") // last byte +1
	c := MustParse("017f22e2-79b1-7000-8000-000000000000") // next ms
	for _, tc := range []struct {
		x, y UUID
		want int
	}{{a, a, 0}, {a, b, -1}, {b, a, 1}, {b, c, -1}, {c, a, 1}, {Nil, a, -1}} {
		if got := tc.x.Compare(tc.y); got != tc.want {
			t.Errorf("%s.Compare(%s) = %d, want %d", tc.x, tc.y, got, tc.want)
		}
		if got := bytes.Compare(tc.x[:], tc.y[:]); got != tc.want {
			t.Errorf("bytes.Compare disagrees for %s, %s", tc.x, tc.y)
		}
	}
}

func TestNil(t *testing.T) {
	if !Nil.IsZero() || Nil.IsV7() || Nil.Version() != 0 {
		t.Fatal("Nil")
	}
	if Nil.String() != "00000000-0000-0000-0000-000000000000" {
		t.Fatal(Nil.String())
	}
	if _, err := Parse(Nil.String()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Parse(Nil): %v", err)
	}
	if _, err := FromBytes(Nil[:]); !errors.Is(err, ErrInvalid) {
		t.Fatalf("FromBytes(Nil): %v", err)
	}
}

func TestFromBytes(t *testing.T) {
	v7 := MustParse(rfcVector)
	v4 := v7
	v4[6] = 0x4c
	ncs := v7
	ncs[8] = 0x18 // variant 0xx
	ms := v7
	ms[8] = 0xd8 // variant 110 (Microsoft)
	for _, tc := range []struct {
		name string
		in   []byte
		msg  string
	}{
		{"short", v7[:15], "15 bytes, want 16"},
		{"long", append(v7[:], 0), "17 bytes, want 16"},
		{"empty", nil, "0 bytes, want 16"},
		{"version 4", v4[:], "version 4, want 7"},
		{"variant 0", ncs[:], "variant bits 00"},
		{"variant 110", ms[:], "variant bits 11"},
	} {
		_, err := FromBytes(tc.in)
		if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "uuidv7: invalid UUIDv7: ") || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %v, want ErrInvalid mentioning %q", tc.name, err, tc.msg)
		}
		var u UUID
		if err := u.UnmarshalBinary(tc.in); !errors.Is(err, ErrInvalid) || u != Nil {
			t.Errorf("%s: UnmarshalBinary = %v, %s", tc.name, err, u)
		}
	}
	u, err := FromBytes(v7[:])
	if err != nil || u != v7 {
		t.Fatalf("FromBytes(valid) = %s, %v", u, err)
	}
}

func TestTextRoundTrip(t *testing.T) {
	for range 100 {
		u := New()
		text, err := u.MarshalText()
		if err != nil || string(text) != u.String() {
			t.Fatalf("MarshalText = %q, %v", text, err)
		}
		var back UUID
		if err := back.UnmarshalText(text); err != nil || back != u {
			t.Fatalf("UnmarshalText = %s, %v", back, err)
		}
		if err := back.UnmarshalText(bytes.ToUpper(text)); err != nil || back != u {
			t.Fatalf("UnmarshalText(upper) = %s, %v", back, err)
		}
		app, err := u.AppendText([]byte("id="))
		if err != nil || string(app) != "id="+u.String() {
			t.Fatalf("AppendText = %q, %v", app, err)
		}
	}
	var u UUID
	prev := MustParse(rfcVector)
	u = prev
	if err := u.UnmarshalText([]byte("nope")); !errors.Is(err, ErrInvalid) || u != prev {
		t.Fatalf("bad UnmarshalText: %v, left %s", err, u)
	}
}

func TestBinaryRoundTrip(t *testing.T) {
	u := New()
	b, err := u.MarshalBinary()
	if err != nil || !bytes.Equal(b, u[:]) {
		t.Fatalf("MarshalBinary = %x, %v", b, err)
	}
	var back UUID
	if err := back.UnmarshalBinary(b); err != nil || back != u {
		t.Fatalf("UnmarshalBinary = %s, %v", back, err)
	}
	if b, _ := u.AppendBinary([]byte{0xee}); !bytes.Equal(b, append([]byte{0xee}, u[:]...)) {
		t.Fatalf("AppendBinary = %x", b)
	}
}

func TestJSON(t *testing.T) {
	type rec struct {
		ID     UUID `json:"id"`
		Parent UUID `json:"parent,omitzero"`
	}
	in := rec{ID: MustParse(rfcVector)}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"` + rfcVector + `"}`; string(b) != want {
		t.Fatalf("json = %s, want %s", b, want)
	}
	var out rec
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	err = json.Unmarshal([]byte(`{"id":"017f22e2-79b0-4cc3-98c4-dc0c0c07398f"}`), &out)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("version 4 in JSON: %v", err)
	}

	// Map keys use the text form too.
	m := map[UUID]int{in.ID: 1}
	b, err = json.Marshal(m)
	if err != nil || string(b) != `{"`+rfcVector+`":1}` {
		t.Fatalf("map key: %s, %v", b, err)
	}
	var mback map[UUID]int
	if err := json.Unmarshal(b, &mback); err != nil || mback[in.ID] != 1 {
		t.Fatalf("map key back: %v, %v", mback, err)
	}
}

func TestSQL(t *testing.T) {
	u := MustParse(rfcVector)
	var _ driver.Valuer = u
	var _ sql.Scanner = &u
	v, err := u.Value()
	if err != nil || v != rfcVector {
		t.Fatalf("Value = %v, %v", v, err)
	}
	for _, src := range []any{rfcVector, strings.ToUpper(rfcVector), []byte(rfcVector), u[:]} {
		var got UUID
		if err := got.Scan(src); err != nil || got != u {
			t.Errorf("Scan(%T %v) = %s, %v", src, src, got, err)
		}
	}
	for _, tc := range []struct {
		src any
		msg string
	}{
		{nil, "NULL"},
		{42, "cannot scan int"},
		{[]byte("short"), "cannot scan 5 bytes"},
		{"017f22e2-79b0-4cc3-98c4-dc0c0c07398f", "version"},
		{[]byte("017f22e2-79b0-7cc3-c8c4-dc0c0c07398f"), "variant"},
		{make([]byte, 16), "version 0"},
	} {
		got := u
		err := got.Scan(tc.src)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Scan(%#v): err = %v, want ErrInvalid mentioning %q", tc.src, err, tc.msg)
		}
		if got != u {
			t.Errorf("Scan(%#v) changed the UUID on error", tc.src)
		}
	}

	// Nullable columns go through sql.Null, which hands non-NULL values to Scan.
	var n sql.Null[UUID]
	if err := n.Scan(nil); err != nil || n.Valid {
		t.Fatalf("Null.Scan(nil) = %+v, %v", n, err)
	}
	if err := n.Scan([]byte(rfcVector)); err != nil || !n.Valid || n.V != u {
		t.Fatalf("Null.Scan(text) = %+v, %v", n, err)
	}
}

func TestStringAndAppendTextAgree(t *testing.T) {
	ids := make([]UUID, 1000)
	NewBatch(ids)
	buf := make([]byte, 0, 36)
	for _, u := range ids {
		buf, _ = u.AppendText(buf[:0])
		s := u.String()
		if string(buf) != s || len(s) != 36 || strings.ToLower(s) != s {
			t.Fatalf("String %q, AppendText %q", s, buf)
		}
		if back := MustParse(s); back != u {
			t.Fatalf("Parse(String) = %s, want %s", back, u)
		}
	}
	strs := make([]string, len(ids))
	for i, u := range ids {
		strs[i] = u.String()
	}
	if !slices.IsSorted(strs) {
		t.Fatal("text forms of increasing ids do not sort in the same order")
	}
}

func TestTextAllocs(t *testing.T) {
	u := New()
	buf := make([]byte, 0, 64)
	var sink []byte
	if got := testing.AllocsPerRun(1000, func() { sink, _ = u.AppendText(buf[:0]) }); got != 0 {
		t.Errorf("AppendText with room: %v allocs, want 0", got)
	}
	var s string
	if got := testing.AllocsPerRun(1000, func() { s = u.String() }); got != 1 {
		t.Errorf("String: %v allocs, want 1", got)
	}
	var c int
	v := New()
	if got := testing.AllocsPerRun(1000, func() { c = u.Compare(v) }); got != 0 {
		t.Errorf("Compare: %v allocs, want 0", got)
	}
	_, _, _ = sink, s, c
}
