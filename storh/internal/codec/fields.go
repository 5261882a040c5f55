package codec

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
)

// fieldInfo is one encoded field of a struct, after embedding and name
// conflicts are resolved.
type fieldInfo struct {
	name      string
	index     []int // reflect field index path from the outer struct
	typ       reflect.Type
	tagged    bool // the name came from a tag
	omitEmpty bool // omitempty: the library's emptiness rule
	omitZero  bool // omitzero: the zero value or IsZero() true
	aliases   []string
}

// tagInfo is a parsed struct tag: its name and options. Options of the
// form key:value keep their value ("alias:old").
type tagInfo struct {
	name    string
	options map[string]string
}

func (t tagInfo) has(opt string) bool {
	_, ok := t.options[opt]
	return ok
}

// parseTag splits a tag into its name and options, like the library's
// tagparser for the forms a record's tags use: name,opt,opt, and key:value
// options. Quoted values are not supported.
func parseTag(s string) tagInfo {
	var t tagInfo
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		key, value, isKV := strings.Cut(part, ":")
		if i == 0 && !isKV {
			t.name = part
			continue
		}
		if part == "" {
			continue
		}
		if t.options == nil {
			t.options = make(map[string]string)
		}
		if isKV {
			t.options[strings.TrimSpace(key)] = strings.TrimSpace(value)
		} else {
			t.options[part] = ""
		}
	}
	return t
}

// fieldTag returns the tag that names a field: the msgpack tag if the field
// has one (non-empty), else the json tag if it has one, else none.
func fieldTag(sf reflect.StructField) (tag tagInfo, fromJSON, ok bool) {
	if s := sf.Tag.Get("msgpack"); s != "" {
		return parseTag(s), false, true
	}
	if s, found := sf.Tag.Lookup("json"); found {
		return parseTag(s), true, true
	}
	return tagInfo{}, false, false
}

// skipped reports whether a tag excludes its field: msgpack's name "-" (the
// library's rule, "-," too), or json's exact "-" (json's "-," names the
// field "-").
func skipped(sf reflect.StructField, tag tagInfo, fromJSON bool) bool {
	if tag.name != "-" {
		return false
	}
	if fromJSON {
		return sf.Tag.Get("json") == "-"
	}
	return true
}

// structOptions reads the library's struct-wide settings from a field
// named _msgpack: omitempty for every field declared after it, and
// as_array, which this package leaves to the library.
func structOptions(t reflect.Type) (asArray bool) {
	if sf, ok := t.FieldByName("_msgpack"); ok && len(sf.Index) == 1 {
		tag := parseTag(sf.Tag.Get("msgpack"))
		return tag.has("as_array") || tag.has("asArray")
	}
	return false
}

