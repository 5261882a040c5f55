package storh_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// exampleDB opens a fresh database in a temporary directory; the returned
// func closes it and removes the directory.
func exampleDB() (*storh.DB, func()) {
	dir, err := os.MkdirTemp("", "storh-example")
	if err != nil {
		panic(err)
	}
	db, err := storh.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	return db, func() {
		db.Close()
		os.RemoveAll(dir)
	}
}

// exampleDir makes a temporary directory; the returned func removes it.
func exampleDir() (string, func()) {
	dir, err := os.MkdirTemp("", "storh-example")
	if err != nil {
		panic(err)
	}
	return dir, func() { os.RemoveAll(dir) }
}

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "storh-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := storh.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	users, err := db.Docs("users")
	if err != nil {
		panic(err)
	}
	rec, err := users.Put(storh.Map{"name": "Ada", "born": 1815})
	if err != nil {
		panic(err)
	}
	db.Close()

	// Everything is still there after reopening.
	db, err = storh.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	users, _ = db.Docs("users")
	got, err := users.Get(rec.ID)
	if err != nil {
		panic(err)
	}
	n, _ := users.Count()
	fmt.Println(got.Data()["name"], got.Data()["born"], n)
	// Output: Ada 1815 1
}

func ExampleDocs_Put() {
	db, done := exampleDB()
	defer done()

	// Deterministic ids make this output the same on every run; by default
	// Put takes ids from uuidv7.New.
	users, _ := db.Docs("users", storh.WithDeterministicIDs(1, 1_700_000_000_000))

	type user struct {
		Name  string   `msgpack:"name"`
		Langs []string `msgpack:"langs"`
	}
	rec, err := users.Put(user{Name: "Grace", Langs: []string{"COBOL"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Time().UTC())

	got, _ := users.Get(rec.ID)
	var u user
	if err := got.Decode(&u); err != nil {
		panic(err)
	}
	fmt.Println(u.Name, u.Langs)
	// Data gives the generic form: integers come back as int64.
	fmt.Println(got.Data())

	// PutWithID on an existing id replaces the document.
	if _, err := users.PutWithID(rec.ID, storh.Map{"name": "Grace Hopper"}); err != nil {
		panic(err)
	}
	got, _ = users.Get(rec.ID)
	fmt.Println(got.Data()["name"])

	// Ids must be UUIDv7: anything else is rejected before anything is written.
	_, err = users.PutWithID(uuidv7.UUID{}, storh.Map{"name": "nobody"})
	fmt.Println(errors.Is(err, storh.ErrInvalidID))
	// Output:
	// 2023-11-14 22:13:20 +0000 UTC
	// Grace [COBOL]
	// map[langs:[COBOL] name:Grace]
	// Grace Hopper
	// true
}

func ExampleDocs_Stream() {
	db, done := exampleDB()
	defer done()
	tasks, _ := db.Docs("tasks")
	for i := 1; i <= 7; i++ {
		id, _ := uuidv7.NewAt(1_700_000_000_000 + int64(i))
		if _, err := tasks.PutWithID(id, storh.Map{"n": i}); err != nil {
			panic(err)
		}
	}

	// Cursor pagination: each page resumes after the last id of the
	// previous one, so pages stay correct while records are added.
	page := query.All().Limit(3)
	for {
		var last uuidv7.UUID
		var ns []any
		for rec, err := range tasks.Stream(page) {
			if err != nil {
				panic(err)
			}
			ns = append(ns, rec.Data()["n"])
			last = rec.ID
		}
		if len(ns) == 0 {
			break
		}
		fmt.Println(ns)
		page = query.All().After(last).Limit(3)
	}
	// Output:
	// [1 2 3]
	// [4 5 6]
	// [7]
}

func ExampleLog_Stream_timeWindow() {
	db, done := exampleDB()
	defer done()
	events, _ := db.Log("events")
	// Events at 10:00:00.000, .001, ... .005 on 2024-01-01.
	const start = 1_704_103_200_000
	var first uuidv7.UUID
	for i := range 6 {
		id, _ := uuidv7.NewAt(start + int64(i))
		if _, err := events.PutWithID(id, storh.Map{"seq": i}); err != nil {
			panic(err)
		}
		if i == 0 {
			first = id
		}
	}

	// The window is inclusive at both ends and needs no timestamp field:
	// the time is in the id. Newest first here.
	for rec, err := range events.Stream(query.All().TimeRangeMs(start+1, start+3).Reverse()) {
		if err != nil {
			panic(err)
		}
		fmt.Println(rec.Data()["seq"], rec.Time().UTC().Format("15:04:05.000"))
	}

	// A log never rewrites a record.
	_, err := events.PutWithID(first, storh.Map{"seq": 99})
	fmt.Println(errors.Is(err, storh.ErrExists))
	// Output:
	// 3 10:00:00.003
	// 2 10:00:00.002
	// 1 10:00:00.001
	// true
}

func ExampleDB_Update() {
	db, done := exampleDB()
	defer done()
	accounts, _ := db.Docs("accounts")
	ledger, _ := db.Log("ledger")
	alice, _ := accounts.Put(storh.Map{"owner": "alice", "balance": 100})

	transfer := func(amount int64) error {
		return db.Update(func(tx *storh.Tx) error {
			acc, err := tx.Docs("accounts")
			if err != nil {
				return err
			}
			led, err := tx.Log("ledger")
			if err != nil {
				return err
			}
			rec, err := acc.Get(alice.ID)
			if err != nil {
				return err
			}
			balance := rec.Data()["balance"].(int64) - amount
			if _, err := led.Put(storh.Map{"amount": amount}); err != nil {
				return err
			}
			if balance < 0 {
				// Returning an error rolls back the ledger entry too.
				return fmt.Errorf("insufficient funds: %d", balance+amount)
			}
			_, err = acc.PutWithID(alice.ID, storh.Map{"owner": "alice", "balance": balance})
			return err
		})
	}
	fmt.Println(transfer(30))
	fmt.Println(transfer(500))

	rec, _ := accounts.Get(alice.ID)
	n, _ := ledger.Count()
	fmt.Println(rec.Data()["balance"], n)
	// Output:
	// <nil>
	// insufficient funds: 70
	// 70 1
}

// A blog's posts, indexed for what its pages ask: a post by slug, posts by
// tag, the newest articles.
func ExampleWithIndex() {
	db, done := exampleDB()
	defer done()

	posts, err := db.Docs("posts",
		storh.WithIndex(storh.Index("slug").Unique()),
		storh.WithIndex(storh.Index("tags")),
		storh.WithIndex(storh.Index("kind", "published")),
	)
	if err != nil {
		panic(err)
	}
	for i, p := range []storh.Map{
		{"slug": "hello", "kind": "article", "published": 20240101, "tags": []any{"go", "intro"}},
		{"slug": "indexes", "kind": "article", "published": 20240301, "tags": []any{"go", "db"}},
		{"slug": "about", "kind": "page", "published": 20230101},
		{"slug": "bbolt", "kind": "article", "published": 20240201, "tags": []any{"db"}},
	} {
		p["n"] = i
		if _, err := posts.Put(p); err != nil {
			panic(err)
		}
	}

	// A second post with the same slug is refused.
	_, err = posts.Put(storh.Map{"slug": "hello"})
	fmt.Println(errors.Is(err, storh.ErrUniqueViolation))

	post, _ := posts.First(query.All().Where(query.Field("slug").Eq("indexes")))
	fmt.Println(post.Data()["published"])

	tagged, _ := posts.CountMatching(query.All().Where(query.Field("tags").Contains("db")))
	fmt.Println(tagged)

	latest := query.All().
		Where(query.Field("kind").Eq("article")).
		OrderBy("published", query.Desc).
		Limit(2)
	for r, err := range posts.Stream(latest) {
		if err != nil {
			panic(err)
		}
		fmt.Println(r.Data()["slug"])
	}
	plan, _ := posts.Explain(latest)
	fmt.Println(plan)
	// Output:
	// true
	// 20240301
	// 2
	// indexes
	// bbolt
	// index "kind,published": 2 keys read, 2 records read, 2 returned
}

// Keyset pages over a sort: each page continues after the last record of the
// previous one, with no gaps or repeats however many records share a score.
func ExampleDocs_Find_keysetPages() {
	db, done := exampleDB()
	defer done()

	scores, _ := db.Docs("scores", storh.WithIndex(storh.Index("score")))
	for i, s := range []int{3, 9, 3, 7, 9, 1, 7} {
		if _, err := scores.Put(storh.Map{"player": fmt.Sprint("p", i), "score": s}); err != nil {
			panic(err)
		}
	}
	q := query.All().OrderBy("score", query.Desc).Limit(3)
	for page := 1; ; page++ {
		recs, err := scores.Find(q)
		if err != nil {
			panic(err)
		}
		if len(recs) == 0 {
			break
		}
		fmt.Print("page ", page, ":")
		for _, r := range recs {
			fmt.Print(" ", r.Data()["player"], "=", r.Data()["score"])
		}
		fmt.Println()
		q = q.After(recs[len(recs)-1].ID)
	}
	// Output:
	// page 1: p4=9 p1=9 p6=7
	// page 2: p3=7 p2=3 p0=3
	// page 3: p5=1
}

// ScanRaw lends each record's msgpack bytes to a callback: here a checksum
// over a whole collection that allocates nothing per record.
func ExampleDocs_ScanRaw() {
	db, done := exampleDB()
	defer done()
	events, _ := db.Docs("events")
	items := make([]any, 1000)
	for i := range items {
		items[i] = storh.Map{"n": i}
	}
	if _, err := events.PutMany(items); err != nil {
		panic(err)
	}
	records, bytes := 0, 0
	err := events.ScanRaw(query.All(), func(id uuidv7.UUID, raw []byte) error {
		// raw is valid until this call returns: copy what you keep.
		records++
		bytes += len(raw)
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(records, "records,", bytes > 0)
	// Output: 1000 records, true
}

// GetRaw lends one record's bytes: a point read that allocates only what
// its read transaction does.
func ExampleDocs_GetRaw() {
	db, done := exampleDB()
	defer done()
	users, _ := db.Docs("users")
	rec, _ := users.Put(storh.Map{"name": "ada"})
	err := users.GetRaw(rec.ID, func(raw []byte) error {
		fmt.Printf("%d bytes of msgpack\n", len(raw))
		return nil
	})
	if err != nil {
		panic(err)
	}
	err = users.GetRaw(uuidv7.New(), func([]byte) error { return nil })
	fmt.Println(errors.Is(err, storh.ErrNotFound))
	// Output:
	// 10 bytes of msgpack
	// true
}
