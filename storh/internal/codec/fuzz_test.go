package codec_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/codec"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// kitchen has a field of every kind the decoder handles.
type kitchen struct {
	S    string             `msgpack:"s"`
	I8   int8               `msgpack:"i8"`
	U16  uint16             `msgpack:"u16"`
	I    int                `msgpack:"i"`
	F32  float32            `msgpack:"f32"`
	F    float64            `msgpack:"f"`
	B    bool               `msgpack:"b"`
	Bin  []byte             `msgpack:"bin"`
	A3   [3]byte            `msgpack:"a3"`
	Arr  [2]int16           `msgpack:"arr"`
	T    time.Time          `msgpack:"t"`
	U    uuidv7.UUID        `msgpack:"u"`
	O    *objectid.ObjectID `msgpack:"o"`
	Any  any                `msgpack:"any"`
	M    map[string]any     `msgpack:"m"`
	MS   map[string]string  `msgpack:"ms"`
	MI   map[string][]int   `msgpack:"mi"`
	L    []any              `msgpack:"l"`
	LS   []string           `msgpack:"ls"`
	Kids []kitchen          `msgpack:"kids"`
	Next *kitchen           `msgpack:"next"`
	Txt  textOnly           `msgpack:"txt"`
	Err  error              `msgpack:"err"`
	Emb
}

type Emb struct {
	E  string `msgpack:"e"`
	EP *Emb   `msgpack:"ep"`
}

func fuzzSeeds(f *testing.F) {
	p := samplePost()
	f.Add(enc(f, &p))
	f.Add(enc(f, map[string]any{}))
	f.Add(enc(f, kitchen{S: "s", I8: -3, Bin: []byte{1}, Kids: []kitchen{{S: "k"}}, Next: &kitchen{I: 7}, Any: []any{1, "x"},
		M: map[string]any{"a": map[string]any{"b": nil}}, MI: map[string][]int{"x": {1, 2}}, U: uuidv7.New(), Emb: Emb{E: "e"}}))
	f.Add(enc(f, map[string]any{"i8": 300, "f32": 1e300, "a3": []byte{1, 2}, "u": []byte{1}, "t": "x", "kids": map[string]any{}}))
	f.Add(hx("81a16291c1"))
	f.Add(hx("81a161d40500"))
	f.Add(hx("82a16101a16102"))
}

// FuzzDecode: decoding arbitrary bytes into any target never panics, and
// every error wraps ErrType or one of mpack's sentinels; into
// map[string]any it agrees with mpack.DecodeMap; what decodes into a
// struct encodes again into a valid record.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(target any) error {
			err := codec.Decode(b, target)
			if err != nil && !errors.Is(err, codec.ErrType) && !errors.Is(err, mpack.ErrMalformed) &&
				!errors.Is(err, mpack.ErrTooDeep) && !errors.Is(err, mpack.ErrUnsupported) {
				t.Fatalf("Decode into %T: error %v wraps no sentinel", target, err)
			}
			return err
		}
		var k kitchen
		if check(&k) == nil {
			out, err := codec.AppendRecord(nil, &k, 0)
			if err != nil {
				t.Fatalf("re-encoding %+v: %v", k, err)
			}
			if sorted, err := mpack.ValidateRecordSorted(out); err != nil || !sorted {
				t.Fatalf("re-encoded %x: %v, %v", out, sorted, err)
			}
		}
		var p post
		check(&p)
		var m map[string]any
		err := check(&m)
		want, werr := mpack.DecodeMap(b)
		if werr == nil {
			if err != nil {
				t.Fatalf("codec rejects what DecodeMap accepts: %v", err)
			}
			if fmt.Sprintf("%#v", m) != fmt.Sprintf("%#v", want) {
				t.Fatalf("codec %#v\nmpack %#v", m, want)
			}
		}
		var mi map[string]int8
		check(&mi)
		var a any
		check(&a)
	})
}

// FuzzRoundTrip: every record mpack accepts encodes, from its normalised
// form, into a record that decodes back to the same form, and decoding
// that into a struct and encoding again is a fixed point.
func FuzzRoundTrip(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := mpack.DecodeMap(b)
		if err != nil {
			return
		}
		out, err := codec.AppendRecord(nil, m, 0)
		if err != nil {
			t.Fatalf("AppendRecord(DecodeMap(%x)): %v", b, err)
		}
		if sorted, err := mpack.ValidateRecordSorted(out); err != nil || !sorted {
			t.Fatalf("%x: %v, %v", out, sorted, err)
		}
		back, err := mpack.DecodeMap(out)
		if err != nil || fmt.Sprintf("%#v", back) != fmt.Sprintf("%#v", m) {
			t.Fatalf("round trip %#v, %v; want %#v", back, err, m)
		}
		var k kitchen
		if codec.Decode(out, &k) != nil {
			return
		}
		one, err := codec.AppendRecord(nil, &k, 0)
		if err != nil {
			t.Fatal(err)
		}
		var k2 kitchen
		if err := codec.Decode(one, &k2); err != nil {
			t.Fatal(err)
		}
		two, err := codec.AppendRecord(nil, &k2, 0)
		if err != nil || !bytes.Equal(one, two) {
			t.Fatalf("not a fixed point: %x then %x (%v)", one, two, err)
		}
	})
}
