package uuidv7

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseValid(t *testing.T) {
	for _, s := range []string{
		rfcVector,
		strings.ToUpper(rfcVector),
		"017F22e2-79B0-7cC3-98c4-DC0c0c07398F",
		"017f22e2-79b0-7cc3-88c4-dc0c0c07398f", // variant digits 8, 9, a, b, A, B
		"017f22e2-79b0-7cc3-98c4-dc0c0c07398f",
		"017f22e2-79b0-7cc3-a8c4-dc0c0c07398f",
		"017f22e2-79b0-7cc3-b8c4-dc0c0c07398f",
		"017f22e2-79b0-7cc3-A8c4-dc0c0c07398f",
		"017f22e2-79b0-7cc3-B8c4-dc0c0c07398f",
		"00000000-0000-7000-8000-000000000000", // smallest UUIDv7
		"ffffffff-ffff-7fff-bfff-ffffffffffff", // largest UUIDv7
	} {
		u, err := Parse(s)
		if err != nil {
			t.Errorf("Parse(%q): %v", s, err)
			continue
		}
		if u.String() != strings.ToLower(s) {
			t.Errorf("Parse(%q).String() = %s", s, u)
		}
		if !IsValid(s) || Validate(s) != nil {
			t.Errorf("IsValid/Validate(%q) disagree with Parse", s)
		}
		if b, err := ParseBytes([]byte(s)); err != nil || b != u {
			t.Errorf("ParseBytes(%q) = %s, %v", s, b, err)
		}
		if ms, err := TimestampMs(s); err != nil || ms != u.TimestampMs() {
			t.Errorf("TimestampMs(%q) = %d, %v", s, ms, err)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		reason   string
		offset   int
	}{
		{"empty", "", ReasonLength, 0},
		{"35 chars", rfcVector[:35], ReasonLength, 35},
		{"37 chars", rfcVector + "0", ReasonLength, 37},
		{"trailing newline", rfcVector + "\n", ReasonLength, 37},
		{"leading space", " " + rfcVector, ReasonLength, 37},
		{"braces", "{" + rfcVector + "}", ReasonLength, 38},
		{"urn prefix", "urn:uuid:" + rfcVector, ReasonLength, 45},
		{"32 hex without dashes", "017f22e279b07cc398c4dc0c0c07398f", ReasonLength, 32},
		{"dashes moved", "017f22e27-9b0-7cc3-98c4-dc0c0c07398f", ReasonDash, 8},
		{"underscore for dash", "017f22e2_79b0-7cc3-98c4-dc0c0c07398f", ReasonDash, 8},
		{"zero for last dash", "017f22e2-79b0-7cc3-98c40dc0c0c07398f", ReasonDash, 23},
		{"last dash missing", "017f22e2-79b0-7cc3-98c4dc0c0c07398f", ReasonLength, 35},
		{"space for last dash", "017f22e2-79b0-7cc3-98c4 dc0c0c07398f", ReasonDash, 23},
		{"non-hex g at end", "017f22e2-79b0-7cc3-98c4-dc0c0c07398g", ReasonHex, 35},
		{"non-hex at 0", "x17f22e2-79b0-7cc3-98c4-dc0c0c07398f", ReasonHex, 0},
		{"leftmost problem wins", "017f22e2-79b0-7cc3-98c4-dc0c0c07398z", ReasonHex, 35},
		{"hex before dash", "01zf22e2x79b0-7cc3-98c4-dc0c0c07398f", ReasonHex, 2},
		{"dash where hex", "017f22e2-79b0-7cc3-98c4-dc0c0c0-398f", ReasonHex, 31},
		{"non-ascii", "017f22e2-79b0-7cc3-98c4-dc0c0c0739é", ReasonHex, 34},
		{"nul byte", "017f22e2-79b0-7cc3-98c4-dc0c0c07398\x00", ReasonHex, 35},
		{"version 4", "017f22e2-79b0-4cc3-98c4-dc0c0c07398f", ReasonVersion, 14},
		{"version 8", "017f22e2-79b0-8cc3-98c4-dc0c0c07398f", ReasonVersion, 14},
		{"nil uuid", "00000000-0000-0000-0000-000000000000", ReasonVersion, 14},
		{"max uuid", "ffffffff-ffff-ffff-ffff-ffffffffffff", ReasonVersion, 14},
		{"version checked before variant", "017f22e2-79b0-1cc3-08c4-dc0c0c07398f", ReasonVersion, 14},
		{"variant c", "017f22e2-79b0-7cc3-c8c4-dc0c0c07398f", ReasonVariant, 19},
		{"variant 7", "017f22e2-79b0-7cc3-78c4-dc0c0c07398f", ReasonVariant, 19},
		{"variant 0", "017f22e2-79b0-7cc3-08c4-dc0c0c07398f", ReasonVariant, 19},
		{"variant F", "017f22e2-79b0-7cc3-F8c4-dc0c0c07398f", ReasonVariant, 19},
		{"long garbage", strings.Repeat("z", 1000), ReasonLength, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkParseError := func(fn string, err error) {
				t.Helper()
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("%s: err = %v, want ErrInvalid", fn, err)
				}
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("%s: %T is not a *ParseError", fn, err)
				}
				if pe.Reason != tc.reason || pe.Offset != tc.offset {
					t.Fatalf("%s: reason %q at %d, want %q at %d (%v)", fn, pe.Reason, pe.Offset, tc.reason, tc.offset, err)
				}
				if want := tc.in[:min(len(tc.in), 64)]; pe.Input != want {
					t.Fatalf("%s: Input %q, want %q", fn, pe.Input, want)
				}
				if !strings.HasPrefix(err.Error(), "uuidv7: invalid UUIDv7 ") {
					t.Fatalf("%s: message %q lacks the package prefix", fn, err)
				}
			}
			u, err := Parse(tc.in)
			checkParseError("Parse", err)
			if u != Nil {
				t.Errorf("Parse returned %s with an error", u)
			}
			_, err = ParseBytes([]byte(tc.in))
			checkParseError("ParseBytes", err)
			checkParseError("Validate", Validate(tc.in))
			ms, err := TimestampMs(tc.in)
			checkParseError("TimestampMs", err)
			if ms != 0 {
				t.Errorf("TimestampMs returned %d with an error", ms)
			}
			if IsValid(tc.in) {
				t.Error("IsValid = true")
			}
		})
	}
}

