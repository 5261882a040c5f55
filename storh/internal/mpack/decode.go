package mpack

import "math"

// Decode decodes the first value of b into the normalised form and returns it
// with the number of bytes consumed. The normalised form is:
//
//	nil, bool
//	int64          every integer, whatever its msgpack width or signedness
//	uint64         only integers above math.MaxInt64
//	float64        float32 is widened
//	string         str, copied out of b
//	[]byte         bin, copied out of b
//	time.Time      timestamp extension, in UTC
//	uuidv7.UUID    storh's UUID extension (ExtUUID)
//	objectid.ObjectID  storh's ObjectID extension (ExtObjectID)
//	[]any, map[string]any
//
// Decode applies the same rules as ValidateRecord to the value (string and
// unique map keys, MaxDepth, no extension but timestamps) and never returns
// memory that aliases b, so b may be reused or unmapped afterwards.
func Decode(b []byte) (any, int, error) {
	return DecodeIn(b, nil)
}

// DecodeIn is Decode that boxes numbers and strings, and cuts lists, from
// slab (see Slab); with nil, a slab of its own sized to b is made when the
// first value needs one.
func DecodeIn(b []byte, slab *Slab) (any, int, error) {
	if slab != nil {
		slab.mu.Lock()
		defer slab.mu.Unlock()
	}
	d := decoder{b: b, slab: slab}
	if len(b) > 0 && len(b) <= sharedMax && (b[0] >= 0x80 && b[0] <= 0x9f || b[0] >= 0xdc && b[0] <= 0xdf) {
		d.s = string(b) // a container: its keys and strings share one copy
	}
	v, end, err := d.value(0, 1)
	if err != nil {
		return nil, 0, err
	}
	return v, end, nil
}

// DecodeMap decodes a whole record payload: exactly one map, no trailing
// bytes. It accepts exactly the inputs ValidateRecord accepts.
func DecodeMap(b []byte) (map[string]any, error) {
	return DecodeMapIn(b, nil)
}

// DecodeMapIn is DecodeMap with the boxes of slab (see DecodeIn).
func DecodeMapIn(b []byte, slab *Slab) (map[string]any, error) {
	if err := isMap(b); err != nil {
		return nil, err
	}
	v, end, err := DecodeIn(b, slab)
	if err != nil {
		return nil, err
	}
	if err := trailing(b, end); err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// sharedMax is the largest container whose keys and strings are all cut from
// one copy of the input. One allocation instead of one per key and string
// value makes decoding a typical record markedly cheaper; the bound limits how
// much memory a single retained string can pin.
const sharedMax = 4 << 10

type decoder struct {
	b    []byte
	s    string // string(b) for a container of at most sharedMax bytes, else ""
	slab *Slab  // made by boxes when nil
}

// boxes returns the slab values are boxed in, making one for this value
// alone the first time one is needed.
func (d *decoder) boxes() *Slab {
	if d.slab == nil {
		d.slab = &Slab{one: true, size: len(d.b)}
	}
	return d.slab
}

// str returns the n bytes at b[p:] as a string that does not alias b.
func (d *decoder) str(p, n int) string {
	if d.s != "" {
		return d.s[p : p+n]
	}
	return string(d.b[p : p+n])
}

func (d *decoder) value(pos, depth int) (any, int, error) {
	b := d.b
	h, err := readHead(b, pos)
	if err != nil {
		return nil, 0, err
	}
	p := pos + h.size // payload or first element
	switch h.k {
	case kNil:
		return nil, p, nil
	case kFalse, kTrue:
		return h.k == kTrue, p, nil
	case kInt, kUint:
		switch {
		case h.u < 256: // an int64 the runtime boxes without allocating
			return int64(h.u), p, nil
		case h.k == kUint && h.u > math.MaxInt64:
			return d.boxes().uint64(h.u), p, nil
		}
		return d.boxes().int64(int64(h.u)), p, nil
	case kFloat32:
		return d.boxes().float64(float64(math.Float32frombits(uint32(h.u)))), p, nil
	case kFloat64:
		return d.boxes().float64(math.Float64frombits(h.u)), p, nil
	case kStr:
		return d.boxes().string(d.str(p, h.n)), p + h.n, nil
	case kBin:
		return append([]byte{}, b[p:p+h.n]...), p + h.n, nil
	case kExt:
		v, err := extValue(h.ext, b[p:p+h.n], p)
		if err != nil {
			return nil, 0, err
		}
		return v, p + h.n, nil
	}
	if depth > MaxDepth {
		return nil, 0, tooDeepAt(pos)
	}
	if h.k == kArray {
		a := d.boxes().list(h.n) // h.n is bounded by the input length
		for i := range a {
			if a[i], p, err = d.value(p, depth+1); err != nil {
				return nil, 0, err
			}
		}
		return a, p, nil
	}
	m := make(map[string]any, h.n)
	for i := 0; i < h.n; i++ {
		key, next, err := mapKey(b, p)
		if err != nil {
			return nil, 0, err
		}
		var v any
		if v, p, err = d.value(next, depth+1); err != nil {
			return nil, 0, err
		}
		// A map that does not grow has just overwritten a duplicate key;
		// checking that is cheaper than a lookup before every insert.
		m[d.str(next-len(key), len(key))] = v
		if len(m) != i+1 {
			return nil, 0, duplicate(key, next-len(key))
		}
	}
	return m, p, nil
}
