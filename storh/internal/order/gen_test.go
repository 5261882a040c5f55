package order_test

import (
	"encoding/binary"
	"math"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/internal/order"
)

// The generators draw normalised values (int64, uint64 only above
// math.MaxInt64, float64, ...) with their weight on the boundaries of the
// order: integers near ±2^53, ±2^62, ±2^63 and the largest uint64, floats
// next to them and to integers, NaN, infinities, zeros and subnormals,
// strings over a tiny alphabet holding 0x00 and 0xFF (so that they share
// prefixes), times across the whole range of time.Time, nested lists and
// maps.

var intBases = []int64{0, 1 << 32, -(1 << 32), 1 << 53, -(1 << 53), 1 << 62, -(1 << 62), math.MaxInt64, math.MinInt64}

// genInt draws an integer in normalised form.
func genInt(t *rapid.T) any {
	switch rapid.IntRange(0, 3).Draw(t, "intForm") {
	case 0:
		base := rapid.SampledFrom(intBases).Draw(t, "base")
		d := rapid.Int64Range(-3000, 3000).Draw(t, "delta")
		if x := base + d; (d > 0) == (x > base) || d == 0 {
			return x
		}
		return base
	case 1:
		return rapid.Int64().Draw(t, "int")
	case 2:
		switch rapid.IntRange(0, 2).Draw(t, "uintForm") {
		case 0:
			return uint64(1<<63) + rapid.Uint64Range(0, 5000).Draw(t, "up")
		case 1:
			return uint64(math.MaxUint64) - rapid.Uint64Range(0, 5000).Draw(t, "down")
		}
		return rapid.Uint64Range(1<<63, math.MaxUint64).Draw(t, "uint")
	}
	return rapid.Int64Range(-5, 5).Draw(t, "small")
}

var specialFloats = []float64{
	math.NaN(), math.Float64frombits(0xFFF8000000000001), math.Float64frombits(0x7FF0000000000001),
	math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1),
	math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
	0x1p-1022, -0x1p-1022, 0x1p53, -0x1p53, 0x1p63, -0x1p63, 0x1p64, -0x1p64,
}

// genFloat draws a float64.
func genFloat(t *rapid.T) float64 {
	switch rapid.IntRange(0, 5).Draw(t, "floatForm") {
	case 0:
		return rapid.SampledFrom(specialFloats).Draw(t, "special")
	case 1:
		return math.Float64frombits(rapid.Uint64().Draw(t, "bits"))
	case 2: // next to an integer, often one float64 cannot hold
		var f float64
		switch x := genInt(t).(type) {
		case int64:
			f = float64(x)
		case uint64:
			f = float64(x)
		}
		for k := rapid.IntRange(-2, 2).Draw(t, "ulps"); k != 0; {
			if k > 0 {
				f, k = math.Nextafter(f, math.Inf(1)), k-1
			} else {
				f, k = math.Nextafter(f, math.Inf(-1)), k+1
			}
		}
		return f
	case 3:
		return float64(rapid.IntRange(-10, 10).Draw(t, "halves")) / 2
	case 4: // a stored float32, widened
		return float64(math.Float32frombits(rapid.Uint32().Draw(t, "bits32")))
	}
	sub := math.Float64frombits(rapid.Uint64Range(1, 1<<52-1).Draw(t, "subnormal"))
	if rapid.Bool().Draw(t, "negative") {
		sub = -sub
	}
	return sub
}

func genNumber(t *rapid.T) any {
	if rapid.Bool().Draw(t, "isFloat") {
		return genFloat(t)
	}
	return genInt(t)
}

var alphabet = []byte{0x00, 0x01, 'a', 'b', 0xFF}

// genString draws a short string over an alphabet of 0x00, 0x01, a, b and
// 0xFF, or sometimes any string.
func genString(t *rapid.T, label string) string {
	if rapid.IntRange(0, 7).Draw(t, label+"Any") == 0 {
		return rapid.String().Draw(t, label)
	}
	b := rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, 6).Draw(t, label)
	return string(b)
}