func TestParseErrorMessages(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", `uuidv7: invalid UUIDv7 "abc": length 3, want 36 (canonical 8-4-4-4-12 form without braces, prefix or whitespace)`},
		{"017f22e2x79b0-7cc3-98c4-dc0c0c07398f", `uuidv7: invalid UUIDv7 "017f22e2x79b0-7cc3-98c4-dc0c0c07398f": want '-' at offset 8, found 'x'`},
		{"017f22e2-79b0-7cc3-98c4-dc0c0c07398g", `uuidv7: invalid UUIDv7 "017f22e2-79b0-7cc3-98c4-dc0c0c07398g": non-hex character 'g' at offset 35`},
		{"017f22e2-79b0-7cc3-98c4-dc0c0c07398\xff", `uuidv7: invalid UUIDv7 "017f22e2-79b0-7cc3-98c4-dc0c0c07398\xff": non-hex character byte 0xff at offset 35`},
		{"017f22e2-79b0-4cc3-98c4-dc0c0c07398f", `uuidv7: invalid UUIDv7 "017f22e2-79b0-4cc3-98c4-dc0c0c07398f": version '4' at offset 14, want '7'`},
		{"017f22e2-79b0-7cc3-c8c4-dc0c0c07398f", `uuidv7: invalid UUIDv7 "017f22e2-79b0-7cc3-c8c4-dc0c0c07398f": variant 'c' at offset 19, want one of 8, 9, a, b (RFC 9562 variant)`},
		{strings.Repeat("a", 100), `uuidv7: invalid UUIDv7 "` + strings.Repeat("a", 64) + `"...: length 100, want 36 (canonical 8-4-4-4-12 form without braces, prefix or whitespace)`},
	} {
		if err := Validate(tc.in); err == nil || err.Error() != tc.want {
			t.Errorf("Validate(%q):\n got %v\nwant %s", tc.in, err, tc.want)
		}
		if _, err := ParseBytes([]byte(tc.in)); err == nil || err.Error() != tc.want {
			t.Errorf("ParseBytes(%q):\n got %v\nwant %s", tc.in, err, tc.want)
		}
	}
}

func TestParseAny(t *testing.T) {
	for _, tc := range []struct {
		in     string
		ok     bool
		isV7   bool
		reason string
	}{
		{rfcVector, true, true, ""},
		{"73FFD264-44b3-4c69-90e8-e7d1dfc035d4", true, false, ""}, // version 4
		{"00000000-0000-0000-0000-000000000000", true, false, ""},
		{"017f22e2-79b0-7cc3-c8c4-dc0c0c07398f", true, false, ""}, // version 7, Microsoft variant
		{"017f22e279b07cc398c4dc0c0c07398f", false, false, ReasonLength},
		{"017f22e2-79b0-7cc3-98c4_dc0c0c07398f", false, false, ReasonDash},
		{"017f22e2-79b0-7cc3-98c4-dc0c0c07398g", false, false, ReasonHex},
	} {
		u, err := ParseAny(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseAny(%q) error = %v, want ok %v", tc.in, err, tc.ok)
			continue
		}
		if !tc.ok {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Reason != tc.reason || !errors.Is(err, ErrInvalid) {
				t.Errorf("ParseAny(%q) = %v, want reason %s", tc.in, err, tc.reason)
			}
			continue
		}
		if u.String() != strings.ToLower(tc.in) || u.IsV7() != tc.isV7 {
			t.Errorf("ParseAny(%q) = %s (v7 %v)", tc.in, u, u.IsV7())
		}
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		err, ok := recover().(error)
		if !ok || !errors.Is(err, ErrInvalid) {
			t.Fatalf("recovered %v, want an ErrInvalid error", err)
		}
	}()
	MustParse("not a uuid")
}

