package storh_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// post is the struct the typed tests store: msgpack tags, a nested struct,
// a list, a time and a foreign key.
type post struct {
	Title  string      `msgpack:"title"`
	Views  int         `msgpack:"views"`
	Tags   []string    `msgpack:"tags"`
	At     time.Time   `msgpack:"at"`
	Author author      `msgpack:"author"`
	Parent uuidv7.UUID `msgpack:"parent"`
}

type author struct {
	Name string `msgpack:"name"`
}

func samplePost(i int) post {
	return post{
		Title:  "post " + string(rune('a'+i%26)),
		Views:  i * 10,
		Tags:   []string{"go", "db"}[:1+i%2],
		At:     time.UnixMilli(1_700_000_000_000 + int64(i)).UTC(),
		Author: author{Name: "ann"},
	}
}

func TestTypedDocsRoundTrip(t *testing.T) {
	db := openTemp(t)
	posts, err := storh.DocsOf[post](db, "posts")
	if err != nil {
		t.Fatal(err)
	}
	in := samplePost(3)
	in.Parent = uuidv7.New()
	put, err := posts.Put(in)
	if err != nil {
		t.Fatal(err)
	}
	if put.ID.IsZero() || !equalPost(put.Value, in) {
		t.Fatalf("Put returned %+v, want the value given under a new id", put)
	}
	got, err := posts.Get(put.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != put.ID || !equalPost(got.Value, in) {
		t.Fatalf("Get = %+v, want %+v", got.Value, in)
	}
	if !got.Time().Equal(put.ID.Time()) {
		t.Errorf("Time() = %v, want the id's time %v", got.Time(), put.ID.Time())
	}
	n, err := posts.Count()
	if err != nil || n != 1 {
		t.Fatalf("Count = %d, %v; want 1", n, err)
	}
	if err := posts.Delete(put.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := posts.Get(put.ID); !errors.Is(err, storh.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
}

func equalPost(a, b post) bool {
	return a.Title == b.Title && a.Views == b.Views && slices.Equal(a.Tags, b.Tags) &&
		a.At.Equal(b.At) && a.Author == b.Author && a.Parent == b.Parent
}

// TestTypedUntypedAgree writes through one API and reads through the other,
// both ways, and checks the bytes: a typed collection is a view of ordinary
// records.
func TestTypedUntypedAgree(t *testing.T) {
	db := openTemp(t)
	typedPosts, err := storh.DocsOf[post](db, "posts")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := db.Docs("posts")
	if err != nil {
		t.Fatal(err)
	}
	in := samplePost(1)
	it, err := typedPosts.Put(in)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := plain.Get(it.ID)
	if err != nil {
		t.Fatal(err)
	}
	var back post
	if err := rec.Decode(&back); err != nil || !equalPost(back, in) {
		t.Fatalf("untyped Decode = %+v, %v; want %+v", back, err, in)
	}
	if m := rec.Data(); m["title"] != in.Title || m["views"] != int64(in.Views) {
		t.Fatalf("untyped Data = %v", m)
	}

	// The reverse: a Map with the struct's keys reads back as the struct,
	// and writing that struct again gives the same bytes.
	rec2, err := plain.Put(storh.Map{"title": "x", "views": 7, "tags": []any{"a"},
		"at": in.At, "author": storh.Map{"name": "bo"}, "parent": in.Parent})
	if err != nil {
		t.Fatal(err)
	}
	got, err := typedPosts.Get(rec2.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := post{Title: "x", Views: 7, Tags: []string{"a"}, At: in.At, Author: author{Name: "bo"}, Parent: in.Parent}
	if !equalPost(got.Value, want) {
		t.Fatalf("typed Get of an untyped record = %+v, want %+v", got.Value, want)
	}
	again, err := typedPosts.PutWithID(rec2.ID, got.Value)
	if err != nil {
		t.Fatal(err)
	}
	rec3, err := plain.Get(again.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(rec3.Raw()) != string(rec2.Raw()) {
		t.Fatalf("struct and Map of the same data stored different bytes:\n%x\n%x", rec3.Raw(), rec2.Raw())
	}
}

func TestTypedPointerAndMap(t *testing.T) {
	db := openTemp(t)
	ptrs, err := storh.DocsOf[*post](db, "ptrs")
	if err != nil {
		t.Fatal(err)
	}
	in := samplePost(2)
	it, err := ptrs.Put(&in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ptrs.Get(it.ID)
	if err != nil || got.Value == nil || !equalPost(*got.Value, in) {
		t.Fatalf("Get = %+v, %v", got.Value, err)
	}
	if _, err := ptrs.Put(nil); !errors.Is(err, storh.ErrInvalidData) {
		t.Fatalf("Put(nil pointer) = %v, want ErrInvalidData", err)
	}

	ms, err := storh.DocsOf[storh.Map](db, "maps")
	if err != nil {
		t.Fatal(err)
	}
	mit, err := ms.Put(storh.Map{"a": 1, "b": []any{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	mgot, err := ms.Get(mit.ID)
	if err != nil {
		t.Fatal(err)
	}
	if mgot.Value["a"] != int64(1) {
		t.Fatalf("map Get = %v, want a: int64(1)", mgot.Value)
	}

	typedMaps, err := storh.DocsOf[map[string]int](db, "ints")
	if err != nil {
		t.Fatal(err)
	}
	iit, err := typedMaps.Put(map[string]int{"x": 1, "y": -2})
	if err != nil {
		t.Fatal(err)
	}
	igot, err := typedMaps.Get(iit.ID)
	if err != nil || !maps.Equal(igot.Value, map[string]int{"x": 1, "y": -2}) {
		t.Fatalf("map[string]int Get = %v, %v", igot.Value, err)
	}
}

func TestTypedRefusesNonRecordTypes(t *testing.T) {
	db := openTemp(t)
	if _, err := storh.DocsOf[int](db, "ints"); !errors.Is(err, storh.ErrInvalidData) {
		t.Errorf("DocsOf[int] = %v, want ErrInvalidData", err)
	}
	if _, err := storh.LogOf[[]post](db, "lists"); !errors.Is(err, storh.ErrInvalidData) {
		t.Errorf("LogOf[[]post] = %v, want ErrInvalidData", err)
	}
	if _, err := storh.DocsOf[map[int]string](db, "intkeys"); !errors.Is(err, storh.ErrInvalidData) {
		t.Errorf("DocsOf[map[int]string] = %v, want ErrInvalidData", err)
	}
	if cs, err := db.Collections(); err != nil || len(cs) != 0 {
		t.Errorf("a refused DocsOf left collections behind: %v, %v", cs, err)
	}
}

func TestTypedBatchesAndQueries(t *testing.T) {
	db := openTemp(t)
	posts, err := storh.DocsOf[post](db, "posts", storh.WithIndex(storh.Index("views")))
	if err != nil {
		t.Fatal(err)
	}
	var in []post
	for i := range 20 {
		in = append(in, samplePost(i))
	}
	items, err := posts.PutMany(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != len(in) {
		t.Fatalf("PutMany returned %d items, want %d", len(items), len(in))
	}
	for i, it := range items {
		if !equalPost(it.Value, in[i]) || (i > 0 && it.ID.Compare(items[i-1].ID) <= 0) {
			t.Fatalf("item %d = %+v: want input order and increasing ids", i, it)
		}
	}

	explicit := idAt(t, time.Now().UnixMilli()+1000)
	more, err := posts.PutItems([]storh.Item[post]{{Value: samplePost(40)}, {ID: explicit, Value: samplePost(41)}})
	if err != nil {
		t.Fatal(err)
	}
	if more[0].ID.IsZero() || more[1].ID != explicit {
		t.Fatalf("PutItems ids = %v, %v; want a new one and %v", more[0].ID, more[1].ID, explicit)
	}

	seq := func(yield func(post) bool) {
		for i := 50; i < 60; i++ {
			if !yield(samplePost(i)) {
				return
			}
		}
	}
	if n, err := posts.PutStream(seq); err != nil || n != 10 {
		t.Fatalf("PutStream = %d, %v; want 10", n, err)
	}

	found, err := posts.Find(query.All().Where(query.Field("views").Gte(500)).OrderBy("views", query.Asc))
	if err != nil {
		t.Fatal(err)
	}
	var views []int
	for _, it := range found {
		views = append(views, it.Value.Views)
	}
	if want := []int{500, 510, 520, 530, 540, 550, 560, 570, 580, 590}; !slices.Equal(views, want) {
		t.Fatalf("Find views>=500 ordered = %v, want %v", views, want)
	}

	first, err := posts.First(query.All().Where(query.Field("views").Eq(410)))
	if err != nil || first.ID != more[1].ID {
		t.Fatalf("First views=410 = %v, %v; want %v", first.ID, err, more[1].ID)
	}
	if _, err := posts.First(query.All().Where(query.Field("views").Eq(-1))); !errors.Is(err, storh.ErrNotFound) {
		t.Fatalf("First with no match = %v, want ErrNotFound", err)
	}

	n, err := posts.CountMatching(query.All().Where(query.Field("views").Lt(100)))
	if err != nil || n != 10 {
		t.Fatalf("CountMatching views<100 = %d, %v; want 10", n, err)
	}

	streamed := 0
	for it, err := range posts.Stream(query.All().Limit(5)) {
		if err != nil {
			t.Fatal(err)
		}
		if it.ID != items[streamed].ID || !equalPost(it.Value, in[streamed]) {
			t.Fatalf("Stream item %d = %+v", streamed, it)
		}
		streamed++
	}
	if streamed != 5 {
		t.Fatalf("Stream Limit(5) yielded %d", streamed)
	}
	if total, _ := posts.Count(); total != 32 {
		t.Fatalf("Count = %d, want 32", total)
	}
}

func TestTypedPutManyIsAllOrNothing(t *testing.T) {
	db := openTemp(t)
	posts, err := storh.DocsOf[map[string]any](db, "posts")
	if err != nil {
		t.Fatal(err)
	}
	before := digest(t, db)
	_, err = posts.PutMany([]map[string]any{{"a": 1}, {"a": make(chan int)}})
	var se *storh.Error
	if !errors.Is(err, storh.ErrInvalidData) || !errors.As(err, &se) || se.Index != 1 {
		t.Fatalf("PutMany with a bad item = %v, want ErrInvalidData at index 1", err)
	}
	if after := digest(t, db); after != before {
		t.Fatal("a failed PutMany changed the database")
	}
}

func TestTypedLog(t *testing.T) {
	db := openTemp(t)
	events, err := storh.LogOf[author](db, "events")
	if err != nil {
		t.Fatal(err)
	}
	id := idAt(t, 1_700_000_000_000)
	if _, err := events.PutWithID(id, author{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := events.PutWithID(id, author{Name: "b"}); !errors.Is(err, storh.ErrExists) {
		t.Fatalf("second PutWithID on a log = %v, want ErrExists", err)
	}
	got, err := events.Get(id)
	if err != nil || got.Value.Name != "a" {
		t.Fatalf("Get = %+v, %v; want the first write", got, err)
	}
	if events.Untyped().Name() != "events" || events.Name() != "events" {
		t.Fatal("Untyped or Name lost the collection")
	}
	if _, err := storh.DocsOf[author](db, "events"); !errors.Is(err, storh.ErrWrongKind) {
		t.Fatalf("DocsOf on a log = %v, want ErrWrongKind", err)
	}
}

func TestTypedInTx(t *testing.T) {
	db := openTemp(t)
	errRollback := errors.New("roll back")
	var kept uuidv7.UUID
	err := db.Update(func(tx *storh.Tx) error {
		posts, err := storh.DocsOf[post](tx, "posts")
		if err != nil {
			return err
		}
		it, err := posts.Put(samplePost(1))
		if err != nil {
			return err
		}
		kept = it.ID
		if got, err := posts.Get(it.ID); err != nil || got.Value.Title != samplePost(1).Title {
			t.Errorf("Get inside the transaction = %+v, %v", got, err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update = %v", err)
	}
	posts, err := storh.DocsOf[post](db, "posts")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := posts.Get(kept); !errors.Is(err, storh.ErrNotFound) {
		t.Fatalf("a rolled-back typed Put is visible: %v", err)
	}
	if _, err := posts.Put(samplePost(2)); err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *storh.Tx) error {
		ro, err := storh.DocsOf[post](tx, "posts")
		if err != nil {
			return err
		}
		_, err = ro.Put(samplePost(1))
		return err
	})
	if !errors.Is(err, storh.ErrReadOnly) {
		t.Fatalf("typed Put inside View = %v, want ErrReadOnly", err)
	}
}

// TestTypedMismatch reads records that do not fit T: ErrTypeMismatch,
// naming the record, and a stream that either ends there or, with
// ContinueOnError, skips it.
func TestTypedMismatch(t *testing.T) {
	db := openTemp(t)
	plain, err := db.Docs("posts")
	if err != nil {
		t.Fatal(err)
	}
	good1, _ := plain.Put(storh.Map{"title": "ok", "views": 1})
	bad, _ := plain.Put(storh.Map{"title": "bad", "views": "many"})
	good2, _ := plain.Put(storh.Map{"title": "ok", "views": 2})
	posts, err := storh.DocsOf[post](db, "posts")
	if err != nil {
		t.Fatal(err)
	}
	_, err = posts.Get(bad.ID)
	var se *storh.Error
	if !errors.Is(err, storh.ErrTypeMismatch) || !errors.As(err, &se) || se.ID != bad.ID.String() {
		t.Fatalf("Get of a record that does not fit = %v, want ErrTypeMismatch naming %v", err, bad.ID)
	}
	if errors.Is(err, storh.ErrCorrupt) {
		t.Fatalf("a type mismatch claims corruption: %v", err)
	}
	var seen []uuidv7.UUID
	var streamErr error
	for it, err := range posts.Stream(query.All()) {
		if err != nil {
			streamErr = err
			break
		}
		seen = append(seen, it.ID)
	}
	if !errors.Is(streamErr, storh.ErrTypeMismatch) || !slices.Equal(seen, []uuidv7.UUID{good1.ID}) {
		t.Fatalf("Stream saw %v then %v; want %v then ErrTypeMismatch", seen, streamErr, good1.ID)
	}
	var skipped []uuidv7.UUID
	seen = nil
	for it, err := range posts.Stream(query.All().ContinueOnError(func(id uuidv7.UUID, err error) {
		if !errors.Is(err, storh.ErrTypeMismatch) {
			t.Errorf("ContinueOnError got %v", err)
		}
		skipped = append(skipped, id)
	})) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, it.ID)
	}
	if !slices.Equal(seen, []uuidv7.UUID{good1.ID, good2.ID}) || !slices.Equal(skipped, []uuidv7.UUID{bad.ID}) {
		t.Fatalf("ContinueOnError: saw %v, skipped %v", seen, skipped)
	}
	if _, err := posts.Find(query.All()); !errors.Is(err, storh.ErrTypeMismatch) {
		t.Fatalf("Find = %v, want ErrTypeMismatch", err)
	}
	if _, err := posts.First(query.All().Where(query.Field("title").Eq("bad"))); !errors.Is(err, storh.ErrTypeMismatch) {
		t.Fatalf("First = %v, want ErrTypeMismatch", err)
	}
}

func TestTypedContext(t *testing.T) {
	db := openTemp(t)
	posts, err := storh.DocsOf[post](db, "posts")
	if err != nil {
		t.Fatal(err)
	}
	in := make([]post, 3000)
	for i := range in {
		in[i] = samplePost(i)
	}
	if _, err := posts.PutMany(in); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range posts.StreamContext(ctx, query.All()) {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("StreamContext on a cancelled context yielded %v", err)
		}
	}
	if _, err := posts.FindContext(ctx, query.All()); !errors.Is(err, context.Canceled) {
		t.Fatalf("FindContext = %v", err)
	}
	if _, err := posts.FirstContext(ctx, query.All()); !errors.Is(err, context.Canceled) {
		t.Fatalf("FirstContext = %v", err)
	}
	if _, err := posts.CountMatchingContext(ctx, query.All().Where(query.Field("views").Gt(5))); !errors.Is(err, context.Canceled) {
		t.Fatalf("CountMatchingContext = %v", err)
	}
	n, err := posts.PutStreamContext(ctx, func(yield func(post) bool) { yield(samplePost(1)) })
	if n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("PutStreamContext = %d, %v", n, err)
	}
	if total, _ := posts.Count(); total != len(in) {
		t.Fatalf("Count after cancelled calls = %d, want %d", total, len(in))
	}
}

// TestItemJSON: an Item marshals to the same JSON as the record it is
// stored as, and that JSON unmarshals back into an equal Item.
func TestItemJSON(t *testing.T) {
	db := openTemp(t)
	posts, err := storh.DocsOf[post](db, "posts")
	if err != nil {
		t.Fatal(err)
	}
	in := samplePost(4)
	in.Parent = uuidv7.New()
	it, err := posts.Put(in)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := posts.Untyped().Get(it.ID)
	if err != nil {
		t.Fatal(err)
	}
	itemJSON, err := json.Marshal(it)
	if err != nil {
		t.Fatal(err)
	}
	recJSON, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if string(itemJSON) != string(recJSON) {
		t.Fatalf("Item JSON differs from its record's:\n%s\n%s", itemJSON, recJSON)
	}
	if !strings.Contains(string(itemJSON), `"parent":{"$uuid":"`+in.Parent.String()+`"}`) {
		t.Errorf("the UUID field is not a typed $uuid: %s", itemJSON)
	}
	var back storh.Item[post]
	if err := json.Unmarshal(itemJSON, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != it.ID || !equalPost(back.Value, in) {
		t.Fatalf("round trip = %+v, want %+v", back, it)
	}
	var bad storh.Item[post]
	err = json.Unmarshal([]byte(`{"id":"`+it.ID.String()+`","data":{"views":"many"}}`), &bad)
	if !errors.Is(err, storh.ErrTypeMismatch) {
		t.Fatalf("unmarshal of data that does not fit = %v, want ErrTypeMismatch", err)
	}
}

// linked is a struct with every kind of value JSON has no type for.
type linked struct {
	Name  string            `json:"name"`
	At    time.Time         `json:"at"`
	Post  uuidv7.UUID       `json:"post"`
	Mongo objectid.ObjectID `json:"mongo"`
	Blob  []byte            `json:"blob"`
	Ratio float64           `json:"ratio"`
	Refs  []uuidv7.UUID     `json:"refs"`
}

// TestTypedJSONLRoundTrip: typed → JSONL export → import → typed, and the
// stored bytes of both collections are equal.
func TestTypedJSONLRoundTrip(t *testing.T) {
	db := openTemp(t)
	src, err := storh.DocsOf[linked](db, "src")
	if err != nil {
		t.Fatal(err)
	}
	var in []linked
	for i := range 20 {
		in = append(in, linked{
			Name: "n" + strconv.Itoa(i), At: time.Unix(1_700_000_000+int64(i), int64(i)).UTC(),
			Post: uuidv7.New(), Mongo: objectid.New(), Blob: []byte{byte(i), 0xff}, Ratio: float64(i) / 4,
			Refs: []uuidv7.UUID{uuidv7.New()},
		})
	}
	items, err := src.PutMany(in)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := jsonl.Export(context.Background(), &buf, src.Untyped(), query.All()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"post":{"$uuid":"`) || !strings.Contains(buf.String(), `"mongo":{"$oid":"`) {
		t.Fatalf("ids not exported typed:\n%s", buf.String()[:300])
	}
	dst, err := storh.DocsOf[linked](db, "dst")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jsonl.Import(context.Background(), &buf, dst.Untyped()); err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		got, err := dst.Get(it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Value, in[i]) {
			t.Fatalf("item %d after the round trip = %+v, want %+v", i, got.Value, in[i])
		}
		a, _ := src.Untyped().Get(it.ID)
		b, _ := dst.Untyped().Get(it.ID)
		if !bytes.Equal(a.Raw(), b.Raw()) {
			t.Fatalf("item %d stored as other bytes after the round trip", i)
		}
	}
}

// TestTypedIDQueries: a UUID or ObjectID field matches Eq, In and ranges
// with the typed value, with and without an index on it, and never the same
// id as text or bytes.
func TestTypedIDQueries(t *testing.T) {
	for _, indexed := range []bool{false, true} {
		t.Run("indexed="+strconv.FormatBool(indexed), func(t *testing.T) {
			db := openTemp(t)
			var opts []storh.CollectionOption
			if indexed {
				opts = append(opts, storh.WithIndex(storh.Index("post")), storh.WithIndex(storh.Index("mongo")))
			}
			c, err := storh.DocsOf[linked](db, "c", opts...)
			if err != nil {
				t.Fatal(err)
			}
			posts := []uuidv7.UUID{uuidv7.New(), uuidv7.New(), uuidv7.New()}
			oids := []objectid.ObjectID{objectid.New(), objectid.New(), objectid.New()}
			var in []linked
			for i := range 9 {
				in = append(in, linked{Name: strconv.Itoa(i), Post: posts[i%3], Mongo: oids[i%3]})
			}
			if _, err := c.PutMany(in); err != nil {
				t.Fatal(err)
			}
			// Decoys: the same ids as text and as bytes.
			if _, err := c.Untyped().PutMany([]any{
				storh.Map{"post": posts[0].String(), "mongo": oids[0].Hex()},
				storh.Map{"post": posts[0][:], "mongo": oids[0][:]},
			}); err != nil {
				t.Fatal(err)
			}
			count := func(cond query.Cond) int {
				t.Helper()
				n, err := c.CountMatching(query.All().Where(cond))
				if err != nil {
					t.Fatal(err)
				}
				plan, err := c.Untyped().Explain(query.All().Where(cond))
				if err != nil || plan.Returned != n || (indexed && len(plan.Indexes) == 0) {
					t.Fatalf("Explain = %v, %v; want %d returned, through an index: %v", plan, err, n, indexed)
				}
				return n
			}
			for _, tc := range []struct {
				name string
				cond query.Cond
				want int
			}{
				{"uuid eq", query.Field("post").Eq(posts[1]), 3},
				{"uuid in", query.Field("post").In(posts[0], posts[2]), 6},
				{"uuid range", query.Field("post").Gt(posts[0]), 6},
				{"uuid between", query.Field("post").Between(posts[0], posts[1]), 6},
				{"oid eq", query.Field("mongo").Eq(oids[2]), 3},
				{"oid range", query.Field("mongo").Lte(oids[1]), 6},
				{"uuid as text", query.Field("post").Eq(posts[0].String()), 1},
				{"uuid as bytes", query.Field("post").Eq(posts[0][:]), 1},
			} {
				if got := count(tc.cond); got != tc.want {
					t.Errorf("%s: %d records, want %d", tc.name, got, tc.want)
				}
			}
			first, err := c.First(query.All().Where(query.Field("post").Eq(posts[2])))
			if err != nil || first.Value.Post != posts[2] {
				t.Fatalf("First by uuid = %+v, %v", first, err)
			}
		})
	}
}