// genTime draws an instant anywhere in time.Time's range, with its weight
// near the Unix epoch, the msgpack timestamp forms and the ends of the
// range, in a random zone.
func genTime(t *rapid.T) time.Time {
	var sec int64
	switch rapid.IntRange(0, 4).Draw(t, "timeForm") {
	case 0:
		sec = rapid.Int64Range(-1<<35, 1<<35).Draw(t, "sec")
	case 1:
		sec = rapid.Int64().Draw(t, "anySec")
	case 2: // the ends of time.Time, where Unix seconds wrap
		sec = math.MaxInt64 - order.UnixToInternal + rapid.Int64Range(-3, 3).Draw(t, "edge")
	case 3:
		sec = rapid.SampledFrom([]int64{0, -1, 1<<32 - 1, 1 << 32, 1<<34 - 1, 1 << 34, math.MinInt64, math.MaxInt64}).Draw(t, "boundary")
	default:
		sec = rapid.Int64Range(-5, 5).Draw(t, "smallSec")
	}
	nsec := rapid.SampledFrom([]int64{0, 1, 999_999_999, -1}).Draw(t, "nsecForm")
	if nsec < 0 {
		nsec = rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")
	}
	tm := time.Unix(sec, nsec).UTC()
	if rapid.Bool().Draw(t, "zoned") {
		tm = tm.In(zone)
	}
	return tm
}

// genScalar draws a value of any class but lists and maps.
func genScalar(t *rapid.T) any {
	switch rapid.IntRange(0, 7).Draw(t, "scalarKind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2, 3:
		return genNumber(t)
	case 4:
		return genString(t, "string")
	case 5:
		return []byte(genString(t, "bytes"))
	}
	return genTime(t)
}

// genValue draws a value of any class, containers at most depth levels
// deep.
func genValue(t *rapid.T, depth int) any {
	if depth <= 0 || rapid.IntRange(0, 3).Draw(t, "container") != 0 {
		return genScalar(t)
	}
	n := rapid.IntRange(0, 4).Draw(t, "len")
	if rapid.Bool().Draw(t, "isMap") {
		m := make(map[string]any, n)
		for i := 0; i < n; i++ {
			m[genString(t, "key")] = genValue(t, depth-1)
		}
		return m
	}
	l := make([]any, n)
	for i := range l {
		l[i] = genValue(t, depth-1)
	}
	return l
}