func TestParseAllocs(t *testing.T) {
	valid := rfcVector
	validBytes := []byte(valid)
	bad := "017f22e2-79b0-4cc3-98c4-dc0c0c07398f"
	badBytes := []byte(bad)
	var (
		u   UUID
		err error
		ok  bool
		ms  int64
	)
	for _, tc := range []struct {
		name string
		want float64
		f    func()
	}{
		{"Parse", 0, func() { u, err = Parse(valid) }},
		{"ParseBytes", 0, func() { u, err = ParseBytes(validBytes) }},
		{"IsValid", 0, func() { ok = IsValid(valid) }},
		{"IsValid/invalid", 0, func() { ok = IsValid(bad) }},
		{"IsValid/wrong length", 0, func() { ok = IsValid("short") }},
		{"Validate", 0, func() { err = Validate(valid) }},
		{"TimestampMs", 0, func() { ms, err = TimestampMs(valid) }},
		{"UnmarshalText", 0, func() { err = u.UnmarshalText(validBytes) }},
		{"Parse/invalid", 1, func() { u, err = Parse(bad) }},
		{"Validate/invalid", 1, func() { err = Validate(bad) }},
		{"ParseBytes/invalid", 2, func() { u, err = ParseBytes(badBytes) }},
	} {
		if got := testing.AllocsPerRun(1000, tc.f); got != tc.want {
			t.Errorf("%s: %v allocs, want %v", tc.name, got, tc.want)
		}
	}
	_, _, _, _ = u, err, ok, ms
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		rfcVector,
		strings.ToUpper(rfcVector),
		"00000000-0000-7000-8000-000000000000",
		"ffffffff-ffff-7fff-bfff-ffffffffffff",
		"00000000-0000-0000-0000-000000000000",
		"017f22e2-79b0-4cc3-98c4-dc0c0c07398f",
		"{017f22e2-79b0-7cc3-98c4-dc0c0c07398f}",
		"017f22e279b07cc398c4dc0c0c07398f",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := Parse(s)
		// ParseAny accepts a superset: what Parse accepts, the same value,
		// plus every other version and variant, and nothing of another
		// layout.
		au, aerr := ParseAny(s)
		switch {
		case err == nil && (aerr != nil || au != u):
			t.Fatalf("ParseAny(%q) = %s, %v; Parse = %s", s, au, aerr, u)
		case aerr == nil && au.String() != strings.ToLower(s):
			t.Fatalf("ParseAny(%q) = %s: not the same text", s, au)
		case aerr != nil && err != nil && !errors.Is(aerr, ErrInvalid):
			t.Fatalf("ParseAny(%q): %v does not wrap ErrInvalid", s, aerr)
		case aerr != nil && err != nil:
			var pe *ParseError
			if errors.As(aerr, &pe) && (pe.Reason == ReasonVersion || pe.Reason == ReasonVariant) {
				t.Fatalf("ParseAny(%q) checked the %s", s, pe.Reason)
			}
		}
		if IsValid(s) != (err == nil) {
			t.Fatalf("IsValid(%q) = %v but Parse err = %v", s, IsValid(s), err)
		}
		if verr := Validate(s); (verr == nil) != (err == nil) {
			t.Fatalf("Validate(%q) = %v but Parse err = %v", s, verr, err)
		}
		ub, berr := ParseBytes([]byte(s))
		if ub != u || (berr == nil) != (err == nil) || (err != nil && berr.Error() != err.Error()) {
			t.Fatalf("ParseBytes(%q) = %s, %v; Parse = %s, %v", s, ub, berr, u, err)
		}
		ms, terr := TimestampMs(s)
		if (terr == nil) != (err == nil) || ms != u.TimestampMs() {
			t.Fatalf("TimestampMs(%q) = %d, %v", s, ms, terr)
		}
		if err != nil {
			var pe *ParseError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &pe) {
				t.Fatalf("Parse(%q): %v is not a *ParseError wrapping ErrInvalid", s, err)
			}
			if pe.Offset < 0 || pe.Offset > len(s) || len(pe.Input) > 64 || !strings.HasPrefix(s, pe.Input) {
				t.Fatalf("Parse(%q): bad details %+v", s, pe)
			}
			if u != Nil {
				t.Fatalf("Parse(%q) returned %s with an error", s, u)
			}
			_ = err.Error() // must not panic
			return
		}
		if got, want := u.String(), strings.ToLower(s); got != want {
			t.Fatalf("String(Parse(%q)) = %q, want %q", s, got, want)
		}
		if !u.IsV7() || !utf8.ValidString(s) {
			t.Fatalf("Parse(%q) accepted %s", s, u)
		}
		if back, err := FromBytes(u[:]); err != nil || back != u {
			t.Fatalf("FromBytes of parsed %s: %v", u, err)
		}
		lo, hi := MinForTimestampMs(u.TimestampMs()), MaxForTimestampMs(u.TimestampMs())
		if lo.Compare(u) > 0 || u.Compare(hi) > 0 {
			t.Fatalf("%s outside its millisecond's bounds", u)
		}
	})
}
