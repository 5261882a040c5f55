package objectid_test

import (
	"bytes"
	"database/sql"
	"database/sql/driver"
	"encoding"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/objectid"
)

// Interface assertions: these are part of the API promise.
var (
	_ encoding.TextMarshaler     = objectid.ObjectID{}
	_ encoding.TextAppender      = objectid.ObjectID{}
	_ encoding.TextUnmarshaler   = (*objectid.ObjectID)(nil)
	_ encoding.BinaryMarshaler   = objectid.ObjectID{}
	_ encoding.BinaryAppender    = objectid.ObjectID{}
	_ encoding.BinaryUnmarshaler = (*objectid.ObjectID)(nil)
	_ json.Unmarshaler           = (*objectid.ObjectID)(nil)
	_ driver.Valuer              = objectid.ObjectID{}
	_ sql.Scanner                = (*objectid.ObjectID)(nil)
)

func TestFromPartsSourceExample(t *testing.T) {
	// The worked example of the source document: 1700000000 s, random
	// 3f2a91c8d4, counter 12345.
	id, err := objectid.FromParts(1700000000, 0x3f2a91c8d4, 12345)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := id.Hex(), "6553f1003f2a91c8d4003039"; got != want {
		t.Fatalf("Hex = %s, want %s", got, want)
	}
	if got, want := id.Timestamp(), time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Timestamp = %v, want %v", got, want)
	}
	if id.Seconds() != 1700000000 || id.Random() != 0x3f2a91c8d4 || id.Counter() != 12345 {
		t.Errorf("parts = %d %#x %d", id.Seconds(), id.Random(), id.Counter())
	}
}

func TestDecodeMongoManualExample(t *testing.T) {
	id, err := objectid.Parse("507f1f77bcf86cd799439011")
	if err != nil {
		t.Fatal(err)
	}
	if id.Seconds() != 1350508407 {
		t.Errorf("Seconds = %d, want 1350508407", id.Seconds())
	}
	want := time.Date(2012, 10, 17, 21, 13, 27, 0, time.UTC)
	if got := id.Timestamp(); !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("Timestamp = %v, want %v in UTC", got, want)
	}
	if id.Random() != 0xbcf86cd799 || id.Counter() != 0x439011 {
		t.Errorf("Random, Counter = %#x, %#x", id.Random(), id.Counter())
	}
}

func TestTimestampBoundaries(t *testing.T) {
	tests := []struct {
		secs uint32
		want time.Time
	}{
		{0x00000000, time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)},
		{0x7FFFFFFF, time.Date(2038, 1, 19, 3, 14, 7, 0, time.UTC)},
		{0x80000000, time.Date(2038, 1, 19, 3, 14, 8, 0, time.UTC)},
		{0xFFFFFFFF, time.Date(2106, 2, 7, 6, 28, 15, 0, time.UTC)},
	}
	for _, tt := range tests {
		id, err := objectid.FromParts(tt.secs, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := id.Timestamp(); !got.Equal(tt.want) {
			t.Errorf("%#08x: Timestamp = %v, want %v", tt.secs, got, tt.want)
		}
		// The time survives the trip through FromTime, i.e. the encoder
		// and decoder agree on the unsigned reading.
		if got := objectid.FromTime(tt.want).Seconds(); got != tt.secs {
			t.Errorf("FromTime(%v).Seconds = %#x, want %#x", tt.want, got, tt.secs)
		}
	}
}

