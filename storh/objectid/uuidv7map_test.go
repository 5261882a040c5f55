package objectid_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/storhdb/storh-go/storh/objectid"
)

// canonical formats a 16-byte UUID as 8-4-4-4-12 without importing uuidv7.
func canonical(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func TestUUIDv7KnownVector(t *testing.T) {
	id := objectid.MustParse("6553f1003f2a91c8d4003039")
	// ms = 1700000000000 = 0x018bcfe56800; V = 0x3f2a91c8d4003039:
	// rand_a = 0x3f2, rand_b = 0xa91c8d4003039 << 10, variant 10 in front.
	if got, want := canonical(id.UUIDv7()), "018bcfe5-6800-73f2-aa47-235000c0e400"; got != want {
		t.Errorf("UUIDv7 = %s, want %s", got, want)
	}
	lo, hi := id.UUIDv7Bounds()
	if got, want := canonical(lo), "018bcfe5-6800-7000-8000-000000000000"; got != want {
		t.Errorf("lo = %s, want %s", got, want)
	}
	// 1700000000999 = 0x018bcfe56be7
	if got, want := canonical(hi), "018bcfe5-6be7-7fff-bfff-ffffffffffff"; got != want {
		t.Errorf("hi = %s, want %s", got, want)
	}
}

func randomID(r *rand.Rand) objectid.ObjectID {
	var id objectid.ObjectID
	binary.BigEndian.PutUint32(id[0:4], r.Uint32())
	binary.BigEndian.PutUint64(id[4:12], r.Uint64())
	return id
}

// checkDerived asserts the UUIDv7 shape of id.UUIDv7() and that it lies
// within the id's bounds, and that FromUUIDv7 gets id back.
func checkDerived(t *testing.T, id objectid.ObjectID) {
	t.Helper()
	u := id.UUIDv7()
	if v := u[6] >> 4; v != 7 {
		t.Fatalf("%s: version %d", id, v)
	}
	if u[8]>>6 != 0b10 {
		t.Fatalf("%s: variant bits %02b", id, u[8]>>6)
	}
	ms := binary.BigEndian.Uint64(u[0:8]) >> 16
	if ms != uint64(id.Seconds())*1000 {
		t.Fatalf("%s: ms %d, want %d", id, ms, uint64(id.Seconds())*1000)
	}
	if u != id.UUIDv7() {
		t.Fatalf("%s: UUIDv7 not deterministic", id)
	}
	lo, hi := id.UUIDv7Bounds()
	if bytes.Compare(lo[:], u[:]) > 0 || bytes.Compare(u[:], hi[:]) > 0 {
		t.Fatalf("%s: %s outside [%s, %s]", id, canonical(u), canonical(lo), canonical(hi))
	}
	for _, b := range [][16]byte{lo, hi} {
		if b[6]>>4 != 7 || b[8]>>6 != 0b10 {
			t.Fatalf("%s: bound %s is not a UUIDv7", id, canonical(b))
		}
	}
	back, err := objectid.FromUUIDv7(u)
	if err != nil || back != id {
		t.Fatalf("FromUUIDv7(%s) = %s, %v; want %s", canonical(u), back, err, id)
	}
}

func TestUUIDv7Shape(t *testing.T) {
	edges := []string{
		"000000000000000000000000",
		"ffffffffffffffffffffffff",
		"00000000ffffffffffffffff",
		"ffffffff0000000000000000",
		"7fffffff8000000000000000",
		"6553f1003f2a91c8d4003039",
		"507f1f77bcf86cd799439011",
	}
	for _, s := range edges {
		checkDerived(t, objectid.MustParse(s))
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 10000 {
		checkDerived(t, randomID(r))
	}
}

func TestUUIDv7PreservesOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	check := func(a, b objectid.ObjectID) {
		t.Helper()
		ua, ub := a.UUIDv7(), b.UUIDv7()
		if got, want := bytes.Compare(ua[:], ub[:]), a.Compare(b); got != want {
			t.Fatalf("order of %s, %s is %d but of their UUIDs %s, %s is %d",
				a, b, want, canonical(ua), canonical(ub), got)
		}
	}
	for range 20000 {
		a := randomID(r)
		var b objectid.ObjectID
		switch r.IntN(4) {
		case 0: // unrelated ids, mostly different seconds
			b = randomID(r)
		case 1: // adjacent seconds, arbitrary tails
			b = randomID(r)
			binary.BigEndian.PutUint32(b[0:4], a.Seconds()+1)
		case 2: // same second, differ in the random value or the counter
			b = a
			b[4+r.IntN(8)] ^= byte(1 + r.IntN(255))
		case 3: // same second and random value, counters one apart
			b = a
			c := binary.BigEndian.Uint64(b[4:12])
			binary.BigEndian.PutUint64(b[4:12], c+1)
		}
		check(a, b)
		check(b, a)
	}
	// Bit positions around the rand_a/rand_b split (bit 52 of V) and the
	// 10 zero bits must all be order-carrying.
	base := objectid.MustParse("6553f1003f2a91c8d4003039")
	for bit := range 64 {
		b := base
		v := binary.BigEndian.Uint64(b[4:12]) ^ 1<<bit
		binary.BigEndian.PutUint64(b[4:12], v)
		check(base, b)
	}
}

func TestUUIDv7BoundsDoNotOverlap(t *testing.T) {
	// Consecutive seconds give adjacent, disjoint ranges, so a scan over
	// the bounds of one second never picks up ids of another.
	for _, s := range []uint32{0, 1, 1700000000, 0xFFFFFFFE} {
		a, _ := objectid.FromParts(s, 0, 0)
		b, _ := objectid.FromParts(s+1, 0, 0)
		_, hiA := a.UUIDv7Bounds()
		loB, _ := b.UUIDv7Bounds()
		if bytes.Compare(hiA[:], loB[:]) >= 0 {
			t.Errorf("second %d: hi %s >= next lo %s", s, canonical(hiA), canonical(loB))
		}
		top, _ := objectid.FromParts(s, objectid.MaxRandom, objectid.MaxCounter)
		if u := top.UUIDv7(); bytes.Compare(u[:], loB[:]) >= 0 {
			t.Errorf("second %d: largest id maps to %s, not below the next second", s, canonical(u))
		}
	}
}

func TestFromUUIDv7Rejects(t *testing.T) {
	good := objectid.MustParse("6553f1003f2a91c8d4003039").UUIDv7()
	mutate := func(f func(u *[16]byte)) [16]byte {
		u := good
		f(&u)
		return u
	}
	tests := []struct {
		name string
		u    [16]byte
	}{
		{"version 4", mutate(func(u *[16]byte) { u[6] = 0x40 | u[6]&0x0f })},
		{"version 8", mutate(func(u *[16]byte) { u[6] = 0x80 | u[6]&0x0f })},
		{"variant 11", mutate(func(u *[16]byte) { u[8] |= 0xc0 })},
		{"variant 0", mutate(func(u *[16]byte) { u[8] &= 0x3f })},
		{"ms not a whole second", mutate(func(u *[16]byte) { u[5]++ })},
		{"low bit set", mutate(func(u *[16]byte) { u[15] |= 1 })},
		{"bit 9 set", mutate(func(u *[16]byte) { u[14] |= 2 })},
		{"seconds beyond 2^32", func() [16]byte {
			var u [16]byte
			binary.BigEndian.PutUint64(u[0:8], (1<<32*1000)<<16|0x7000)
			u[8] = 0x80
			return u
		}()},
		{"1 ms after the epoch", func() [16]byte { lo, _ := objectid.Nil.UUIDv7Bounds(); lo[5] = 1; return lo }()},
		{"upper bound of a second", func() [16]byte { _, hi := objectid.Nil.UUIDv7Bounds(); return hi }()},
		{"all zero", [16]byte{}},
	}
	for _, tt := range tests {
		id, err := objectid.FromUUIDv7(tt.u)
		if !errors.Is(err, objectid.ErrInvalid) || id != objectid.Nil {
			t.Errorf("%s: FromUUIDv7(%s) = %s, %v; want ErrInvalid", tt.name, canonical(tt.u), id, err)
		}
	}
	// A lower bound is itself what Nil-tailed ids of that second map to.
	lo, _ := objectid.FromTime(objectid.MustParse("6553f1003f2a91c8d4003039").Timestamp()).UUIDv7Bounds()
	if id, err := objectid.FromUUIDv7(lo); err != nil || id.Hex() != "6553f1000000000000000000" {
		t.Errorf("FromUUIDv7(lo) = %s, %v", id, err)
	}
}
