package reliability

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The bad-input table: one row per way to call the public API wrongly. Each
// row runs against its own copy of a template database and asserts the
// typed error (errors.Is), a message that helps (a substring, and the
// package prefix every message carries), and that the database is
// byte-for-byte unchanged (a digest of every bucket, key and value, read
// through raw bbolt before and after). The CLI rows are in
// badinput_cli_test.go and share the template and the digest.
//
// To add a case, add a row; a row that needs a different database file
// (not the template) sets file.

type badEnv struct {
	t      *testing.T
	path   string
	db     *storh.DB
	docs   *storh.Docs // "docs": 300 records
	events *storh.Log  // "events": 300 records
	docID  uuidv7.UUID // stored in docs
	logID  uuidv7.UUID // stored in events
}

type badCase struct {
	name string
	opts []storh.Option // for Open; the template is opened with none
	// file replaces the template: it writes the database file the row
	// opens (or tries to), at path.
	file func(t *testing.T, path string)
	// noOpen: the row opens the file itself (e.is nil db).
	noOpen bool
	run    func(e *badEnv) error
	is     error  // errors.Is target; nil: the call must succeed
	msg    string // substring of the message
}

// errPanicked reports a panic a row caught and expected.
var errPanicked = errors.New("storh: test: the callback's panic propagated")

var v4ID = uuidv7.UUID{0x1b, 0x4e, 0x28, 0xba, 0x2f, 0xa1, 0x41, 0xd2, 0x88, 0x3f, 0x0b, 0x4e, 0x28, 0xba, 0x2f, 0xa1}

func badVariant() uuidv7.UUID {
	id := uuidv7.MustParse("018bcfe5-6864-732f-beb7-f4b386f4e0fa")
	id[8] = id[8]&0x3f | 0xc0
	return id
}

// nest returns a map nested depth levels deep (the top map is level 1).
func nest(depth int) storh.Map {
	m := storh.Map{"leaf": true}
	for range depth - 1 {
		m = storh.Map{"a": m}
	}
	return m
}

// nestList returns a map whose value is lists nested to depth levels.
func nestList(depth int) storh.Map {
	var v any = "leaf"
	for range depth - 1 {
		v = []any{v}
	}
	return storh.Map{"l": v}
}

type deepStruct struct {
	Next *deepStruct `msgpack:"next,omitempty"`
}

func deepChain(n int) *deepStruct {
	var s *deepStruct
	for range n {
		s = &deepStruct{Next: s}
	}
	return s
}

