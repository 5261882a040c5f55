package mpack_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
)

func isSentinel(err error) bool {
	return errors.Is(err, mpack.ErrMalformed) || errors.Is(err, mpack.ErrTooDeep) || errors.Is(err, mpack.ErrUnsupported)
}

// FuzzDecode checks that Decode never panics, that its errors are the
// package's sentinels, that Skip and EqualRaw agree with it, and that it
// agrees with the msgpack library.
//
// The library accepts some inputs that Decode rejects on purpose, so those
// are never compared: map keys that are nil or bin (the library turns them
// into strings), duplicate map keys (the library keeps the last), timestamps
// with nanoseconds of 10^9 or more (the library carries them into seconds),
// and nesting deeper than MaxDepth (the library has no limit). The library
// returns times in the local zone; Normalize moves them to UTC.
func FuzzDecode(f *testing.F) {
	for _, tc := range codeTests {
		f.Add(tc.in)
	}
	f.Add(sampleRecord(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, n, err := mpack.Decode(data)
		skipN, skipErr := mpack.Skip(data)
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("Decode error %v is not a sentinel", err)
			}
			if _, eqErr := mpack.EqualRaw(data, nil); eqErr == nil {
				t.Fatalf("EqualRaw accepted what Decode rejected: %v", err)
			}
			return
		}
		if skipErr != nil || skipN != n {
			t.Fatalf("Skip = %d, %v; Decode consumed %d", skipN, skipErr, n)
		}
		raw := data[:n]
		if eq, err := mpack.EqualRaw(raw, v); err != nil || eq == order.HasNaN(v) {
			t.Fatalf("EqualRaw(raw, Decode(raw)) = %v, %v", eq, err)
		}
		var lib any
		if err := msgpack.Unmarshal(raw, &lib); err != nil {
			if strings.Contains(err.Error(), "unknown ext id") {
				return // storh's typed ids (ExtUUID, ExtObjectID): the library has no decoder registered here
			}
			t.Fatalf("library rejects %x that Decode accepts: %v", raw, err)
		}
		libNorm, err := mpack.Normalize(lib)
		if err != nil || !same(v, libNorm) {
			t.Fatalf("Decode = %#v, library (normalised) = %#v, %v", v, libNorm, err)
		}
	})
}

// FuzzFieldAgreesWithDecode checks that ValidateRecord and DecodeMap accept
// the same payloads and that, on those, Field finds every decoded key with an
// equal value and reports a missing key as absent.
func FuzzFieldAgreesWithDecode(f *testing.F) {
	f.Add(sampleRecord(f), "nope")
	f.Add(hx("83 a161 01 a162 c0 a163 92 01 02"), "")
	f.Add(hx("82 a162 01 a161 02"), "a")
	f.Add(hx("82 a161 01 a161 02"), "a")
	f.Fuzz(func(t *testing.T, data []byte, missing string) {
		m, err := mpack.DecodeMap(data)
		verr := mpack.ValidateRecord(data)
		if (err == nil) != (verr == nil) {
			t.Fatalf("DecodeMap error %v but ValidateRecord error %v", err, verr)
		}
		if err != nil {
			if !isSentinel(err) || !isSentinel(verr) {
				t.Fatalf("errors are not sentinels: %v, %v", err, verr)
			}
			return
		}
		for k, want := range m {
			raw, ok, err := mpack.Field(data, k)
			if err != nil || !ok {
				t.Fatalf("Field(%q) = %v, %v", k, ok, err)
			}
			got, n, err := mpack.Decode(raw)
			if err != nil || n != len(raw) || !same(got, want) {
				t.Fatalf("Field(%q) decodes to %#v, %d, %v; DecodeMap has %#v", k, got, n, err, want)
			}
		}
		if _, present := m[missing]; !present {
			if raw, ok, err := mpack.Field(data, missing); ok || err != nil {
				t.Fatalf("Field(missing %q) = %x, %v, %v", missing, raw, ok, err)
			}
		}
	})
}

// FuzzEqualRaw checks EqualRaw(raw, want) against Equal(Decode(raw), want)
// for want decoded from a second input, and that EqualRaw fails exactly when
// raw is not one whole value Decode accepts.
func FuzzEqualRaw(f *testing.F) {
	f.Add(hx("01"), hx("cb 3ff0000000000000"))
	f.Add(hx("01"), hx("d3 0000000000000001"))
	f.Add(hx("ff"), hx("cf ffffffffffffffff"))
	f.Add(hx("a131"), hx("c4 01 31"))
	f.Add(hx("ca 7fc00000"), hx("ca 7fc00000"))
	f.Add(hx("82 a161 01 a162 92 c3 c0"), hx("82 a162 92 c3 c0 a161 cc 01"))
	f.Add(hx("d6 ff 00000001"), hx("d7 ff 00000000 00000001"))
	f.Add(sampleRecord(f), sampleRecord(f))
	f.Fuzz(func(t *testing.T, raw, wantBytes []byte) {
		want, _, err := mpack.Decode(wantBytes)
		if err != nil {
			return
		}
		eq, err := mpack.EqualRaw(raw, want)
		got, n, derr := mpack.Decode(raw)
		if derr != nil || n != len(raw) {
			if err == nil {
				t.Fatalf("EqualRaw accepted %x; Decode: %d of %d bytes, %v", raw, n, len(raw), derr)
			}
			return
		}
		if err != nil {
			t.Fatalf("EqualRaw: %v", err)
		}
		if model := mpack.Equal(got, want); eq != model {
			t.Fatalf("EqualRaw(%x, %#v) = %v, Equal(%#v, want) = %v", raw, want, eq, got, model)
		}
	})
}
