package mpack

// FieldPath returns the raw bytes of the value at path inside the map
// payload b: the first segment is a key of b, each next one a key of the map
// the previous one led to. A missing key, or a segment that meets a value
// that is not a map, gives ok false. Like Field it reads only as far as it
// must, does not validate what it skips, and allocates nothing.
func FieldPath(b []byte, path []string) (raw []byte, ok bool, err error) {
	raw = b
	for i, seg := range path {
		if i > 0 && !IsMap(raw) {
			return nil, false, nil
		}
		if raw, ok, err = Field(raw, seg); err != nil || !ok {
			return nil, false, err
		}
	}
	return raw, true, nil
}

// IsMap reports whether the raw value starts with a map header.
func IsMap(raw []byte) bool {
	return len(raw) > 0 && (raw[0] >= 0x80 && raw[0] <= 0x8f || raw[0] == 0xde || raw[0] == 0xdf)
}

// Elements calls fn with the raw bytes of each element of the array raw,
// in order, until fn returns false. isArray is false (and fn is never
// called) when raw is not an array.
func Elements(raw []byte, fn func(elem []byte) bool) (isArray bool, err error) {
	h, err := readHead(raw, 0)
	if err != nil {
		return false, err
	}
	if h.k != kArray {
		return false, nil
	}
	pos := h.size
	for i := 0; i < h.n; i++ {
		end, ok := skipFast(raw, pos)
		if !ok {
			size, err := Skip(raw[pos:])
			if err != nil {
				return true, err
			}
			end = pos + size
		}
		if !fn(raw[pos:end:end]) {
			return true, nil
		}
		pos = end
	}
	return true, nil
}

// PathValues calls fn with the raw bytes of every value path reaches in
// the map payload b, until fn returns false. A segment that meets a map
// goes on into it; one that meets a list goes on into each element that is
// a map (MongoDB's rule), so "items.sku" reaches the sku of every item.
// An element that is not a map, a list inside a list included, reaches
// nothing, and neither does a scalar met before the last segment. fanned
// reports whether the walk met a list before the last segment, so that
// the path may reach several values. Like FieldPath it reads only as far as it must and does not
// validate what it skips.
func PathValues(b []byte, path []string, fn func(raw []byte) bool) (fanned bool, err error) {
	w := pathWalk{fn: fn}
	err = w.walk(b, path)
	return w.fanned, err
}

type pathWalk struct {
	fn      func(raw []byte) bool
	fanned  bool
	stopped bool
}

// walk follows path from the map m.
func (w *pathWalk) walk(m []byte, path []string) error {
	for i, seg := range path {
		raw, ok, err := Field(m, seg)
		if err != nil || !ok {
			return err
		}
		if i == len(path)-1 {
			w.stopped = !w.fn(raw)
			return nil
		}
		if IsMap(raw) {
			m = raw
			continue
		}
		rest := path[i+1:]
		var walkErr error
		isArray, err := Elements(raw, func(elem []byte) bool {
			if IsMap(elem) {
				walkErr = w.walk(elem, rest)
			}
			return walkErr == nil && !w.stopped
		})
		w.fanned = w.fanned || isArray
		if err == nil {
			err = walkErr
		}
		return err
	}
	return nil
}