// firstErr drains a stream and returns how many records came before the
// first error, and that error.
func firstErr(seq iter.Seq2[storh.Record, error]) (int, error) {
	n := 0
	for _, err := range seq {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// inUpdate runs fn inside db.Update and returns fn's error (which also
// rolls the transaction back).
func inUpdate(e *badEnv, fn func(tx *storh.Tx) error) error {
	return e.db.Update(fn)
}

func badCases() []badCase {
	abort := errors.New("storh: test: abort")
	return []badCase{
		// --- ids: text forms -------------------------------------------------
		{name: "parse-empty", run: func(*badEnv) error { _, err := uuidv7.Parse(""); return err }, is: uuidv7.ErrInvalid, msg: "length 0, want 36"},
		{name: "parse-garbage", run: func(*badEnv) error { _, err := uuidv7.Parse("not-a-uuid"); return err }, is: uuidv7.ErrInvalid, msg: "want 36"},
		{name: "parse-v4", run: func(*badEnv) error { _, err := uuidv7.Parse(v4ID.String()); return err }, is: uuidv7.ErrInvalid, msg: "version '4' at offset 14"},
		{name: "parse-bad-variant", run: func(*badEnv) error { _, err := uuidv7.Parse(badVariant().String()); return err }, is: uuidv7.ErrInvalid, msg: "RFC 9562 variant"},
		{name: "parse-braces", run: func(*badEnv) error {
			_, err := uuidv7.Parse("{018bcfe5-6864-732f-beb7-f4b386f4e0fa}")
			return err
		}, is: uuidv7.ErrInvalid, msg: "without braces"},
		{name: "parse-no-dashes", run: func(*badEnv) error { _, err := uuidv7.Parse("018bcfe56864732fbeb7f4b386f4e0fa"); return err }, is: uuidv7.ErrInvalid, msg: "length 32"},
		{name: "parse-non-hex", run: func(*badEnv) error {
			_, err := uuidv7.Parse("018bcfe5-6864-732f-beb7-f4b386f4e0fg")
			return err
		}, is: uuidv7.ErrInvalid, msg: "non-hex character 'g' at offset 35"},
		{name: "parse-misplaced-dash", run: func(*badEnv) error {
			_, err := uuidv7.Parse("018bcfe56-864-732f-beb7-f4b386f4e0fa")
			return err
		}, is: uuidv7.ErrInvalid, msg: "want '-' at offset 8"},
		{name: "parse-huge-input-truncated", run: func(*badEnv) error {
			_, err := uuidv7.Parse(strings.Repeat("x", 1<<20))
			if err != nil && len(err.Error()) > 300 {
				return fmt.Errorf("message of %d bytes for a 1 MiB input: %w", len(err.Error()), err)
			}
			return err
		}, is: uuidv7.ErrInvalid, msg: `"...:`},
		{name: "parse-upper-case-accepted", run: func(e *badEnv) error {
			// Decision: upper case is accepted and output is lower case.
			id, err := uuidv7.Parse(strings.ToUpper(e.docID.String()))
			if err != nil {
				return err
			}
			rec, err := e.docs.Get(id)
			if err != nil {
				return err
			}
			if rec.ID.String() != strings.ToLower(e.docID.String()) || rec.ID != e.docID {
				return fmt.Errorf("storh: test: upper-case id came back as %s", rec.ID)
			}
			return nil
		}},
		{name: "objectid-parse-short", run: func(*badEnv) error { _, err := objectid.Parse("abc"); return err }, is: objectid.ErrInvalid, msg: "objectid: invalid ObjectID"},
		{name: "objectid-parse-non-hex", run: func(*badEnv) error { _, err := objectid.Parse("65a1b2c3d4e5f6a7b8c9d0ez"); return err }, is: objectid.ErrInvalid, msg: "objectid: invalid ObjectID"},

		// --- ids: through the API --------------------------------------------
		{name: "get-v4-id", run: func(e *badEnv) error { _, err := e.docs.Get(v4ID); return err }, is: storh.ErrInvalidID, msg: v4ID.String()},
		{name: "get-zero-id", run: func(e *badEnv) error { _, err := e.docs.Get(uuidv7.UUID{}); return err }, is: storh.ErrInvalidID, msg: "invalid id"},
		{name: "get-bad-variant", run: func(e *badEnv) error { _, err := e.events.Get(badVariant()); return err }, is: storh.ErrInvalidID, msg: "invalid id"},
		{name: "get-missing", run: func(e *badEnv) error { _, err := e.docs.Get(uuidv7.New()); return err }, is: storh.ErrNotFound, msg: "not found"},
		{name: "putwithid-v4", run: func(e *badEnv) error { _, err := e.docs.PutWithID(v4ID, storh.Map{"a": 1}); return err }, is: storh.ErrInvalidID, msg: "not a UUIDv7 (version 4)"},
		{name: "log-putwithid-bad-variant", run: func(e *badEnv) error { _, err := e.events.PutWithID(badVariant(), storh.Map{"a": 1}); return err }, is: storh.ErrInvalidID, msg: "variant"},
		{name: "delete-zero-id", run: func(e *badEnv) error { return e.docs.Delete(uuidv7.UUID{}) }, is: storh.ErrInvalidID, msg: "delete"},
		{name: "generator-returns-v4", run: func(e *badEnv) error {
			d, err := e.db.Docs("docs", storh.WithIDGenerator(func() uuidv7.UUID { return v4ID }))
			if err != nil {
				return err
			}
			_, err = d.Put(storh.Map{"a": 1})
			return err
		}, is: storh.ErrInvalidID, msg: "id generator returned an id that is not a UUIDv7"},
		{name: "generator-nil", run: func(e *badEnv) error { _, err := e.db.Docs("docs", storh.WithIDGenerator(nil)); return err }, msg: "WithIDGenerator(nil)"},
		{name: "putmany-bad-id-at-3", run: func(e *badEnv) error {
			items := []any{storh.Map{"a": 0}, storh.Map{"a": 1}, storh.Map{"a": 2}, storh.Entry{ID: v4ID, Data: storh.Map{"a": 3}}, storh.Map{"a": 4}}
			_, err := e.docs.PutMany(items)
			var se *storh.Error
			if errors.As(err, &se) && se.Index != 3 {
				return fmt.Errorf("storh: test: Index %d, want 3: %w", se.Index, err)
			}
			return err
		}, is: storh.ErrInvalidID, msg: "item 3"},
		{name: "putstream-bad-id", run: func(e *badEnv) error {
			n, err := e.docs.PutStream(func(yield func(any) bool) {
				for i := range 10 {
					item := any(storh.Map{"i": i})
					if i == 7 {
						item = storh.Entry{ID: v4ID, Data: item}
					}
					if !yield(item) {
						return
					}
				}
			})
			if n != 0 {
				return fmt.Errorf("storh: test: PutStream committed %d before the bad item of its first batch: %w", n, err)
			}
			return err
		}, is: storh.ErrInvalidID, msg: "item 7"},
		{name: "log-putwithid-existing", run: func(e *badEnv) error { _, err := e.events.PutWithID(e.logID, storh.Map{"a": 1}); return err }, is: storh.ErrExists, msg: "immutable"},
		{name: "log-putmany-with-existing", run: func(e *badEnv) error {
			_, err := e.events.PutMany([]any{storh.Map{"new": 1}, storh.Entry{ID: e.logID, Data: storh.Map{"a": 1}}})
			return err
		}, is: storh.ErrExists, msg: "item 1"},
		{name: "log-put-generator-repeats", run: func(e *badEnv) error {
			l, err := e.db.Log("events", storh.WithIDGenerator(func() uuidv7.UUID { return e.logID }))
			if err != nil {
				return err
			}
			_, err = l.Put(storh.Map{"a": 1})
			return err
		}, is: storh.ErrExists, msg: "immutable"},

		// --- data --------------------------------------------------------------
		{name: "put-nil", run: func(e *badEnv) error { _, err := e.docs.Put(nil); return err }, is: storh.ErrInvalidData, msg: "data is nil"},
		{name: "put-nil-map", run: func(e *badEnv) error { _, err := e.docs.Put(storh.Map(nil)); return err }, is: storh.ErrInvalidData, msg: "nil map"},
		{name: "put-nil-struct-pointer", run: func(e *badEnv) error { _, err := e.docs.Put((*deepStruct)(nil)); return err }, is: storh.ErrInvalidData, msg: "nil"},
		{name: "put-int", run: func(e *badEnv) error { _, err := e.docs.Put(42); return err }, is: storh.ErrInvalidData, msg: "must be a map or a struct, got int"},
		{name: "put-string", run: func(e *badEnv) error { _, err := e.docs.Put("text"); return err }, is: storh.ErrInvalidData, msg: "got string"},
		{name: "put-slice", run: func(e *badEnv) error { _, err := e.docs.Put([]any{1, 2}); return err }, is: storh.ErrInvalidData, msg: "got []interface {}"},
		{name: "put-int-keys", run: func(e *badEnv) error { _, err := e.docs.Put(map[int]any{1: 2}); return err }, is: storh.ErrInvalidData, msg: "keys must be strings"},
		{name: "put-nested-int-keys", run: func(e *badEnv) error { _, err := e.docs.Put(storh.Map{"m": map[int]int{1: 2}}); return err }, is: storh.ErrInvalidData, msg: "invalid data"},
		{name: "put-chan", run: func(e *badEnv) error { _, err := e.docs.Put(storh.Map{"c": make(chan int)}); return err }, is: storh.ErrInvalidData, msg: "chan"},
		{name: "put-func", run: func(e *badEnv) error { _, err := e.docs.Put(storh.Map{"f": func() {}}); return err }, is: storh.ErrInvalidData, msg: "func"},
		{name: "put-complex", run: func(e *badEnv) error { _, err := e.docs.Put(storh.Map{"c": complex(1, 2)}); return err }, is: storh.ErrInvalidData, msg: "complex"},
		{name: "put-too-large", run: func(e *badEnv) error {
			_, err := e.docs.Put(storh.Map{"b": make([]byte, storh.MaxRecordSize)})
			return err
		}, is: storh.ErrInvalidData, msg: fmt.Sprintf("the limit is %d", storh.MaxRecordSize)},
		{name: "put-too-deep-maps", run: func(e *badEnv) error { _, err := e.docs.Put(nest(storh.MaxDepth + 1)); return err }, is: storh.ErrInvalidData, msg: "nested deeper than 64"},
		{name: "put-too-deep-lists", run: func(e *badEnv) error { _, err := e.docs.Put(nestList(storh.MaxDepth + 1)); return err }, is: storh.ErrInvalidData, msg: "nested deeper than 64"},
		{name: "put-too-deep-structs", run: func(e *badEnv) error { _, err := e.docs.Put(deepChain(storh.MaxDepth + 1)); return err }, is: storh.ErrInvalidData, msg: "64"},
		{name: "put-cyclic-map", run: func(e *badEnv) error {
			m := storh.Map{}
			m["self"] = m
			_, err := e.docs.Put(m)
			return err
		}, is: storh.ErrInvalidData, msg: "cyclic"},
		{name: "put-cyclic-struct", run: func(e *badEnv) error {
			s := &deepStruct{}
			s.Next = s
			_, err := e.docs.Put(s)
			return err
		}, is: storh.ErrInvalidData, msg: "cyclic"},
		{name: "putmany-nil-item", run: func(e *badEnv) error { _, err := e.docs.PutMany([]any{storh.Map{"a": 1}, nil}); return err }, is: storh.ErrInvalidData, msg: "item 1"},
		{name: "putmany-nil-entry", run: func(e *badEnv) error { _, err := e.docs.PutMany([]any{(*storh.Entry)(nil)}); return err }, is: storh.ErrInvalidData, msg: "nil *Entry"},
		{name: "putstream-bad-item", run: func(e *badEnv) error {
			n, err := e.events.PutStream(func(yield func(any) bool) {
				_ = yield(storh.Map{"a": 1}) && yield(storh.Map{"c": make(chan int)}) && yield(storh.Map{"a": 3})
			})
			if n != 0 {
				return fmt.Errorf("storh: test: committed %d: %w", n, err)
			}
			return err
		}, is: storh.ErrInvalidData, msg: "item 1"},

		// --- names -------------------------------------------------------------
		{name: "name-empty", run: func(e *badEnv) error { _, err := e.db.Docs(""); return err }, is: storh.ErrInvalidName, msg: "empty"},
		{name: "name-too-long", run: func(e *badEnv) error {
			_, err := e.db.Docs(strings.Repeat("n", storh.MaxNameLength+1))
			return err
		}, is: storh.ErrInvalidName, msg: fmt.Sprintf("the limit is %d", storh.MaxNameLength)},
		{name: "name-nul", run: func(e *badEnv) error { _, err := e.db.Log("bad\x00name"); return err }, is: storh.ErrInvalidName, msg: "non-printable"},
		{name: "name-meta-bucket", run: func(e *badEnv) error { _, err := e.db.Docs("\x00storh"); return err }, is: storh.ErrInvalidName, msg: "non-printable"},
		{name: "name-invalid-utf8", run: func(e *badEnv) error { _, err := e.db.Docs("\xff\xfe"); return err }, is: storh.ErrInvalidName, msg: "UTF-8"},
		{name: "name-tab", run: func(e *badEnv) error { _, err := e.db.Queue("a\tb"); return err }, is: storh.ErrInvalidName, msg: "non-printable"},
		{name: "name-in-update", run: func(e *badEnv) error {
			return inUpdate(e, func(tx *storh.Tx) error { _, err := tx.Docs(""); return err })
		}, is: storh.ErrInvalidName, msg: "empty"},
		{name: "drop-missing", run: func(e *badEnv) error { return e.db.Drop("nope") }, is: storh.ErrNotFound, msg: `"nope"`},
		{name: "drop-invalid-name", run: func(e *badEnv) error { return e.db.Drop("") }, is: storh.ErrInvalidName, msg: "empty"},

		// --- queries -----------------------------------------------------------
		{name: "query-zero", run: func(e *badEnv) error { _, err := firstErr(e.docs.Stream(query.Query{})); return err }, is: storh.ErrInvalidQuery, msg: "query.All()"},
		{name: "query-limit-0", run: func(e *badEnv) error { _, err := firstErr(e.docs.Stream(query.All().Limit(0))); return err }, is: storh.ErrInvalidQuery, msg: "Limit(0)"},
		{name: "query-limit-negative", run: func(e *badEnv) error { _, err := firstErr(e.events.Stream(query.All().Limit(-5))); return err }, is: storh.ErrInvalidQuery, msg: "Limit(-5)"},
		{name: "query-empty-field", run: func(e *badEnv) error { _, err := firstErr(e.docs.Stream(query.All().WhereEqual("", 1))); return err }, is: storh.ErrInvalidQuery, msg: "field name"},
		{name: "query-long-field", run: func(e *badEnv) error {
			_, err := firstErr(e.docs.Stream(query.All().WhereEqual(strings.Repeat("f", query.MaxFieldLength+1), 1)))
			return err
		}, is: storh.ErrInvalidQuery, msg: "the limit is 1024"},
		{name: "query-chan-value", run: func(e *badEnv) error {
			_, err := firstErr(e.docs.Stream(query.All().WhereEqual("a", make(chan int))))
			return err
		}, is: storh.ErrInvalidQuery, msg: "cannot be stored"},
		{name: "query-struct-value", run: func(e *badEnv) error {
			_, err := firstErr(e.docs.Stream(query.All().WhereEqual("a", struct{ X int }{1})))
			return err
		}, is: storh.ErrInvalidQuery, msg: "cannot be stored"},
		{name: "query-invalid-in-tx", run: func(e *badEnv) error {
			return e.db.View(func(tx *storh.Tx) error {
				d, err := tx.Docs("docs")
				if err != nil {
					return err
				}
				_, err = firstErr(d.Stream(query.All().Limit(0)))
				return err
			})
		}, is: storh.ErrInvalidQuery, msg: "Limit(0)"},

		// --- kinds -------------------------------------------------------------
		{name: "kind-log-on-docs", run: func(e *badEnv) error { _, err := e.db.Log("docs"); return err }, is: storh.ErrWrongKind, msg: `open it with db.Docs("docs")`},
		{name: "kind-docs-on-log", run: func(e *badEnv) error { _, err := e.db.Docs("events"); return err }, is: storh.ErrWrongKind, msg: "is a log collection"},
		{name: "kind-queue-on-docs", run: func(e *badEnv) error { _, err := e.db.Queue("docs"); return err }, is: storh.ErrWrongKind, msg: "not queue"},
		{name: "kind-in-update", run: func(e *badEnv) error {
			return inUpdate(e, func(tx *storh.Tx) error { _, err := tx.Log("docs"); return err })
		}, is: storh.ErrWrongKind, msg: "docs collection"},
		{name: "kind-in-view", run: func(e *badEnv) error {
			return e.db.View(func(tx *storh.Tx) error { _, err := tx.Docs("events"); return err })
		}, is: storh.ErrWrongKind, msg: "log collection"},

		// --- closed database ---------------------------------------------------
		{name: "closed-docs", run: func(e *badEnv) error { e.db.Close(); _, err := e.db.Docs("docs"); return err }, is: storh.ErrClosed, msg: "open it again"},
		{name: "closed-put", run: func(e *badEnv) error { e.db.Close(); _, err := e.docs.Put(storh.Map{"a": 1}); return err }, is: storh.ErrClosed, msg: "closed"},
		{name: "closed-putmany", run: func(e *badEnv) error {
			e.db.Close()
			_, err := e.events.PutMany([]any{storh.Map{"a": 1}})
			return err
		}, is: storh.ErrClosed, msg: "closed"},
		{name: "closed-delete", run: func(e *badEnv) error { e.db.Close(); return e.docs.Delete(e.docID) }, is: storh.ErrClosed, msg: "closed"},
		{name: "closed-get", run: func(e *badEnv) error { e.db.Close(); _, err := e.docs.Get(e.docID); return err }, is: storh.ErrClosed, msg: "closed"},
		{name: "closed-count", run: func(e *badEnv) error { e.db.Close(); _, err := e.events.Count(); return err }, is: storh.ErrClosed, msg: "closed"},
		{name: "closed-stream", run: func(e *badEnv) error { e.db.Close(); _, err := firstErr(e.docs.Stream(query.All())); return err }, is: storh.ErrClosed, msg: "closed"},
		{name: "closed-update", run: func(e *badEnv) error {
			e.db.Close()
			return e.db.Update(func(*storh.Tx) error { return nil })
		}, is: storh.ErrClosed, msg: "closed"},
		{name: "closed-view", run: func(e *badEnv) error { e.db.Close(); return e.db.View(func(*storh.Tx) error { return nil }) }, is: storh.ErrClosed, msg: "closed"},
		{name: "closed-verify", run: func(e *badEnv) error { e.db.Close(); _, err := e.db.Verify(nil); return err }, is: storh.ErrClosed, msg: "closed"},
		{name: "closed-twice", run: func(e *badEnv) error {
			// A second Close is nil, as in bbolt; the database stays closed.
			if err := e.db.Close(); err != nil {
				return err
			}
			if err := e.db.Close(); err != nil {
				return fmt.Errorf("second Close: %w", errors.Join(err, errors.New("want nil")))
			}
			_, err := e.docs.Put(storh.Map{"a": 1})
			return err
		}, is: storh.ErrClosed, msg: "closed"},
		{name: "closed-iterator-after-close", run: func(e *badEnv) error {
			seq := e.docs.Stream(query.All())
			for range seq {
				break
			}
			e.db.Close()
			_, err := firstErr(seq)
			return err
		}, is: storh.ErrClosed, msg: "closed"},
		{name: "closed-during-iteration", run: func(e *badEnv) error {
			// The records already read in a chunk may still arrive; the
			// next chunk must fail with ErrClosed, not hang or read freed
			// memory.
			n := 0
			for _, err := range e.docs.Stream(query.All()) {
				if err != nil {
					return err
				}
				if n++; n == 10 {
					if err := e.db.Close(); err != nil {
						return err
					}
				}
			}
			return fmt.Errorf("storh: test: the stream ended after %d records without an error", n)
		}, is: storh.ErrClosed, msg: "closed"},
		{name: "iterator-reused-after-break", run: func(e *badEnv) error {
			// Decision: a Stream is a recipe, not a cursor: ranging over it
			// again after a break starts over and sees the same records.
			seq := e.docs.Stream(query.All().Limit(5))
			var first, second []uuidv7.UUID
			for rec, err := range seq {
				if err != nil {
					return err
				}
				if first = append(first, rec.ID); len(first) == 2 {
					break
				}
			}
			for rec, err := range seq {
				if err != nil {
					return err
				}
				second = append(second, rec.ID)
			}
			if len(second) != 5 || second[0] != first[0] || second[1] != first[1] {
				return fmt.Errorf("storh: test: second range gave %v after %v", second, first)
			}
			return nil
		}},
		{name: "tx-handle-after-update", run: func(e *badEnv) error {
			var d *storh.Docs
			if err := e.db.Update(func(tx *storh.Tx) error { var err error; d, err = tx.Docs("docs"); return err }); err != nil {
				return err
			}
			_, err := d.Put(storh.Map{"late": true})
			return err
		}, is: storh.ErrClosed, msg: "closed"},
		{name: "tx-stream-after-view", run: func(e *badEnv) error {
			var seq iter.Seq2[storh.Record, error]
			if err := e.db.View(func(tx *storh.Tx) error {
				d, err := tx.Docs("docs")
				seq = d.Stream(query.All())
				return err
			}); err != nil {
				return err
			}
			_, err := firstErr(seq)
			return err
		}, is: storh.ErrClosed, msg: "closed"},
		{name: "tx-open-after-view", run: func(e *badEnv) error {
			var keep *storh.Tx
			if err := e.db.View(func(tx *storh.Tx) error { keep = tx; return nil }); err != nil {
				return err
			}
			_, err := keep.Docs("docs")
			return err
		}, is: storh.ErrClosed, msg: "closed"},

		// --- writes inside View, nested calls -----------------------------------
		{name: "view-put", run: func(e *badEnv) error {
			return e.db.View(func(tx *storh.Tx) error {
				d, err := tx.Docs("docs")
				if err != nil {
					return err
				}
				_, err = d.Put(storh.Map{"a": 1})
				return err
			})
		}, is: storh.ErrReadOnly, msg: "read-only"},
		{name: "view-putwithid", run: func(e *badEnv) error {
			return e.db.View(func(tx *storh.Tx) error {
				l, err := tx.Log("events")
				if err != nil {
					return err
				}
				_, err = l.PutWithID(uuidv7.New(), storh.Map{"a": 1})
				return err
			})
		}, is: storh.ErrReadOnly, msg: "read-only"},
		{name: "view-delete", run: func(e *badEnv) error {
			return e.db.View(func(tx *storh.Tx) error {
				d, err := tx.Docs("docs")
				if err != nil {
					return err
				}
				return d.Delete(e.docID)
			})
		}, is: storh.ErrReadOnly, msg: "read-only"},
		{name: "view-putmany", run: func(e *badEnv) error {
			return e.db.View(func(tx *storh.Tx) error {
				d, err := tx.Docs("docs")
				if err != nil {
					return err
				}
				_, err = d.PutMany([]any{storh.Map{"a": 1}})
				return err
			})
		}, is: storh.ErrReadOnly, msg: "read-only"},
		{name: "view-putstream", run: func(e *badEnv) error {
			return e.db.View(func(tx *storh.Tx) error {
				d, err := tx.Docs("docs")
				if err != nil {
					return err
				}
				_, err = d.PutStream(func(yield func(any) bool) { yield(storh.Map{"a": 1}) })
				return err
			})
		}, is: storh.ErrReadOnly, msg: "read-only"},
		{name: "view-create-collection", run: func(e *badEnv) error {
			return e.db.View(func(tx *storh.Tx) error { _, err := tx.Docs("new-in-view"); return err })
		}, is: storh.ErrNotFound, msg: `"new-in-view" does not exist`},
		{name: "nested-db-put-in-update", run: func(e *badEnv) error {
			return inUpdate(e, func(tx *storh.Tx) error { _, err := e.docs.Put(storh.Map{"a": 1}); return err })
		}, is: storh.ErrNestedTx, msg: "tx.Docs"},
		{name: "nested-update-in-view", run: func(e *badEnv) error {
			return e.db.View(func(tx *storh.Tx) error { return e.db.Update(func(*storh.Tx) error { return nil }) })
		}, is: storh.ErrNestedTx, msg: "inside a transaction"},
		{name: "nested-close-in-update", run: func(e *badEnv) error {
			return inUpdate(e, func(tx *storh.Tx) error { return e.db.Close() })
		}, is: storh.ErrNestedTx, msg: "inside a transaction"},
		{name: "nested-get-in-view", run: func(e *badEnv) error {
			return e.db.View(func(tx *storh.Tx) error { _, err := e.docs.Get(e.docID); return err })
		}, is: storh.ErrNestedTx, msg: "inside a transaction"},

		// --- rollback ------------------------------------------------------------
		{name: "update-error-rolls-back", run: func(e *badEnv) error {
			return inUpdate(e, func(tx *storh.Tx) error {
				d, err := tx.Docs("docs")
				if err != nil {
					return err
				}
				for i := range 3 {
					if _, err := d.Put(storh.Map{"i": i}); err != nil {
						return err
					}
				}
				if err := d.Delete(e.docID); err != nil {
					return err
				}
				if _, err := tx.Log("created-then-rolled-back"); err != nil {
					return err
				}
				return abort
			})
		}, is: abort, msg: "abort"},
		{name: "update-panic-rolls-back", run: func(e *badEnv) (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("%w: %v", errPanicked, r)
				}
			}()
			return inUpdate(e, func(tx *storh.Tx) error {
				d, _ := tx.Docs("docs")
				d.Put(storh.Map{"a": 1})
				panic("boom")
			})
		}, is: errPanicked, msg: "boom"},
		{name: "update-partial-putmany-rolled-back", run: func(e *badEnv) error {
			return inUpdate(e, func(tx *storh.Tx) error {
				l, err := tx.Log("events")
				if err != nil {
					return err
				}
				_, err = l.PutMany([]any{storh.Map{"a": 1}, storh.Entry{ID: e.logID, Data: storh.Map{"dup": true}}})
				return err // returning it rolls back the part already written
			})
		}, is: storh.ErrExists, msg: "item 1"},

		// --- read-only database ----------------------------------------------------
		{name: "readonly-put", opts: []storh.Option{storh.WithReadOnly()}, run: func(e *badEnv) error { _, err := e.docs.Put(storh.Map{"a": 1}); return err }, is: storh.ErrReadOnly, msg: "read-only"},
		{name: "readonly-update", opts: []storh.Option{storh.WithReadOnly()}, run: func(e *badEnv) error {
			return e.db.Update(func(*storh.Tx) error { return nil })
		}, is: storh.ErrReadOnly, msg: "read-only"},
		{name: "readonly-new-collection", opts: []storh.Option{storh.WithReadOnly()}, run: func(e *badEnv) error { _, err := e.db.Docs("fresh"); return err }, is: storh.ErrNotFound, msg: "read-only"},
		{name: "readonly-repair", opts: []storh.Option{storh.WithReadOnly()}, run: func(e *badEnv) error { _, err := e.db.Repair(nil); return err }, is: storh.ErrReadOnly, msg: "read-only"},

		// --- options and files -------------------------------------------------------
		{name: "option-lock-timeout-zero", noOpen: true, run: func(e *badEnv) error { _, err := storh.Open(e.path, storh.WithLockTimeout(0)); return err }, msg: "must be positive"},
		{name: "option-max-batch-zero", noOpen: true, run: func(e *badEnv) error { _, err := storh.Open(e.path, storh.WithMaxBatch(0)); return err }, msg: "at least 1"},
		{name: "option-mmap-negative", noOpen: true, run: func(e *badEnv) error { _, err := storh.Open(e.path, storh.WithInitialMmapSize(-1)); return err }, msg: "must not be negative"},
		{name: "option-deterministic-range", run: func(e *badEnv) error { _, err := e.db.Docs("docs", storh.WithDeterministicIDs(1, -1)); return err }, is: uuidv7.ErrTimestampRange, msg: "WithDeterministicIDs"},
		{name: "open-readonly-missing", noOpen: true, run: func(e *badEnv) error {
			_, err := storh.Open(e.path+".missing", storh.WithReadOnly())
			return err
		}, is: storh.ErrNotFound, msg: "read-only open needs an existing database"},
		{name: "open-not-a-database", noOpen: true, file: func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strings.Repeat("this is not a database\n", 2000)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, run: func(e *badEnv) error { _, err := storh.Open(e.path); return err }, is: storh.ErrCorrupt, msg: "not a storh database"},
		{name: "open-foreign-bbolt", noOpen: true, file: func(t *testing.T, path string) {
			bdb, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer bdb.Close()
			if err := bdb.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("widgets"))
				if err == nil {
					err = b.Put([]byte("k"), []byte("v"))
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}, run: func(e *badEnv) error { _, err := storh.Open(e.path); return err }, is: storh.ErrCorrupt, msg: "not a storh database"},
		{name: "open-future-format", noOpen: true, file: func(t *testing.T, path string) {
			buildDB(t, path, 1, 0, 0)
			rawUpdate(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("\x00storh")).Put([]byte("format"), []byte{0, 0, 0, 0, 0, 0, 0, 99})
			})
		}, run: func(e *badEnv) error { _, err := storh.Open(e.path); return err }, is: storh.ErrCorrupt, msg: "format 99"},
		{name: "open-directory", noOpen: true, run: func(e *badEnv) error { _, err := storh.Open(dirOf(e.path)); return err }, msg: "storh: open"},
		{name: "backup-onto-itself", run: func(e *badEnv) error { _, err := e.db.BackupFile(e.path); return err }, msg: "is the database file itself"},
		{name: "compact-onto-existing", noOpen: true, run: func(e *badEnv) error { _, err := storh.Compact(e.path, e.path); return err }, is: storh.ErrExists, msg: "already exists"},
	}
}

