package objectid_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/objectid"
)

// Seed corpora live in testdata/fuzz/FuzzXxx/.

// maxErrLen bounds error messages whatever the input length: the input is
// quoted up to 32 bytes, each at most 4 characters once escaped.
const maxErrLen = 4*32 + 150

func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		id, err := objectid.Parse(s)
		if valid := objectid.IsValid(s); valid != (err == nil) {
			t.Fatalf("IsValid(%q) = %v but Parse error = %v", s, valid, err)
		}
		var fromText objectid.ObjectID
		textErr := fromText.UnmarshalText([]byte(s))
		if (textErr == nil) != (err == nil) || fromText != id {
			t.Fatalf("UnmarshalText(%q) = %s, %v; Parse = %s, %v", s, fromText, textErr, id, err)
		}
		if err != nil {
			if !errors.Is(err, objectid.ErrInvalid) || !strings.HasPrefix(err.Error(), "objectid: invalid ObjectID") {
				t.Fatalf("Parse(%q): bad error %v", s, err)
			}
			if len(err.Error()) > maxErrLen {
				t.Fatalf("Parse(%d bytes): %d-byte error message", len(s), len(err.Error()))
			}
			return
		}
		if got := id.Hex(); got != strings.ToLower(s) {
			t.Fatalf("Parse(%q).Hex() = %q", s, got)
		}
		if back, err := objectid.Parse(id.Hex()); err != nil || back != id {
			t.Fatalf("re-parse of %s = %s, %v", id, back, err)
		}
		if back, err := objectid.FromParts(id.Seconds(), id.Random(), id.Counter()); err != nil || back != id {
			t.Fatalf("FromParts round trip of %s = %s, %v", id, back, err)
		}
		if back, err := objectid.FromUUIDv7(id.UUIDv7()); err != nil || back != id {
			t.Fatalf("UUIDv7 round trip of %s = %s, %v", id, back, err)
		}
	})
}

func FuzzUnmarshalJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var id objectid.ObjectID
		err := id.UnmarshalJSON(data)
		if err != nil {
			if !errors.Is(err, objectid.ErrInvalid) {
				t.Fatalf("UnmarshalJSON(%q): %v does not wrap ErrInvalid", data, err)
			}
			if id != objectid.Nil {
				t.Fatalf("UnmarshalJSON(%q) failed but set %s", data, id)
			}
			return
		}
		if string(data) == "null" {
			return
		}
		// Whatever was accepted must be valid JSON and re-encode to a
		// string that decodes to the same id.
		if !json.Valid(data) {
			t.Fatalf("UnmarshalJSON accepted invalid JSON %q", data)
		}
		out, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		var back objectid.ObjectID
		if err := json.Unmarshal(out, &back); err != nil || back != id {
			t.Fatalf("round trip of %s via %s = %s, %v", id, out, back, err)
		}
	})
}

func FuzzUUIDv7Order(f *testing.F) {
	f.Fuzz(func(t *testing.T, a, b []byte) {
		x, errA := objectid.FromBytes(a)
		y, errB := objectid.FromBytes(b)
		if errA != nil || errB != nil {
			return
		}
		ux, uy := x.UUIDv7(), y.UUIDv7()
		if got, want := bytes.Compare(ux[:], uy[:]), x.Compare(y); got != want {
			t.Fatalf("order %s vs %s is %d, of their UUIDs %d", x, y, want, got)
		}
		lo, hi := x.UUIDv7Bounds()
		if bytes.Compare(lo[:], ux[:]) > 0 || bytes.Compare(ux[:], hi[:]) > 0 {
			t.Fatalf("%s: UUID outside its bounds", x)
		}
		if back, err := objectid.FromUUIDv7(ux); err != nil || back != x {
			t.Fatalf("FromUUIDv7 of %s = %s, %v", x, back, err)
		}
	})
}