// genNear draws a value close to v in the order: v itself, v under
// another Go type, or v nudged a little, so that pairs often share
// prefixes and values and exercise the deciding bytes of the keys.
func genNear(t *rapid.T, v any, depth int) any {
	switch rapid.IntRange(0, 5).Draw(t, "nearForm") {
	case 0:
		return v
	case 1:
		return genValue(t, depth)
	}
	switch x := v.(type) {
	case int64:
		switch rapid.IntRange(0, 2).Draw(t, "intNear") {
		case 0:
			return float64(x) // the nearest float64, often of another value
		case 1:
			if d := rapid.Int64Range(-2, 2).Draw(t, "d"); (d > 0) == (x+d > x) || d == 0 {
				return x + d
			}
		}
		if x >= 0 {
			return uint64(x) // not normalised: Compare and Append take it
		}
		return int(x)
	case uint64:
		if rapid.Bool().Draw(t, "toFloat") {
			return float64(x)
		}
		if x > 1<<63 {
			return x - 1
		}
		return int64(math.MaxInt64)
	case float64:
		switch rapid.IntRange(0, 2).Draw(t, "floatNear") {
		case 0:
			if x == math.Trunc(x) && math.Abs(x) < 0x1p63 {
				return int64(x)
			}
			if x == math.Trunc(x) && x >= 0 && x < 0x1p64 {
				return uint64(x)
			}
		case 1:
			if f := float32(x); float64(f) == x {
				return f
			}
		}
		return math.Nextafter(x, genFloat(t))
	case string:
		return string(nearBytes(t, []byte(x)))
	case []byte:
		return nearBytes(t, x)
	case time.Time:
		d := rapid.SampledFrom([]time.Duration{-time.Second, -1, 1, time.Second}).Draw(t, "dt")
		return x.Add(d)
	case []any:
		l := slices.Clone(x)
		switch op := rapid.IntRange(0, 2).Draw(t, "listNear"); {
		case op == 0 || len(l) == 0:
			l = append(l, genValue(t, depth-1))
		case op == 1:
			l = l[:rapid.IntRange(0, len(l)-1).Draw(t, "cut")]
		default:
			i := rapid.IntRange(0, len(l)-1).Draw(t, "at")
			l[i] = genNear(t, l[i], depth-1)
		}
		return l
	case map[string]any:
		m := make(map[string]any, len(x)+1)
		for k, e := range x {
			m[k] = e
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		switch op := rapid.IntRange(0, 2).Draw(t, "mapNear"); {
		case op == 0 || len(keys) == 0:
			m[genString(t, "newKey")] = genValue(t, depth-1)
		case op == 1:
			delete(m, rapid.SampledFrom(keys).Draw(t, "drop"))
		default:
			k := rapid.SampledFrom(keys).Draw(t, "change")
			m[k] = genNear(t, m[k], depth-1)
		}
		return m
	}
	return genValue(t, depth)
}

// nearBytes extends, cuts or changes one byte of b, on a new slice.
func nearBytes(t *rapid.T, b []byte) []byte {
	b = slices.Clone(b)
	if b == nil {
		b = []byte{}
	}
	switch op := rapid.IntRange(0, 2).Draw(t, "bytesNear"); {
	case op == 0 || len(b) == 0:
		return append(b, rapid.SampledFrom(alphabet).Draw(t, "extra"))
	case op == 1:
		return b[:rapid.IntRange(0, len(b)-1).Draw(t, "cut")]
	default:
		b[rapid.IntRange(0, len(b)-1).Draw(t, "at")] = rapid.SampledFrom(alphabet).Draw(t, "byte")
		return b
	}
}

// genID draws the 16 bytes an index key ends with.
func genID(t *rapid.T) []byte {
	id := make([]byte, 16)
	binary.BigEndian.PutUint64(id, rapid.Uint64().Draw(t, "idHi"))
	binary.BigEndian.PutUint64(id[8:], rapid.Uint64().Draw(t, "idLo"))
	if rapid.Bool().Draw(t, "idExtreme") {
		fill := rapid.SampledFrom([]byte{0x00, 0xFF}).Draw(t, "idFill")
		for i := range id {
			id[i] = fill
		}
	}
	return id
}

// writeMsgpack appends v in msgpack, choosing at random among the
// encodings the format allows for it: any integer width (signed or
// unsigned) that holds the value, float32 for a float64 it holds exactly,
// every str, bin, array and map header that fits, every timestamp form that
// holds the instant, and map entries in random order.
func writeMsgpack(t *rapid.T, dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, 0xc0)
	case bool:
		if x {
			return append(dst, 0xc3)
		}
		return append(dst, 0xc2)
	case int64:
		return writeInt(t, dst, x)
	case uint64:
		return binary.BigEndian.AppendUint64(append(dst, 0xcf), x)
	case float64:
		if f := float32(x); (float64(f) == x || x != x) && rapid.Bool().Draw(t, "asFloat32") {
			return binary.BigEndian.AppendUint32(append(dst, 0xca), math.Float32bits(f))
		}
		return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(x))
	case string:
		return append(writeLen(t, dst, len(x), 0xa0, 31, 0xd9), x...)
	case []byte:
		return append(writeLen(t, dst, len(x), 0, -1, 0xc4), x...)
	case time.Time:
		sec, nsec := x.Unix(), uint64(x.Nanosecond())
		form := rapid.IntRange(0, 3).Draw(t, "tsForm")
		switch {
		case form == 0 && nsec == 0 && sec >= 0 && sec < 1<<32:
			return binary.BigEndian.AppendUint32(append(dst, 0xd6, 0xff), uint32(sec))
		case form == 1 && nsec == 0 && sec >= 0 && sec < 1<<32:
			return binary.BigEndian.AppendUint32(append(dst, 0xc7, 4, 0xff), uint32(sec))
		case form == 2 && sec >= 0 && sec < 1<<34:
			return binary.BigEndian.AppendUint64(append(dst, 0xd7, 0xff), nsec<<34|uint64(sec))
		}
		dst = binary.BigEndian.AppendUint32(append(dst, 0xc7, 12, 0xff), uint32(nsec))
		return binary.BigEndian.AppendUint64(dst, uint64(sec))
	case []any:
		dst = writeLen(t, dst, len(x), 0x90, 15, 0xdc-1)
		for _, e := range x {
			dst = writeMsgpack(t, dst, e)
		}
		return dst
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		keys = rapid.Permutation(keys).Draw(t, "entryOrder")
		dst = writeLen(t, dst, len(x), 0x80, 15, 0xde-1)
		for _, k := range keys {
			dst = append(writeLen(t, dst, len(k), 0xa0, 31, 0xd9), k...)
			dst = writeMsgpack(t, dst, x[k])
		}
		return dst
	}
	panic("writeMsgpack: not normalised")
}