func dirOf(path string) string { return path[:strings.LastIndexByte(path, '/')] }

var (
	badTemplateOnce sync.Once
	badTemplatePath string
	badTemplateMan  manifest
)

// badTemplate builds the shared template database once per run.
func badTemplate(t *testing.T) (string, manifest) {
	badTemplateOnce.Do(func() {
		badTemplatePath = runDir + "/badinput-template.db"
		badTemplateMan = buildDB(t, badTemplatePath, 300, 300, 0)
	})
	return badTemplatePath, badTemplateMan
}

// TestBadInputAPI runs the API rows of the bad-input table.
func TestBadInputAPI(t *testing.T) {
	t.Parallel()
	template, man := badTemplate(t)
	docIDs, logIDs := sortedIDs(man["docs"]), sortedIDs(man["events"])
	cases := badCases()
	names := map[string]bool{}
	for _, c := range cases {
		if names[c.name] {
			t.Fatalf("duplicate row %q", c.name)
		}
		names[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			path := scratch(t, "bad.db")
			if c.file != nil {
				c.file(t, path)
			} else {
				copyFile(t, template, path)
			}
			before := fileDigest(t, path)
			e := &badEnv{t: t, path: path, docID: docIDs[len(docIDs)/2], logID: logIDs[len(logIDs)/2]}
			if !c.noOpen {
				db, err := storh.Open(path, c.opts...)
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				e.db = db
				if e.docs, err = db.Docs("docs"); err != nil {
					t.Fatal(err)
				}
				if e.events, err = db.Log("events"); err != nil {
					t.Fatal(err)
				}
			}
			err := runRow(t, c, e)
			if e.db != nil {
				if cerr := e.db.Close(); cerr != nil && !errors.Is(cerr, storh.ErrClosed) {
					t.Errorf("Close: %v", cerr)
				}
			}
			checkRowErr(t, err, c.is, c.msg)
			if after := fileDigest(t, path); after != before {
				t.Errorf("the database changed")
			}
		})
	}
	t.Logf("%d API rows", len(cases))
}

