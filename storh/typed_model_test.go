package storh_test

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The typed model test drives one collection through a typed handle and an
// untyped one at once, with random operations, and checks both views after
// every step against a map of id → struct.

type modelItem struct {
	Name   string      `msgpack:"name"`
	N      int         `msgpack:"n"`
	Tags   []string    `msgpack:"tags"`
	Ref    uuidv7.UUID `msgpack:"ref"`
	Nested *author     `msgpack:"nested"`
}

// asMap is the untyped form of it, as Data returns it.
func (it modelItem) asMap() storh.Map {
	var tags any
	if it.Tags != nil {
		l := make([]any, len(it.Tags))
		for i, s := range it.Tags {
			l[i] = s
		}
		tags = l
	}
	var nested any
	if it.Nested != nil {
		nested = storh.Map{"name": it.Nested.Name}
	}
	return storh.Map{"name": it.Name, "n": int64(it.N), "tags": tags, "ref": it.Ref, "nested": nested}
}

func genModelItem(t *rapid.T) modelItem {
	it := modelItem{
		Name: rapid.StringMatching(`[a-c]{0,3}`).Draw(t, "name"),
		N:    rapid.IntRange(-3, 3).Draw(t, "n"),
	}
	if rapid.Bool().Draw(t, "hasTags") {
		it.Tags = rapid.SliceOfN(rapid.SampledFrom([]string{"x", "y", ""}), 0, 3).Draw(t, "tags")
	}
	if rapid.Bool().Draw(t, "hasRef") {
		it.Ref = uuidv7.New()
	}
	if rapid.Bool().Draw(t, "hasNested") {
		it.Nested = &author{Name: rapid.StringMatching(`[a-b]{0,2}`).Draw(t, "nestedName")}
	}
	return it
}

func sameItem(a, b modelItem) bool {
	return a.Name == b.Name && a.N == b.N && slices.Equal(a.Tags, b.Tags) && (a.Tags == nil) == (b.Tags == nil) &&
		a.Ref == b.Ref && reflect.DeepEqual(a.Nested, b.Nested)
}

func TestTypedModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		db := openTemp(t)
		indexed := rapid.Bool().Draw(rt, "indexed")
		var opts []storh.CollectionOption
		if indexed {
			opts = append(opts, storh.WithIndex(storh.Index("n")))
		}
		typed, err := storh.DocsOf[modelItem](db, "m", opts...)
		if err != nil {
			rt.Fatal(err)
		}
		plain := typed.Untyped()
		model := map[uuidv7.UUID]modelItem{}
		ids := func() []uuidv7.UUID {
			out := slices.Collect(maps.Keys(model))
			slices.SortFunc(out, uuidv7.UUID.Compare)
			return out
		}
		pickID := func() uuidv7.UUID {
			if len(model) == 0 || rapid.IntRange(0, 4).Draw(rt, "fresh") == 0 {
				return uuidv7.New()
			}
			return rapid.SampledFrom(ids()).Draw(rt, "id")
		}

		rt.Repeat(map[string]func(*rapid.T){
			"put": func(rt *rapid.T) {
				v := genModelItem(rt)
				it, err := typed.Put(v)
				if err != nil {
					rt.Fatal(err)
				}
				model[it.ID] = v
			},
			"putWithID": func(rt *rapid.T) {
				id, v := pickID(), genModelItem(rt)
				if _, err := typed.PutWithID(id, v); err != nil {
					rt.Fatal(err)
				}
				model[id] = v
			},
			"putUntyped": func(rt *rapid.T) {
				id, v := pickID(), genModelItem(rt)
				if _, err := plain.PutWithID(id, v.asMap()); err != nil {
					rt.Fatal(err)
				}
				model[id] = v
			},
			"putMany": func(rt *rapid.T) {
				vs := rapid.SliceOfN(rapid.Custom(genModelItem), 0, 5).Draw(rt, "batch")
				items, err := typed.PutMany(vs)
				if err != nil {
					rt.Fatal(err)
				}
				for _, it := range items {
					model[it.ID] = it.Value
				}
			},
			"putItems": func(rt *rapid.T) {
				n := rapid.IntRange(1, 4).Draw(rt, "n")
				in := make([]storh.Item[modelItem], n)
				seen := map[uuidv7.UUID]bool{}
				for i := range in {
					in[i].Value = genModelItem(rt)
					if rapid.Bool().Draw(rt, "explicit") {
						id := pickID()
						if seen[id] {
							continue // the last of two puts of one id wins: keep the model simple
						}
						seen[id], in[i].ID = true, id
					}
				}
				items, err := typed.PutItems(in)
				if err != nil {
					rt.Fatal(err)
				}
				for i, it := range items {
					if !in[i].ID.IsZero() && it.ID != in[i].ID {
						rt.Fatalf("PutItems moved item %d from %v to %v", i, in[i].ID, it.ID)
					}
					model[it.ID] = it.Value
				}
			},
			"delete": func(rt *rapid.T) {
				id := pickID()
				if err := typed.Delete(id); err != nil {
					rt.Fatal(err)
				}
				delete(model, id)
			},
			"get": func(rt *rapid.T) {
				id := pickID()
				got, err := typed.Get(id)
				want, ok := model[id]
				switch {
				case !ok && !errors.Is(err, storh.ErrNotFound):
					rt.Fatalf("Get(%v) of a missing id = %v", id, err)
				case ok && (err != nil || !sameItem(got.Value, want)):
					rt.Fatalf("Get(%v) = %+v, %v; want %+v", id, got.Value, err, want)
				}
				if ok {
					rec, err := plain.Get(id)
					if err != nil || !reflect.DeepEqual(rec.Data(), want.asMap()) {
						rt.Fatalf("untyped Get(%v) = %v, %v; want %v", id, rec.Data(), err, want.asMap())
					}
				}
			},
			"find": func(rt *rapid.T) {
				lo := rapid.IntRange(-4, 4).Draw(rt, "lo")
				desc := rapid.Bool().Draw(rt, "desc")
				dir := query.Asc
				if desc {
					dir = query.Desc
				}
				got, err := typed.Find(query.All().Where(query.Field("n").Gte(lo)).OrderBy("n", dir))
				if err != nil {
					rt.Fatal(err)
				}
				var want []uuidv7.UUID
				for _, id := range ids() {
					if model[id].N >= lo {
						want = append(want, id)
					}
				}
				// Ties in n keep id order, reversed with the order.
				slices.SortStableFunc(want, func(a, b uuidv7.UUID) int { return model[a].N - model[b].N })
				if desc {
					slices.Reverse(want)
				}
				var gotIDs []uuidv7.UUID
				for _, it := range got {
					gotIDs = append(gotIDs, it.ID)
					if !sameItem(it.Value, model[it.ID]) {
						rt.Fatalf("Find gave %+v for %v, want %+v", it.Value, it.ID, model[it.ID])
					}
				}
				if !slices.Equal(gotIDs, want) {
					rt.Fatalf("Find n >= %d (desc %v) = %v, want %v", lo, desc, gotIDs, want)
				}
				n, err := typed.CountMatching(query.All().Where(query.Field("n").Gte(lo)))
				if err != nil || n != len(want) {
					rt.Fatalf("CountMatching = %d, %v; want %d", n, err, len(want))
				}
			},
			"": func(rt *rapid.T) {
				n, err := typed.Count()
				if err != nil || n != len(model) {
					rt.Fatalf("Count = %d, %v; want %d", n, err, len(model))
				}
				i := 0
				want := ids()
				for it, err := range typed.Stream(query.All()) {
					if err != nil {
						rt.Fatal(err)
					}
					if i >= len(want) || it.ID != want[i] || !sameItem(it.Value, model[it.ID]) {
						rt.Fatalf("Stream item %d = %v %+v", i, it.ID, it.Value)
					}
					i++
				}
				if i != len(want) {
					rt.Fatalf("Stream yielded %d, want %d", i, len(want))
				}
			},
		})
	})
}
