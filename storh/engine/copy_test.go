package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/errs"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The copy's tests run between two database files: the copy only sees the
// kv contract, and the storh package runs the same copies to and from
// PostgreSQL.

func openCopyDB(t testing.TB, dir, name string) *DB {
	t.Helper()
	db, err := Open(filepath.Join(dir, name), Options{UnsafeNoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// tree is a bucket's content for the tests: a key holds a value (string)
// or a nested bucket (tree).
type tree map[string]any

// writeTree writes t under the top level of db, in one transaction.
func writeTree(t testing.TB, db *DB, top tree) {
	t.Helper()
	var put func(b kv.Bucket, tr tree) error
	put = func(b kv.Bucket, tr tree) error {
		for k, v := range tr {
			if sub, ok := v.(tree); ok {
				nb, err := b.CreateBucketIfNotExists([]byte(k))
				if err == nil {
					err = put(nb, sub)
				}
				if err != nil {
					return err
				}
				continue
			}
			if err := b.Put([]byte(k), []byte(v.(string))); err != nil {
				return err
			}
		}
		return nil
	}
	err := db.run(true, func(tx kv.Tx) error {
		for k, v := range top {
			b, err := tx.CreateBucketIfNotExists([]byte(k))
			if err == nil {
				err = put(b, v.(tree))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dumpKV renders every bucket, key and value of db through the kv
// contract's Bucket calls (not the copy's walker, which it checks).
func dumpKV(t testing.TB, db *DB) string {
	t.Helper()
	var b strings.Builder
	var walk func(c kv.Cursor, open func([]byte) kv.Bucket, depth int)
	walk = func(c kv.Cursor, open func([]byte) kv.Bucket, depth int) {
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v != nil {
				fmt.Fprintf(&b, "%*s%q=%q\n", depth, "", k, v)
				continue
			}
			child := open(k)
			fmt.Fprintf(&b, "%*s%q {\n", depth, "", k)
			walk(child.Cursor(), child.Bucket, depth+1)
			fmt.Fprintf(&b, "%*s}\n", depth, "")
		}
	}
	if err := db.run(false, func(tx kv.Tx) error {
		walk(tx.Cursor(), tx.Bucket, 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// fillColls gives db a docs collection with a unique and a plain index and
// a log, through the engine.
func fillColls(t testing.TB, db *DB, n int) {
	t.Helper()
	if err := db.Enter(); err != nil {
		t.Fatal(err)
	}
	defer db.Exit()
	err := db.Update(func(tx *Tx) error {
		docs, err := tx.Coll("pages", KindDocs, true)
		if err != nil {
			return err
		}
		if err := tx.EnsureIndexes(docs, []IndexSpec{
			{Name: "slug", Paths: [][]string{{"slug"}}, Unique: true},
			{Name: "tags", Paths: [][]string{{"tags"}}},
		}); err != nil {
			return err
		}
		logs, err := tx.Coll("events", KindLog, true)
		if err != nil {
			return err
		}
		for i := range n {
			id, err := uuidv7.NewAt(int64(1000 + i))
			if err != nil {
				return err
			}
			v, err := AppendValue(nil, map[string]any{"slug": fmt.Sprintf("p%04d", i), "tags": []any{"a", fmt.Sprint(i % 3)}})
			if err == nil {
				err = tx.Put(docs, id, v, true)
			}
			if err != nil {
				return err
			}
			v, err = AppendValue(nil, map[string]any{"i": i})
			if err == nil {
				err = tx.Put(logs, id, v, true)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A store of every shape (collections with indexes, empty buckets, empty
// values, binary keys, buckets nested four deep, a top-level bucket that
// sorts before the metadata bucket) comes across whole, in many small
// transactions, and the destination verifies clean.
func TestCopyEverything(t *testing.T) {
	dir := t.TempDir()
	src, dst := openCopyDB(t, dir, "src.db"), openCopyDB(t, dir, "dst.db")
	fillColls(t, src, 300)
	writeTree(t, src, tree{
		"\x00quarantine": tree{"\x00\x01": "stray", "empty": tree{}},
		"\xffodd": tree{
			"a": tree{"b": tree{"c": tree{"d": "deep", "\x00": "x"}}},
			"e": "",
			"z": tree{},
		},
	})
	var batches []api.CopyProgress
	rep, err := src.CopyTo(context.Background(), dst, CopyOptions{BatchKeys: 50, Progress: func(p api.CopyProgress) {
		if p.Phase == api.PhaseCopy {
			batches = append(batches, p)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dumpKV(t, dst), dumpKV(t, src); got != want {
		t.Fatalf("the copy differs from its source:\n%.3000s\nwant\n%.3000s", got, want)
	}
	if rep.Collections != 2 || rep.Records != 600 || rep.Copied.Records != 600 || rep.Copied.TotalRecords != 600 {
		t.Errorf("report: %d collections, %d records (copied %d of %d); want 2, 600", rep.Collections, rep.Records, rep.Copied.Records, rep.Copied.TotalRecords)
	}
	if rep.Copied.Keys != rep.Keys || rep.Copied.Buckets != rep.Buckets || rep.Copied.Bytes != rep.Bytes || rep.ResumedAt != "" {
		t.Errorf("a copy from the start copied %+v; the store has %d buckets, %d keys, %d bytes", rep.Copied, rep.Buckets, rep.Keys, rep.Bytes)
	}
	if n := len(batches) - 1; n != rep.Copied.Batches || int64(n) < (rep.Keys+rep.Buckets)/50 {
		t.Errorf("%d progress calls after batches for %d batches of %d entries", n, rep.Copied.Batches, rep.Keys+rep.Buckets)
	}
	if rep.Checksum == [32]byte{} {
		t.Error("no checksum")
	}
	if err := dst.Enter(); err != nil {
		t.Fatal(err)
	}
	defer dst.Exit()
	vr, err := dst.Verify(context.Background(), []string{"pages", "events"}, func(p api.Problem) { t.Errorf("destination: %v", p) })
	if err != nil || vr.Records != 600 {
		t.Errorf("Verify of the destination: %+v, %v", vr, err)
	}
}

// A copy stopped after every single batch, and run again each time, goes
// on exactly where it stopped: with one entry per batch this resumes at
// every entry of the store, buckets included, and copies each once.
func TestCopyResumesAtEveryEntry(t *testing.T) {
	for _, keys := range []int{1, 2, 7} {
		t.Run(fmt.Sprint(keys), func(t *testing.T) {
			dir := t.TempDir()
			src, dst := openCopyDB(t, dir, "src.db"), openCopyDB(t, dir, "dst.db")
			fillColls(t, src, 20)
			writeTree(t, src, tree{
				"\x00a": tree{"e": tree{}, "f": tree{"g": tree{}}},
				"\x01b": tree{"x": tree{"y": tree{"z": "v"}}, "y": ""},
			})
			var total api.CopyProgress
			for run := 1; ; run++ {
				if run > 2000 {
					t.Fatal("the copy does not end")
				}
				ctx, cancel := context.WithCancel(context.Background())
				rep, err := src.CopyTo(ctx, dst, CopyOptions{BatchKeys: keys, Progress: func(p api.CopyProgress) {
					if p.Phase == api.PhaseCopy && p.Batches == 1 {
						cancel()
					}
				}})
				cancel()
				total.Keys += rep.Copied.Keys
				total.Buckets += rep.Copied.Buckets
				total.Records += rep.Copied.Records
				if (run == 1) != (rep.ResumedAt == "") {
					t.Fatalf("run %d: resumed at %q", run, rep.ResumedAt)
				}
				if err == nil {
					if total.Keys != rep.Keys || total.Buckets != rep.Buckets || total.Records != 40 {
						t.Fatalf("the runs copied %d keys, %d buckets, %d records; the store has %d keys, %d buckets, 40 records",
							total.Keys, total.Buckets, total.Records, rep.Keys, rep.Buckets)
					}
					break
				}
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("run %d: %v", run, err)
				}
			}
			if got, want := dumpKV(t, dst), dumpKV(t, src); got != want {
				t.Fatalf("the copy differs from its source:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// A destination with data of its own is refused and left as it was; so is
// one holding another source's unfinished copy, and a source that is
// itself an unfinished copy.
func TestCopyRefuses(t *testing.T) {
	dir := t.TempDir()
	src, other := openCopyDB(t, dir, "src.db"), openCopyDB(t, dir, "other.db")
	fillColls(t, src, 5)
	writeTree(t, other, tree{"\x01x": tree{"k": "v"}})
	before := dumpKV(t, other)
	if _, err := src.CopyTo(context.Background(), other, CopyOptions{}); !errors.Is(err, errs.ErrNotEmpty) || !strings.Contains(err.Error(), `0x0178`) {
		t.Errorf("copy into a store with a bucket: %v; want errs.ErrNotEmpty naming it", err)
	}
	if got := dumpKV(t, other); got != before {
		t.Errorf("a refused destination changed:\n%s\nwas\n%s", got, before)
	}
	full := openCopyDB(t, dir, "full.db")
	fillColls(t, full, 1)
	if _, err := src.CopyTo(context.Background(), full, CopyOptions{}); !errors.Is(err, errs.ErrNotEmpty) || !strings.Contains(err.Error(), `"events"`) {
		t.Errorf("copy into a store with collections: %v; want errs.ErrNotEmpty naming one", err)
	}
	if _, err := src.CopyTo(context.Background(), src, CopyOptions{}); err == nil {
		t.Error("a copy into itself succeeded")
	}

	// An unfinished copy from src into half.db.
	half := openCopyDB(t, dir, "half.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := src.CopyTo(ctx, half, CopyOptions{BatchKeys: 3, Progress: func(p api.CopyProgress) {
		if p.Batches == 2 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted copy: %v", err)
	}
	before = dumpKV(t, half)
	third := openCopyDB(t, dir, "third.db")
	fillColls(t, third, 1)
	if _, err := third.CopyTo(context.Background(), half, CopyOptions{}); !errors.Is(err, errs.ErrNotEmpty) || !strings.Contains(err.Error(), "src.db") {
		t.Errorf("copy into another source's unfinished copy: %v; want errs.ErrNotEmpty naming it", err)
	}
	if got := dumpKV(t, half); got != before {
		t.Error("a refused unfinished copy changed")
	}
	if _, err := half.CopyTo(context.Background(), openCopyDB(t, dir, "fourth.db"), CopyOptions{}); !errors.Is(err, errs.ErrMismatch) {
		t.Errorf("copy from an unfinished copy: %v; want errs.ErrMismatch", err)
	}
	if _, err := src.CopyTo(context.Background(), half, CopyOptions{}); err != nil {
		t.Errorf("resuming it: %v", err)
	}
}

// What changed in the part already copied, on either side, between an
// interrupted run and the next, fails the verification at the end, naming
// the entry; the destination keeps its mark, so it stays refused by other
// sources and its verification fails again until it is started over.
func TestCopyVerificationFindsChanges(t *testing.T) {
	cases := []struct {
		name   string
		change func(src, dst *DB) error
		detail string
	}{
		{"source value", func(src, dst *DB) error {
			return src.run(true, func(tx kv.Tx) error { return tx.Bucket([]byte("\x01a")).Put([]byte("k1"), []byte("changed")) })
		}, `0x0161/k1: the values differ`},
		{"source key deleted", func(src, dst *DB) error {
			return src.run(true, func(tx kv.Tx) error { return tx.Bucket([]byte("\x01a")).Delete([]byte("k1")) })
		}, `0x0161/k1: in the destination only`},
		{"destination key added", func(src, dst *DB) error {
			return dst.run(true, func(tx kv.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("\x01a"))
				if err != nil {
					return err
				}
				return b.Put([]byte("k0"), []byte("extra"))
			})
		}, `0x0161/k0: in the destination only`},
		{"source key added", func(src, dst *DB) error {
			return src.run(true, func(tx kv.Tx) error { return tx.Bucket([]byte("\x01a")).Put([]byte("k0"), []byte("new")) })
		}, `0x0161/k0: missing from the destination`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := openCopyDB(t, dir, "src.db"), openCopyDB(t, dir, "dst.db")
			writeTree(t, src, tree{"\x01a": tree{"k1": "v1", "k2": "v2", "k3": "v3"}, "\x01b": tree{"k": "v"}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Batch 1 is the metadata bucket and its format key; batch 2
			// copies \x01a and k1.
			_, err := src.CopyTo(ctx, dst, CopyOptions{BatchKeys: 2, Progress: func(p api.CopyProgress) {
				if p.Batches == 2 {
					cancel()
				}
			}})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted copy: %v", err)
			}
			if err := tc.change(src, dst); err != nil {
				t.Fatal(err)
			}
			_, err = src.CopyTo(context.Background(), dst, CopyOptions{BatchKeys: 2})
			var me *errs.MismatchError
			if !errors.As(err, &me) || !errors.Is(err, errs.ErrMismatch) || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("resumed copy: %v; want a MismatchError at %s", err, tc.detail)
			}
			if _, err := src.CopyTo(context.Background(), dst, CopyOptions{}); !errors.As(err, &me) {
				t.Errorf("running it again: %v; want the mismatch again", err)
			}
		})
	}
}

// The position the copy keeps reads back as written.
func TestCopyMarker(t *testing.T) {
	for _, pos := range [][][]byte{nil, {[]byte("a")}, {[]byte("\x00storh"), []byte("format")}, {[]byte("c"), []byte("r"), bytes.Repeat([]byte{0xff}, 300)}} {
		src, got, err := decodeMarker(encodeMarker("postgres://h/db", pos))
		if err != nil || src != "postgres://h/db" || fmt.Sprint(got) != fmt.Sprint(pos) {
			t.Errorf("marker of %q reads back as %q, %q, %v", pos, src, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {2}, {1, 5, 'a'}, {1, 1, 'a', 0}, {1, 1, 'a', 3, 'b'}} {
		if _, _, err := decodeMarker(bad); !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("damaged marker %q: %v", bad, err)
		}
	}
	// A copy made before password parameters were masked recorded them:
	// they read back masked, as the source's name now is.
	src, _, err := decodeMarker(encodeMarker("postgres://app@/db?host=/run&password=hunter2", nil))
	if err != nil || src != "postgres://app@/db?host=/run&password=xxxxx" {
		t.Errorf("a marker with a password reads back as %q, %v", src, err)
	}
}

// Random stores, copied in random batches and interrupted at random
// points, come across equal.
func TestCopyRandomStores(t *testing.T) {
	dir := t.TempDir()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		src := openCopyDB(t, dir, fmt.Sprintf("src%d.db", n))
		dst := openCopyDB(t, dir, fmt.Sprintf("dst%d.db", n))
		key := rapid.StringOfN(rapid.SampledFrom([]rune{'\x00', 'a', 'b', 'r', 'ÿ'}), 1, 3, -1)
		var gen func(depth int) *rapid.Generator[tree]
		gen = func(depth int) *rapid.Generator[tree] {
			return rapid.Custom(func(rt *rapid.T) tree {
				tr := tree{}
				for range rapid.IntRange(0, 5).Draw(rt, "n") {
					k := key.Draw(rt, "key")
					if depth < 3 && rapid.Bool().Draw(rt, "bucket") {
						tr[k] = gen(depth+1).Draw(rt, "sub")
					} else {
						tr[k] = rapid.StringN(0, 3, -1).Draw(rt, "value")
					}
				}
				return tr
			})
		}
		top := tree{}
		for range rapid.IntRange(0, 4).Draw(rt, "top") {
			// Top-level names that no collection can have: the engine's
			// statistics would take a printable one for a damaged collection.
			top[string(rune(rapid.IntRange(1, 8).Draw(rt, "first")))+key.Draw(rt, "name")] = gen(1).Draw(rt, "bucket")
		}
		writeTree(t, src, top)
		keys := rapid.IntRange(1, 10).Draw(rt, "batch")
		stops := rapid.SliceOfN(rapid.IntRange(1, 5), 0, 3).Draw(rt, "stops")
		finished := false
		for _, stop := range stops {
			ctx, cancel := context.WithCancel(context.Background())
			_, err := src.CopyTo(ctx, dst, CopyOptions{BatchKeys: keys, Progress: func(p api.CopyProgress) {
				if p.Batches == stop {
					cancel()
				}
			}})
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				rt.Fatalf("interrupted copy: %v", err)
			}
			if finished = err == nil; finished {
				break
			}
		}
		if !finished {
			if _, err := src.CopyTo(context.Background(), dst, CopyOptions{BatchKeys: keys}); err != nil {
				rt.Fatalf("copy: %v", err)
			}
		}
		if got, want := dumpKV(t, dst), dumpKV(t, src); got != want {
			rt.Fatalf("the copy differs from its source:\n%s\nwant\n%s", got, want)
		}
	})
}