// runRow runs one row with a hang guard: a call that deadlocks fails the
// row instead of the whole run.
func runRow(t *testing.T, c badCase, e *badEnv) error {
	done := make(chan error, 1)
	go func() { done <- c.run(e) }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no return within 30 s (deadlock?)", c.name)
		return nil
	}
}

// checkRowErr asserts the outcome of one row.
func checkRowErr(t *testing.T, err, is error, msg string) {
	t.Helper()
	if is == nil && msg == "" {
		if err != nil {
			t.Errorf("want success, got %v", err)
		}
		return
	}
	if err == nil {
		t.Errorf("want an error (errors.Is %v, mentioning %q), got success", is, msg)
		return
	}
	if is != nil && !errors.Is(err, is) {
		t.Errorf("error %q: want errors.Is(err, %v)", err, is)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("error %q does not mention %q", err, msg)
	}
	if !hasPackagePrefix(err.Error()) {
		t.Errorf("error %q does not start with its package name", err)
	}
}

// fileDigest digests a database file, or the file's bytes when it is not a
// database at all (rows that must leave a foreign file alone).
func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "absent"
	}
	if err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return fmt.Sprintf("bytes:%x", sha(b))
	}
	defer bdb.Close()
	var sum string
	if err := bdb.View(func(tx *bolt.Tx) error { sum = testkit.DigestBolt(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	return sum
}
