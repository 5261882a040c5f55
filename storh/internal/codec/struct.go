package codec

import (
	"reflect"
	"unsafe"
)

// structPlan is how a struct type is encoded and decoded: its fields in
// the order of the encoded map (ascending byte order of their names), each
// with its offset and codec.
type structPlan struct {
	t       reflect.Type
	fields  []sfield
	hdr     []byte // the map header, when no field can be left out
	mayOmit bool   // some field has omitempty/omitzero or sits behind an embedded pointer
	asArray bool   // _msgpack:",as_array": left to the library
	// Lookup of a key that is not the field the decoder expects next:
	// linear over names for a few fields, else a map (Go's map lookup
	// with string(key) does not allocate).
	names  []string // names and aliases, parallel to nameAt
	nameAt []int32
	lookup map[string]int32
}

// linearMax is the number of names up to which a linear scan beats a map
// lookup.
const linearMax = 8

type sfield struct {
	name      string
	key       []byte      // the encoded key: str header and name
	embed     []embedStep // embedded pointers to follow before off
	off       uintptr
	c         *Codec
	omitEmpty bool
	omitZero  bool
}

// embedStep is an embedded pointer on the way to a promoted field: at off
// in the struct reached so far, pointing to a struct of type elem.
type embedStep struct {
	off  uintptr
	elem reflect.Type
}

func (bd *builder) structPlan(t reflect.Type) *structPlan {
	// Structs tagged as_array are encoded by the library, but their fields
	// still decide whether one is empty (omitempty).
	sp := &structPlan{t: t, asArray: structOptions(t)}
	infos := structFields(t)
	sp.fields = make([]sfield, len(infos))
	for i, fi := range infos {
		f := &sp.fields[i]
		f.name = fi.name
		f.key = appendStr(nil, fi.name)
		f.omitEmpty, f.omitZero = fi.omitEmpty, fi.omitZero
		cur := t
		for j, idx := range fi.index {
			sf := cur.Field(idx)
			f.off += sf.Offset
			if j == len(fi.index)-1 {
				break
			}
			cur = sf.Type
			if cur.Kind() == reflect.Pointer {
				cur = cur.Elem()
				f.embed = append(f.embed, embedStep{off: f.off, elem: cur})
				f.off = 0
			}
		}
		f.c = bd.codec(fi.typ)
		if f.omitEmpty || f.omitZero || f.embed != nil {
			sp.mayOmit = true
		}
		n := int32(i)
		for _, name := range append([]string{fi.name}, fi.aliases...) {
			sp.names = append(sp.names, name)
			sp.nameAt = append(sp.nameAt, n)
		}
	}
	if len(sp.names) > linearMax {
		sp.lookup = make(map[string]int32, len(sp.names))
		for i, name := range sp.names {
			sp.lookup[name] = sp.nameAt[i]
		}
	}
	if !sp.mayOmit {
		sp.hdr = appendMapLen(nil, len(sp.fields))
	}
	return sp
}

// ptr returns the address of the field in the struct at p, or false when
// an embedded pointer on the way is nil.
func (f *sfield) ptr(p unsafe.Pointer) (unsafe.Pointer, bool) {
	for _, st := range f.embed {
		p = *(*unsafe.Pointer)(unsafe.Add(p, st.off))
		if p == nil {
			return nil, false
		}
	}
	return unsafe.Add(p, f.off), true
}

// ptrAlloc is ptr for the decoder: nil embedded pointers are allocated.
func (f *sfield) ptrAlloc(p unsafe.Pointer) unsafe.Pointer {
	for _, st := range f.embed {
		pp := (*unsafe.Pointer)(unsafe.Add(p, st.off))
		if *pp == nil {
			*pp = reflect.New(st.elem).UnsafePointer()
		}
		p = *pp
	}
	return unsafe.Add(p, f.off)
}

// omitted reports whether the field is left out of the encoding of the
// struct at p.
func (f *sfield) omitted(p unsafe.Pointer) bool {
	fp, ok := f.ptr(p)
	return !ok || f.omitEmpty && f.c.empty(fp) || f.omitZero && f.c.zero(fp)
}

func (sp *structPlan) encode(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
	if tooDeep(lv) {
		return b, errTooDeep()
	}
	fields := sp.fields
	var skip uint64 // bit i: field i is omitted (the first 64 fields)
	var skipMore []bool
	if sp.mayOmit {
		if len(fields) > 64 {
			skipMore = make([]bool, len(fields))
		}
		n := 0
		for i := range fields {
			switch {
			case !fields[i].omitted(p):
				n++
			case i < 64:
				skip |= 1 << i
			default:
				skipMore[i] = true
			}
		}
		b = appendMapLen(b, n)
	} else {
		b = append(b, sp.hdr...)
	}
	next := deeper(lv)
	for i := range fields {
		f := &fields[i]
		if sp.mayOmit && (i < 64 && skip&(1<<i) != 0 || i >= 64 && skipMore[i]) {
			continue
		}
		fp := unsafe.Add(p, f.off)
		if f.embed != nil {
			fp, _ = f.ptr(p) // present: a nil embedded pointer omits the field
		}
		b = append(b, f.key...)
		if o := f.c.eop; o != opOther {
			b = appendScalar(b, o, fp)
		} else {
			var err error
			if b, err = f.c.enc(s, b, fp, next); err != nil {
				return b, atField(err, f.name)
			}
		}
		if len(b)-s.start > s.limit {
			return b, errTooLarge(len(b)-s.start, s.limit, false)
		}
	}
	return b, nil
}

// find returns the index of the field named key, or -1. hint is the field
// the decoder expects next: stored records have their keys in the order of
// the fields, so it is nearly always the one.
func (sp *structPlan) find(key []byte, hint int) int {
	if hint < len(sp.fields) && sp.fields[hint].name == string(key) {
		return hint
	}
	if sp.lookup != nil {
		if i, ok := sp.lookup[string(key)]; ok {
			return int(i)
		}
		return -1
	}
	for i, name := range sp.names {
		if name == string(key) {
			return int(sp.nameAt[i])
		}
	}
	return -1
}

func (sp *structPlan) decode(d *decState, p unsafe.Pointer, lv int) error {
	n, isNil, err := d.mapHead(sp.t)
	if err != nil {
		return err
	}
	if isNil {
		reflect.NewAt(sp.t, p).Elem().SetZero()
		return nil
	}
	if tooDeep(lv) {
		return errTooDeep()
	}
	next := deeper(lv)
	hint := 0
	for range n {
		key, err := d.key()
		if err != nil {
			return err
		}
		i := sp.find(key, hint)
		if i < 0 {
			if err := d.skip(); err != nil {
				return err
			}
			continue
		}
		hint = i + 1
		f := &sp.fields[i]
		fp := unsafe.Add(p, f.off)
		if f.embed != nil {
			fp = f.ptrAlloc(p)
		}
		if o := f.c.dop; o != opOther {
			err = d.decodeOp(o, f.c.t, fp)
		} else {
			err = f.c.dec(d, fp, next)
		}
		if err != nil {
			return atField(err, f.name)
		}
	}
	return nil
}