// structFields lists the fields a struct type encodes, sorted by name (the
// order of the encoded map). It follows the msgpack library for what a tag
// means and which embedded structs are inlined, and encoding/json for
// conflicts between promoted fields:
//
//   - an exported field is encoded under its tag's name (msgpack tag, else
//     json tag), else under its Go name; "-" skips it;
//   - an embedded struct, or pointer to a struct, is inlined (its fields
//     promoted) unless its tag says noinline, it has its own encoding (a
//     Marshaler of any kind, time.Time), or its name comes from a json
//     tag; a msgpack tag's name does not stop inlining (the library's
//     rule), its inline option forces it;
//   - among fields of one name the shallowest wins; at equal depth a tagged
//     one beats untagged ones, and otherwise all of them are dropped.
func structFields(t reflect.Type) []fieldInfo {
	type queued struct {
		typ   reflect.Type
		index []int
	}
	var (
		fields        []fieldInfo
		current, next = []queued{}, []queued{{typ: t}}
		count         = map[reflect.Type]int{}
		nextCount     = map[reflect.Type]int{}
		visited       = map[reflect.Type]bool{}
	)
	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, q := range current {
			if visited[q.typ] {
				continue
			}
			visited[q.typ] = true
			structOmit := false
			for i := 0; i < q.typ.NumField(); i++ {
				sf := q.typ.Field(i)
				if sf.Name == "_msgpack" {
					structOmit = parseTag(sf.Tag.Get("msgpack")).has("omitempty")
					continue
				}
				tag, fromJSON, _ := fieldTag(sf)
				if skipped(sf, tag, fromJSON) {
					continue
				}
				index := append(slices.Clip(q.index), i)
				if sf.Anonymous {
					ft := sf.Type
					isPtr := ft.Kind() == reflect.Pointer
					if isPtr {
						ft = ft.Elem()
					}
					if inlines(sf, ft, isPtr, tag, fromJSON) {
						nextCount[ft]++
						if nextCount[ft] == 1 {
							next = append(next, queued{typ: ft, index: index})
						}
						continue
					}
				}
				if !sf.IsExported() {
					continue
				}
				f := fieldInfo{
					name:      tag.name,
					index:     index,
					typ:       sf.Type,
					tagged:    tag.name != "",
					omitEmpty: structOmit || tag.has("omitempty"),
					omitZero:  tag.has("omitzero"),
				}
				if f.name == "" {
					f.name = sf.Name
				}
				if alias, ok := tag.options["alias"]; ok && alias != "" && !fromJSON {
					f.aliases = []string{alias}
				}
				if fromJSON && tag.name != "" && tag.name != sf.Name {
					// The library ignored json tags: records it wrote have
					// the Go name, which decoding still accepts.
					f.aliases = append(f.aliases, sf.Name)
				}
				fields = append(fields, f)
				if count[q.typ] > 1 {
					// The same struct embedded twice at one depth: its
					// fields annihilate each other, as in encoding/json.
					fields = append(fields, fields[len(fields)-1])
				}
			}
		}
	}
	slices.SortStableFunc(fields, func(a, b fieldInfo) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	out := fields[:0]
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		group := fields[i:j]
		if len(group) == 1 || len(group[0].index) < len(group[1].index) || group[0].tagged != group[1].tagged {
			out = append(out, group[0])
		}
		i = j
	}
	// Aliases are extra names for decoding; a real field's name wins.
	names := make(map[string]bool, len(out))
	for _, f := range out {
		names[f.name] = true
	}
	for i := range out {
		kept := out[i].aliases[:0]
		for _, a := range out[i].aliases {
			if !names[a] {
				names[a] = true
				kept = append(kept, a)
			}
		}
		out[i].aliases = kept
	}
	return slices.Clip(out)
}

// inlines decides whether an embedded field's fields are promoted.
func inlines(sf reflect.StructField, ft reflect.Type, isPtr bool, tag tagInfo, fromJSON bool) bool {
	if ft.Kind() != reflect.Struct {
		return false
	}
	if !sf.IsExported() && isPtr {
		// A pointer to an unexported struct cannot be allocated by a
		// decoder outside its package; encoding/json ignores it too.
		return false
	}
	if tag.has("noinline") {
		return false
	}
	if tag.has("inline") {
		return true
	}
	if fromJSON && tag.name != "" {
		return false
	}
	return !hasOwnEncoding(ft)
}

// hasOwnEncoding reports whether values of struct type t are not encoded
// as their fields: time.Time, and types with a Marshaler or Unmarshaler of
// any kind the library honours (on t or *t). The library only inlines
// embedded structs that it would encode field by field.
func hasOwnEncoding(t reflect.Type) bool {
	if t == timeType {
		return true
	}
	pt := reflect.PointerTo(t)
	for _, i := range []reflect.Type{customEncoderType, marshalerType, binaryMarshalerType, textMarshalerType,
		customDecoderType, unmarshalerType, binaryUnmarshalerType, textUnmarshalerType} {
		if t.Implements(i) || pt.Implements(i) {
			return true
		}
	}
	return false
}
