package storh_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Post is the struct of the typed examples. Fields without a msgpack tag
// use their json tag's name, and Go's field name when they have neither.
type Post struct {
	Title  string      `json:"title"`
	Views  int         `json:"views"`
	Tags   []string    `json:"tags,omitempty"`
	Author uuidv7.UUID `json:"author"` // a foreign key: stored as a typed UUID
}

func ExampleDocsOf() {
	db, done := exampleDB()
	defer done()

	posts, err := storh.DocsOf[Post](db, "posts", storh.WithIndex(storh.Index("views")))
	if err != nil {
		panic(err)
	}
	ada, _ := uuidv7.Parse("01890a5d-ac96-774b-bcce-b302099a8057")
	it, err := posts.Put(Post{Title: "Hello", Views: 3, Author: ada})
	if err != nil {
		panic(err)
	}
	got, err := posts.Get(it.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(got.Value.Title, got.Value.Views, got.Value.Author)

	// The same record through the untyped API: ints are int64, and the
	// foreign key is still a uuidv7.UUID.
	rec, _ := posts.Untyped().Get(it.ID)
	fmt.Printf("%T %T\n", rec.Data()["views"], rec.Data()["author"])
	// Output:
	// Hello 3 01890a5d-ac96-774b-bcce-b302099a8057
	// int64 uuidv7.UUID
}

func ExampleLogOf() {
	db, done := exampleDB()
	defer done()

	type reading struct {
		Sensor  string  `msgpack:"sensor"`
		Celsius float64 `msgpack:"celsius"`
	}
	readings, err := storh.LogOf[reading](db, "readings", storh.WithDeterministicIDs(1, 1_700_000_000_000))
	if err != nil {
		panic(err)
	}
	if _, err := readings.PutMany([]reading{{"a", 20.5}, {"b", 21}, {"a", 20.75}}); err != nil {
		panic(err)
	}
	for it, err := range readings.Stream(query.All().Where(query.Field("sensor").Eq("a"))) {
		if err != nil {
			panic(err)
		}
		fmt.Println(it.Time().UTC().Format(time.StampMilli), it.Value.Celsius)
	}
	// Output:
	// Nov 14 22:13:20.000 20.5
	// Nov 14 22:13:20.002 20.75
}

func ExampleTypedDocs_Find() {
	db, done := exampleDB()
	defer done()

	posts, _ := storh.DocsOf[Post](db, "posts", storh.WithIndex(storh.Index("views")))
	if _, err := posts.PutMany([]Post{{Title: "a", Views: 10}, {Title: "b", Views: 50}, {Title: "c", Views: 30}}); err != nil {
		panic(err)
	}
	top, err := posts.Find(query.All().Where(query.Field("views").Gte(20)).OrderBy("views", query.Desc))
	if err != nil {
		panic(err)
	}
	for _, it := range top {
		fmt.Println(it.Value.Title, it.Value.Views)
	}
	// Output:
	// b 50
	// c 30
}

func ExampleTypedDocs_PutItems() {
	db, done := exampleDB()
	defer done()

	posts, _ := storh.DocsOf[Post](db, "posts")
	fixed, _ := uuidv7.Parse("01890a5d-ac96-774b-bcce-b302099a8057")
	// An item with an ID is stored under it; a zero ID gets a new one.
	items, err := posts.PutItems([]storh.Item[Post]{{ID: fixed, Value: Post{Title: "imported"}}, {Value: Post{Title: "new"}}})
	if err != nil {
		panic(err)
	}
	fmt.Println(items[0].ID == fixed, items[1].ID.IsZero())
	// Output: true false
}

// A record written by other code may not fit the struct: the read fails
// with ErrTypeMismatch, and Data still reads it.
func ExampleErrTypeMismatch() {
	db, done := exampleDB()
	defer done()

	raw, _ := db.Docs("posts")
	rec, _ := raw.Put(storh.Map{"title": "odd", "views": "lots"})
	posts, _ := storh.DocsOf[Post](db, "posts")
	_, err := posts.Get(rec.ID)
	fmt.Println(errors.Is(err, storh.ErrTypeMismatch))
	fmt.Println(rec.Data()["views"])
	// Output:
	// true
	// lots
}

func ExampleOpener() {
	db, done := exampleDB()
	defer done()

	// DocsOf takes a Tx as well as a DB: both writes commit, or neither.
	err := db.Update(func(tx *storh.Tx) error {
		posts, err := storh.DocsOf[Post](tx, "posts")
		if err != nil {
			return err
		}
		audit, err := storh.LogOf[storh.Map](tx, "audit")
		if err != nil {
			return err
		}
		it, err := posts.Put(Post{Title: "draft"})
		if err != nil {
			return err
		}
		_, err = audit.Put(storh.Map{"created": it.ID})
		return err
	})
	if err != nil {
		panic(err)
	}
	n, _ := db.Collections()
	fmt.Println(len(n))
	// Output: 2
}

func ExampleDB_Collections() {
	db, done := exampleDB()
	defer done()

	users, _ := db.Docs("users")
	events, _ := db.Log("events")
	users.PutMany([]any{storh.Map{"n": 1}, storh.Map{"n": 2}})
	events.Put(storh.Map{"kind": "signup"})

	infos, err := db.Collections()
	if err != nil {
		panic(err)
	}
	for _, c := range infos {
		fmt.Println(c.Name, c.Kind, c.Records)
	}
	// Output:
	// events log 1
	// users docs 2
}

func ExampleWithoutCreate() {
	db, done := exampleDB()
	defer done()

	_, err := db.Docs("users", storh.WithoutCreate())
	fmt.Println(errors.Is(err, storh.ErrNotFound))
	// Output: true
}

func ExampleWithReadOnly() {
	db, done := exampleDB()
	path := db.Path()
	users, _ := db.Docs("users")
	users.Put(storh.Map{"name": "Ada"})
	db.Close()
	defer done()

	ro, err := storh.Open(path, storh.WithReadOnly())
	if err != nil {
		panic(err)
	}
	defer ro.Close()
	users, _ = ro.Docs("users")
	n, _ := users.Count()
	_, err = users.Put(storh.Map{"name": "Bob"})
	fmt.Println(n, errors.Is(err, storh.ErrReadOnly))
	// Output: 1 true
}

func ExampleWithoutSync() {
	dir, done := exampleDir()
	defer done()

	// For data that can be rebuilt (caches, tests, bulk loads checked
	// afterwards): commits skip fsync, and a crash may lose recent commits
	// or damage the file.
	db, err := storh.Open(filepath.Join(dir, "scratch.db"), storh.WithoutSync())
	if err != nil {
		panic(err)
	}
	defer db.Close()
	fmt.Println(db.Path() != "")
	// Output: true
}

func ExampleCollection() {
	db, done := exampleDB()
	defer done()

	users, _ := db.Docs("users")
	events, _ := db.Log("events")
	users.Put(storh.Map{"n": 1})
	events.PutMany([]any{storh.Map{"n": 1}, storh.Map{"n": 2}})

	// Code that works on either kind takes a storh.Collection.
	for _, c := range []storh.Collection{users, events} {
		n, _ := c.Count()
		fmt.Println(c.Name(), c.Kind(), n)
	}
	// Output:
	// users docs 1
	// events log 2
}

func ExampleDocs_StreamContext() {
	db, done := exampleDB()
	defer done()

	logs, _ := db.Docs("logs")
	for i := range 100 {
		logs.Put(storh.Map{"n": i})
	}
	// A deadline or a cancel ends the stream with ctx.Err(), also while no
	// record matches; the loop sees it as the stream's last error.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := 0
	for _, err := range logs.StreamContext(ctx, query.All()) {
		if err != nil {
			fmt.Println(seen, errors.Is(err, context.Canceled))
			break
		}
		if seen++; seen == 10 {
			cancel()
		}
	}
	// Output: 10 true
}

func ExampleRecord_DataErr() {
	db, done := exampleDB()
	defer done()

	users, _ := db.Docs("users")
	rec, _ := users.Put(storh.Map{"name": "Ada"})
	m, err := rec.DataErr()
	fmt.Println(m["name"], err)
	// Output: Ada <nil>
}

func ExampleItem_MarshalJSON() {
	db, done := exampleDB()
	defer done()

	type note struct {
		Text string      `json:"text"`
		Ref  uuidv7.UUID `json:"ref"`
	}
	notes, _ := storh.DocsOf[note](db, "notes")
	id, _ := uuidv7.Parse("01890a5d-ac96-774b-bcce-b302099a8057")
	ref, _ := uuidv7.Parse("01890a5d-ac96-7000-8000-000000000001")
	it, _ := notes.PutWithID(id, note{Text: "hi", Ref: ref})

	// The JSON of an Item is that of its record: a line of a JSONL export,
	// with the UUID field kept typed as {"$uuid": …}.
	b, _ := json.Marshal(it)
	fmt.Println(string(b))

	var back storh.Item[note]
	if err := json.Unmarshal(b, &back); err != nil {
		panic(err)
	}
	fmt.Println(back.Value.Text, back.Value.Ref == ref)
	// Output:
	// {"id":"01890a5d-ac96-774b-bcce-b302099a8057","time":"2023-06-30T03:34:18.518Z","data":{"ref":{"$uuid":"01890a5d-ac96-7000-8000-000000000001"},"text":"hi"}}
	// hi true
}

func ExampleRecord_Decode() {
	db, done := exampleDB()
	defer done()

	events, _ := db.Log("events")
	rec, _ := events.Put(storh.Map{"kind": "click", "n": 3, "meta": storh.Map{"x": 1.5}})

	// Concrete fields get their own types; any gets the types of Data.
	var ev struct {
		Kind string         `msgpack:"kind"`
		N    int8           `msgpack:"n"`
		Meta map[string]any `msgpack:"meta"`
	}
	if err := rec.Decode(&ev); err != nil {
		panic(err)
	}
	fmt.Printf("%s %d %T\n", ev.Kind, ev.N, ev.Meta["x"])

	// A value that does not fit its field is an error, not a silent wrap.
	big, _ := events.Put(storh.Map{"n": 300})
	err := big.Decode(&ev)
	fmt.Println(errors.Is(err, storh.ErrTypeMismatch))
	// Output:
	// click 3 float64
	// true
}

func ExampleDB_VerifyContext() {
	db, done := exampleDB()
	defer done()
	users, _ := db.Docs("users")
	users.Put(storh.Map{"name": "Ada"})

	// A long check can be bounded: on timeout or cancel it returns what it
	// found so far, with an error wrapping ctx.Err().
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := db.VerifyContext(ctx, func(p storh.Problem) { fmt.Println(p) })
	fmt.Println(rep.Records, rep.Problems, err)
	// Output: 1 0 <nil>
}

func ExampleDB_BackupFileContext() {
	db, done := exampleDB()
	defer done()
	users, _ := db.Docs("users")
	users.Put(storh.Map{"name": "Ada"})

	dir, cleanup := exampleDir()
	defer cleanup()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as if the user pressed Ctrl-C
	_, err := db.BackupFileContext(ctx, filepath.Join(dir, "copy.db"))
	fmt.Println(errors.Is(err, context.Canceled))
	// An interrupted backup leaves no file behind.
	_, statErr := os.Stat(filepath.Join(dir, "copy.db"))
	fmt.Println(errors.Is(statErr, os.ErrNotExist))

	n, err := db.BackupFileContext(context.Background(), filepath.Join(dir, "copy.db"))
	fmt.Println(n > 0, err)
	// Output:
	// true
	// true
	// true <nil>
}

func ExampleCompactContext() {
	dir, cleanup := exampleDir()
	defer cleanup()
	src, dst := filepath.Join(dir, "app.db"), filepath.Join(dir, "compact.db")
	db, err := storh.Open(src)
	if err != nil {
		panic(err)
	}
	users, _ := db.Docs("users")
	users.Put(storh.Map{"name": "Ada"})
	db.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := storh.CompactContext(ctx, src, dst)
	fmt.Println(err, rep.DstSize > 0)
	// Output: <nil> true
}

// The README's quick start, runnable.
func Example_quickStart() {
	db, done := exampleDB()
	defer done()

	type Post struct {
		Slug   string      `json:"slug"`
		Score  int         `json:"score"`
		Tags   []string    `json:"tags"`
		Author uuidv7.UUID `json:"author"`
	}
	ada := uuidv7.MustParse("01890a5d-ac96-774b-bcce-b302099a8057")
	posts, err := storh.DocsOf[Post](db, "posts",
		storh.WithIndex(storh.Index("slug").Unique()),
		storh.WithIndex(storh.Index("score")),
		storh.WithIndex(storh.Index("author")))
	if err != nil {
		panic(err)
	}
	for i := range 25 {
		if _, err := posts.Put(Post{Slug: fmt.Sprintf("p%02d", i), Score: i, Tags: []string{"go", "db"}[:1+i%2], Author: ada}); err != nil {
			panic(err)
		}
	}
	_, err = posts.Put(Post{Slug: "p03"})
	fmt.Println(errors.Is(err, storh.ErrUniqueViolation))

	got, _ := posts.First(query.All().Where(query.Field("slug").Eq("p07")))
	fmt.Println(got.Value.Score)
	byAda, _ := posts.CountMatching(query.All().Where(query.Field("author").Eq(ada)))
	fmt.Println(byAda)

	page := query.All().Where(query.Field("tags").Contains("db")).OrderBy("score", query.Desc).Limit(3)
	first, _ := posts.Find(page)
	next, _ := posts.Find(page.After(first[len(first)-1].ID))
	var scores []int
	for _, it := range append(first, next...) {
		scores = append(scores, it.Value.Score)
	}
	fmt.Println(scores)
	plan, _ := posts.Untyped().Explain(page)
	fmt.Println(plan.Indexes, plan.Sorted)
	// Output:
	// true
	// 7
	// 25
	// [23 21 19 17 15 13]
	// [score] false
}
