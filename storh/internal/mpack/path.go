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