func TestSecondsWrapOutsideRange(t *testing.T) {
	// Documented choice: uint32(t.Unix()), as the MongoDB drivers do.
	tests := []struct {
		name string
		t    time.Time
		want uint32
	}{
		{"first second after 2106 wraps to 0", time.Date(2106, 2, 7, 6, 28, 16, 0, time.UTC), 0},
		{"later wraps further", time.Date(2106, 2, 7, 6, 28, 26, 0, time.UTC), 10},
		{"one second before 1970 wraps to max", time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), 0xFFFFFFFF},
		{"half a second before 1970 is still -1 s", time.Date(1969, 12, 31, 23, 59, 59, 5e8, time.UTC), 0xFFFFFFFF},
		{"fractions are dropped", time.Date(2023, 11, 14, 22, 13, 20, 999999999, time.UTC), 1700000000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := objectid.FromTime(tt.t).Seconds(); got != tt.want {
				t.Errorf("FromTime: %#x, want %#x", got, tt.want)
			}
			g := objectid.NewGenerator(objectid.WithClock(func() time.Time { return tt.t }))
			if got := g.New().Seconds(); got != tt.want {
				t.Errorf("Generator: %#x, want %#x", got, tt.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		ok      bool
		wantErr string // substring of the error message
	}{
		{in: "000000000000000000000000", ok: true},
		{in: "ffffffffffffffffffffffff", ok: true},
		{in: "FFFFFFFFFFFFFFFFFFFFFFFF", ok: true},
		{in: "56e1fc72e0c917e9c4714161", ok: true},
		{in: "56E1FC72E0C917E9C4714161", ok: true},
		{in: "56e1FC72e0c917E9c4714161", ok: true},
		{in: "507f1f77bcf86cd799439011", ok: true},
		{in: "", wantErr: "length 0, want 24"},
		{in: "56e1fc72e0c917e9c471416", wantErr: "length 23, want 24"},
		{in: "56e1fc72e0c917e9c47141611", wantErr: "length 25, want 24"},
		{in: " 56e1fc72e0c917e9c471416", wantErr: `invalid character " " at offset 0`},
		{in: "56e1fc72e0c917e9c471416 ", wantErr: `invalid character " " at offset 23`},
		{in: " 56e1fc72e0c917e9c4714161 ", wantErr: "length 26"},
		{in: "56e1fc72e0c917e9c4714161\n", wantErr: "length 25"},
		{in: "g6e1fc72e0c917e9c4714161", wantErr: `invalid character "g" at offset 0`},
		{in: "56e1fc72e0c917e9c471416z", wantErr: `invalid character "z" at offset 23`},
		{in: "56e1fc72e0cG17e9c4714161", wantErr: `invalid character "G" at offset 11`},
		{in: "56e1fc72-0c917e9c4714161", wantErr: `invalid character "-" at offset 8`},
		{in: "0x56e1fc72e0c917e9c47141", wantErr: `invalid character "x" at offset 1`},
		{in: "56e1fc72e0c917e9c47141\xff1", wantErr: `invalid character "\xff" at offset 22`},
		{in: "56e1fc72e0c917e9c47141é", wantErr: `invalid character "\xc3" at offset 22`},
		{in: `ObjectId("56e1fc72e0c917e9c4714161")`, wantErr: "length 36"},
		{in: "56e1fc72e0c917e9c4714161" + strings.Repeat("0", 1000), wantErr: `"...: length 1024`},
	}
	for _, tt := range tests {
		id, err := objectid.Parse(tt.in)
		if got := objectid.IsValid(tt.in); got != tt.ok {
			t.Errorf("IsValid(%q) = %v, want %v", tt.in, got, tt.ok)
		}
		if tt.ok {
			if err != nil {
				t.Errorf("Parse(%q): %v", tt.in, err)
				continue
			}
			if got := id.Hex(); got != strings.ToLower(tt.in) {
				t.Errorf("Parse(%q).Hex() = %s", tt.in, got)
			}
			continue
		}
		if err == nil {
			t.Errorf("Parse(%q) = %s, want error", tt.in, id)
			continue
		}
		if !errors.Is(err, objectid.ErrInvalid) {
			t.Errorf("Parse(%q): error %v does not wrap ErrInvalid", tt.in, err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "objectid: invalid ObjectID") || !strings.Contains(msg, tt.wantErr) {
			t.Errorf("Parse(%q): error %q, want it to contain %q", tt.in, msg, tt.wantErr)
		}
		if len(err.Error()) > maxErrLen {
			t.Errorf("Parse(%d bytes): error message is %d bytes long", len(tt.in), len(err.Error()))
		}
		if id != objectid.Nil {
			t.Errorf("Parse(%q) returned %s with the error", tt.in, id)
		}
	}
}

func TestMustParse(t *testing.T) {
	if got := objectid.MustParse("507F1F77BCF86CD799439011").Hex(); got != "507f1f77bcf86cd799439011" {
		t.Errorf("MustParse = %s", got)
	}
	defer func() {
		err, _ := recover().(error)
		if !errors.Is(err, objectid.ErrInvalid) {
			t.Errorf("MustParse panicked with %v, want an error wrapping ErrInvalid", err)
		}
	}()
	objectid.MustParse("nope")
}

func TestFromPartsRange(t *testing.T) {
	tests := []struct {
		random  uint64
		counter uint32
		ok      bool
	}{
		{0, 0, true},
		{objectid.MaxRandom, objectid.MaxCounter, true},
		{objectid.MaxRandom + 1, 0, false},
		{1 << 63, 0, false},
		{0, objectid.MaxCounter + 1, false},
		{0, 1 << 31, false},
	}
	for _, tt := range tests {
		id, err := objectid.FromParts(0xFFFFFFFF, tt.random, tt.counter)
		if tt.ok {
			if err != nil || id.Random() != tt.random || id.Counter() != tt.counter || id.Seconds() != 0xFFFFFFFF {
				t.Errorf("FromParts(%#x, %#x) = %s, %v", tt.random, tt.counter, id, err)
			}
			continue
		}
		if !errors.Is(err, objectid.ErrRange) || !strings.HasPrefix(err.Error(), "objectid: part out of range: ") {
			t.Errorf("FromParts(%#x, %#x): err = %v, want ErrRange with detail", tt.random, tt.counter, err)
		}
	}
}

func TestPartsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		var id objectid.ObjectID
		for i := range id {
			id[i] = byte(r.Uint32())
		}
		back, err := objectid.FromParts(id.Seconds(), id.Random(), id.Counter())
		if err != nil || back != id {
			t.Fatalf("FromParts(parts of %s) = %s, %v", id, back, err)
		}
		if id.Random() > objectid.MaxRandom || id.Counter() > objectid.MaxCounter {
			t.Fatalf("%s: parts out of range", id)
		}
	}
}

func TestFromBytes(t *testing.T) {
	want := objectid.MustParse("56e1fc72e0c917e9c4714161")
	got, err := objectid.FromBytes(want[:])
	if err != nil || got != want {
		t.Fatalf("FromBytes = %s, %v", got, err)
	}
	for _, n := range []int{0, 11, 13, 16, 24} {
		if _, err := objectid.FromBytes(make([]byte, n)); !errors.Is(err, objectid.ErrInvalid) {
			t.Errorf("FromBytes(%d bytes): err = %v, want ErrInvalid", n, err)
		}
	}
}

func TestCompare(t *testing.T) {
	ids := []objectid.ObjectID{
		objectid.Nil,
		objectid.MustParse("000000000000000000000001"),
		objectid.MustParse("00000000000000000000ff00"),
		objectid.MustParse("000000000000000100000000"),
		objectid.MustParse("0000000000000000ffffffff"),
		objectid.MustParse("000000010000000000000000"),
		objectid.MustParse("6553f1003f2a91c8d4003039"),
		objectid.MustParse("6553f1003f2a91c8d400303a"),
		objectid.MustParse("ffffffffffffffffffffffff"),
	}
	// Check against bytewise and hex-string order for all pairs.
	for _, a := range ids {
		for _, b := range ids {
			want := bytes.Compare(a[:], b[:])
			if got := a.Compare(b); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", a, b, got, want)
			}
			if got := strings.Compare(a.Hex(), b.Hex()); got != want {
				t.Errorf("hex order of %s, %s = %d, want %d", a, b, got, want)
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		var a, b objectid.ObjectID
		for i := range a {
			a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		if r.IntN(2) == 0 {
			copy(b[:8], a[:8]) // exercise the tie-break on the last 4 bytes
		}
		if got, want := a.Compare(b), bytes.Compare(a[:], b[:]); got != want {
			t.Fatalf("%s.Compare(%s) = %d, want %d", a, b, got, want)
		}
	}
}

func TestIsZero(t *testing.T) {
	if !objectid.Nil.IsZero() || !(objectid.ObjectID{}).IsZero() {
		t.Error("Nil is not zero")
	}
	if objectid.MustParse("000000000000000000000001").IsZero() || objectid.New().IsZero() {
		t.Error("non-nil id is zero")
	}
}

func TestTextRoundTrip(t *testing.T) {
	id := objectid.MustParse("6553f1003f2a91c8d4003039")
	b, err := id.MarshalText()
	if err != nil || string(b) != id.Hex() {
		t.Fatalf("MarshalText = %q, %v", b, err)
	}
	var back objectid.ObjectID
	if err := back.UnmarshalText(b); err != nil || back != id {
		t.Fatalf("UnmarshalText = %s, %v", back, err)
	}
	if err := back.UnmarshalText([]byte("xyz")); !errors.Is(err, objectid.ErrInvalid) || back != id {
		t.Errorf("UnmarshalText(bad) = %v and changed the id to %s", err, back)
	}
	out, _ := id.AppendText([]byte("id="))
	if string(out) != "id="+id.Hex() {
		t.Errorf("AppendText = %q", out)
	}
	if id.String() != id.Hex() {
		t.Errorf("String %q != Hex %q", id.String(), id.Hex())
	}
}

func TestJSONRoundTrip(t *testing.T) {
	type doc struct {
		ID   objectid.ObjectID            `json:"_id"`
		Ref  *objectid.ObjectID           `json:"ref"`
		List []objectid.ObjectID          `json:"list"`
		ByID map[objectid.ObjectID]string `json:"by_id"`
	}
	a := objectid.MustParse("6553f1003f2a91c8d4003039")
	b := objectid.MustParse("507f1f77bcf86cd799439011")
	in := doc{ID: a, Ref: &b, List: []objectid.ObjectID{a, b}, ByID: map[objectid.ObjectID]string{a: "x"}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"_id":"6553f1003f2a91c8d4003039","ref":"507f1f77bcf86cd799439011",` +
		`"list":["6553f1003f2a91c8d4003039","507f1f77bcf86cd799439011"],"by_id":{"6553f1003f2a91c8d4003039":"x"}}`
	if string(data) != want {
		t.Fatalf("json.Marshal =\n%s\nwant\n%s", data, want)
	}
	var out doc
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if out.ID != a || out.Ref == nil || *out.Ref != b || len(out.List) != 2 || out.List[1] != b || out.ByID[a] != "x" {
		t.Errorf("round trip = %+v", out)
	}
}

func TestUnmarshalJSON(t *testing.T) {
	want := objectid.MustParse("507f1f77bcf86cd799439011")
	tests := []struct {
		in string
		ok bool
	}{
		{`"507f1f77bcf86cd799439011"`, true},
		{`"507F1F77BCF86CD799439011"`, true},
		{`"\u0035\u00307f1f77bcf86cd799439011"`, true}, // escapes go the slow way
		{`{"$oid":"507f1f77bcf86cd799439011"}`, true},  // MongoDB Extended JSON
		{` { "$oid" : "507f1f77bcf86cd799439011" } `, true},
		{`"507f1f77bcf86cd79943901"`, false},
		{`"507f1f77bcf86cd79943901g"`, false},
		{`"\"07f1f77bcf86cd79943901"`, false},
		{`123`, false},
		{`true`, false},
		{`[]`, false},
		{`{}`, false},
		{`{"$oid":1}`, false},
		{`{"$OID":"507f1f77bcf86cd799439011"}`, false},
		{`{"$oid":"507f1f77bcf86cd799439011","x":1}`, false},
		{`{"$oid":"bad"}`, false},
	}
	for _, tt := range tests {
		var s struct{ ID objectid.ObjectID }
		err := json.Unmarshal([]byte(`{"ID":`+tt.in+`}`), &s)
		if tt.ok {
			if err != nil || s.ID != want {
				t.Errorf("%s: got %s, %v", tt.in, s.ID, err)
			}
			continue
		}
		if !errors.Is(err, objectid.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", tt.in, err)
		}
	}
	// null leaves the value alone, as encoding/json expects.
	s := struct{ ID objectid.ObjectID }{ID: want}
	if err := json.Unmarshal([]byte(`{"ID":null}`), &s); err != nil || s.ID != want {
		t.Errorf("null: %s, %v", s.ID, err)
	}
	// Called directly (not through encoding/json), odd input still fails cleanly.
	var id objectid.ObjectID
	for _, in := range []string{"", "n", `"`, "{", "nul"} {
		if err := id.UnmarshalJSON([]byte(in)); !errors.Is(err, objectid.ErrInvalid) {
			t.Errorf("UnmarshalJSON(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestBinaryRoundTrip(t *testing.T) {
	id := objectid.MustParse("56e1fc72e0c917e9c4714161")
	b, err := id.MarshalBinary()
	if err != nil || !bytes.Equal(b, id[:]) {
		t.Fatalf("MarshalBinary = %x, %v", b, err)
	}
	b[0] ^= 0xff // the result must be a copy
	if id[0] == b[0] {
		t.Fatal("MarshalBinary aliases the id")
	}
	b[0] ^= 0xff
	var back objectid.ObjectID
	if err := back.UnmarshalBinary(b); err != nil || back != id {
		t.Fatalf("UnmarshalBinary = %s, %v", back, err)
	}
	if err := back.UnmarshalBinary(b[:11]); !errors.Is(err, objectid.ErrInvalid) || back != id {
		t.Errorf("UnmarshalBinary(11 bytes) = %v, id now %s", err, back)
	}
	out, _ := id.AppendBinary([]byte{1})
	if !bytes.Equal(out, append([]byte{1}, id[:]...)) {
		t.Errorf("AppendBinary = %x", out)
	}
}

func TestSQLRoundTrip(t *testing.T) {
	id := objectid.MustParse("56e1fc72e0c917e9c4714161")
	v, err := id.Value()
	if err != nil || v != "56e1fc72e0c917e9c4714161" {
		t.Fatalf("Value = %#v, %v", v, err)
	}
	if !driver.IsValue(v) {
		t.Fatalf("Value returned %T, not a driver.Value", v)
	}
	ok := []any{v, []byte("56e1fc72e0c917e9c4714161"), []byte("56E1FC72E0C917E9C4714161"), id[:]}
	for _, src := range ok {
		var got objectid.ObjectID
		if err := got.Scan(src); err != nil || got != id {
			t.Errorf("Scan(%#v) = %s, %v", src, got, err)
		}
	}
	bad := []any{nil, 42, "abc", []byte("abc"), make([]byte, 16), time.Now()}
	for _, src := range bad {
		got := id
		if err := got.Scan(src); !errors.Is(err, objectid.ErrInvalid) || got != id {
			t.Errorf("Scan(%#v) = %v and set %s, want ErrInvalid and no change", src, err, got)
		}
	}
	// Nullable columns go through sql.Null.
	var n sql.Null[objectid.ObjectID]
	if err := n.Scan(nil); err != nil || n.Valid {
		t.Errorf("sql.Null.Scan(nil) = %v, valid=%v", err, n.Valid)
	}
	if err := n.Scan("56e1fc72e0c917e9c4714161"); err != nil || !n.Valid || n.V != id {
		t.Errorf("sql.Null.Scan = %v, %+v", err, n)
	}
}