// writeInt writes x in a random integer encoding that holds it.
func writeInt(t *rapid.T, dst []byte, x int64) []byte {
	type form struct {
		code     byte
		w        int
		min, max int64
	}
	forms := []form{
		{0xd0, 1, math.MinInt8, math.MaxInt8}, {0xd1, 2, math.MinInt16, math.MaxInt16},
		{0xd2, 4, math.MinInt32, math.MaxInt32}, {0xd3, 8, math.MinInt64, math.MaxInt64},
		{0xcc, 1, 0, math.MaxUint8}, {0xcd, 2, 0, math.MaxUint16},
		{0xce, 4, 0, math.MaxUint32}, {0xcf, 8, 0, math.MaxInt64},
		{0x00, 0, 0, 127}, {0xe0, 0, -32, -1}, // fixints
	}
	var ok []form
	for _, f := range forms {
		if x >= f.min && x <= f.max {
			ok = append(ok, f)
		}
	}
	f := rapid.SampledFrom(ok).Draw(t, "intEncoding")
	if f.w == 0 {
		return append(dst, byte(x))
	}
	dst = append(dst, f.code)
	for i := f.w - 1; i >= 0; i-- {
		dst = append(dst, byte(uint64(x)>>(8*i)))
	}
	return dst
}

// writeLen writes a header for n: fix|n when n <= fixMax (fixMax -1: no
// fix form), else, or at random, code8 (a 1-byte length) where it fits,
// code16 or code32 (lengths 2 and 4 bytes), whose codes follow code8. For
// arrays and maps, which have no 1-byte form, pass code8 = code16 - 1.
func writeLen(t *rapid.T, dst []byte, n int, fix byte, fixMax int, code8 byte) []byte {
	arrayOrMap := code8 == 0xdc-1 || code8 == 0xde-1
	var choices []int
	if n <= fixMax {
		choices = append(choices, 0)
	}
	if n <= 0xff && !arrayOrMap {
		choices = append(choices, 1)
	}
	if n <= 0xffff {
		choices = append(choices, 2)
	}
	choices = append(choices, 4)
	switch rapid.SampledFrom(choices).Draw(t, "lenForm") {
	case 0:
		return append(dst, fix|byte(n))
	case 1:
		return append(dst, code8, byte(n))
	case 2:
		return binary.BigEndian.AppendUint16(append(dst, code8+1), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, code8+2), uint32(n))
}
