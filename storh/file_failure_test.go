package storh_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestFileCutWhileOpen: another program cuts the database file to a few
// pages while it is open, meta pages included or not. The first call that
// reads what is gone meets a fault on the mapping, inside bbolt's Begin
// when the meta pages are gone, where bbolt keeps its locks. Every public
// call after the cut returns ErrCorrupt, none waits, whichever call comes
// first; Close returns too (with the failure), and releases the file, so
// that once a backup is put back at the path the database opens and reads
// whole.
func TestFileCutWhileOpen(t *testing.T) {
	fileOnly(t)
	type fixture struct {
		db   *storh.DB
		docs *storh.Docs
		log  *storh.Log
		q    *storh.Queue
		id   uuidv7.UUID // a record of docs
	}
	type call struct {
		name string
		run  func(f fixture) error
	}
	calls := []call{
		{"Get", func(f fixture) error { _, err := f.docs.Get(f.id); return err }},
		{"Put", func(f fixture) error { _, err := f.docs.Put(storh.Map{"n": 1}); return err }},
		{"Stream", func(f fixture) error {
			_, err := streamErr(f.docs.Stream(query.All().Limit(5)))
			return err
		}},
		{"Stats", func(f fixture) error { _, err := f.db.Stats(); return err }},
		{"Verify", func(f fixture) error { _, err := f.db.Verify(nil); return err }},
		{"Update", func(f fixture) error {
			return f.db.Update(func(tx *storh.Tx) error {
				d, err := tx.Docs("d")
				if err != nil {
					return err
				}
				_, err = d.Put(storh.Map{"n": 2})
				return err
			})
		}},
		{"View", func(f fixture) error {
			return f.db.View(func(tx *storh.Tx) error {
				d, err := tx.Docs("d")
				if err != nil {
					return err
				}
				_, err = d.Get(f.id)
				return err
			})
		}},
		{"Claim", func(f fixture) error { _, err := f.q.Claim(time.Minute); return err }},
		{"GetRaw", func(f fixture) error { return f.docs.GetRaw(f.id, func([]byte) error { return nil }) }},
		{"Delete", func(f fixture) error { return f.docs.Delete(f.id) }},
		{"Count", func(f fixture) error { _, err := f.docs.Count(); return err }},
		{"Find", func(f fixture) error { _, err := f.log.Find(all()); return err }},
		{"CountMatching", func(f fixture) error {
			_, err := f.docs.CountMatching(query.All().Where(query.Field("i").Eq(7)))
			return err
		}},
		{"Collections", func(f fixture) error { _, err := f.db.Collections(); return err }},
		{"Docs", func(f fixture) error { _, err := f.db.Docs("new"); return err }},
		{"Enqueue", func(f fixture) error { _, err := f.q.Enqueue(storh.Map{"j": 1}); return err }},
		{"Backup", func(f fixture) error { _, err := f.db.Backup(io.Discard); return err }},
		{"Watch", func(f fixture) error {
			for _, err := range f.docs.Watch(context.Background(), f.id) {
				return err
			}
			return nil
		}},
		{"Drop", func(f fixture) error { return f.db.Drop("l") }},
	}
	page := int64(os.Getpagesize())
	for _, cut := range []struct {
		name string
		size int64
	}{{"to nothing", 0}, {"to one meta page", page}, {"to the meta pages", 2 * page}, {"to three pages", 3 * page}} {
		// Each call comes first once, the others following it.
		for first := range calls {
			t.Run(fmt.Sprintf("%s/%s first", cut.name, calls[first].name), func(t *testing.T) {
				path := newPath(t)
				db := openAt(t, path)
				f := fixture{db: db}
				var err error
				if f.docs, err = db.Docs("d"); err != nil {
					t.Fatal(err)
				}
				items := make([]any, 2000)
				for i := range items {
					items[i] = storh.Map{"i": i, "pad": strings.Repeat("x", 200)}
				}
				recs, err := f.docs.PutMany(items)
				if err != nil {
					t.Fatal(err)
				}
				f.id = recs[len(recs)-1].ID
				if f.log, err = db.Log("l"); err != nil {
					t.Fatal(err)
				}
				if _, err := f.log.Put(storh.Map{"line": 1}); err != nil {
					t.Fatal(err)
				}
				if f.q, err = db.Queue("q"); err != nil {
					t.Fatal(err)
				}
				if _, err := f.q.Enqueue(storh.Map{"j": 0}); err != nil {
					t.Fatal(err)
				}
				var backup bytes.Buffer
				if _, err := db.Backup(&backup); err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(path, cut.size); err != nil {
					t.Fatal(err)
				}
				order := append(append([]call{}, calls[first:]...), calls[:first]...)
				for _, c := range order {
					var err error
					within(t, 20*time.Second, func() { err = c.run(f) })
					if !errors.Is(err, storh.ErrCorrupt) {
						t.Errorf("%s after the cut = %v; want ErrCorrupt", c.name, err)
					}
				}
				var cerr error
				within(t, 20*time.Second, func() { cerr = db.Close() })
				if !errors.Is(cerr, storh.ErrCorrupt) || !strings.Contains(cerr.Error(), "restore") {
					t.Errorf("Close after the cut = %v; want ErrCorrupt saying to restore the file", cerr)
				}
				if _, err := f.docs.Get(f.id); !errors.Is(err, storh.ErrClosed) {
					t.Errorf("Get after Close = %v; want ErrClosed", err)
				}

				// The file is released: the backup put back opens at once.
				if err := os.WriteFile(path, backup.Bytes(), 0o600); err != nil {
					t.Fatal(err)
				}
				again := openAt(t, path, storh.WithLockTimeout(10*time.Millisecond))
				d, err := again.Docs("d")
				if err != nil {
					t.Fatal(err)
				}
				if n := mustCount(t, d); n != 2000 {
					t.Errorf("the backup put back holds %d records, want 2000", n)
				}
			})
		}
	}
}

// TestFileCutWhileOpenClose: Close as the first call after the cut, before
// any call has read what is gone, returns and releases the file.
func TestFileCutWhileOpenClose(t *testing.T) {
	fileOnly(t)
	for _, size := range []int64{0, int64(os.Getpagesize())} {
		path := newPath(t)
		db := openAt(t, path)
		docs, err := db.Docs("d")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := docs.Put(storh.Map{"n": 1}); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
		within(t, 20*time.Second, func() { err = db.Close() })
		if err != nil && !errors.Is(err, storh.ErrCorrupt) {
			t.Errorf("Close after a cut to %d bytes = %v; want nil or ErrCorrupt", size, err)
		}
		// An empty file opens as a new database; a cut one fails with
		// ErrCorrupt. Neither is locked.
		again, err := storh.Open(path, storh.WithLockTimeout(10*time.Millisecond))
		if err == nil {
			err = again.Close()
		}
		if errors.Is(err, storh.ErrLocked) || (err != nil && !errors.Is(err, storh.ErrCorrupt)) {
			t.Errorf("Open after Close of a file cut to %d bytes = %v; want the lock released", size, err)
		}
	}
}

// TestFileCutUnderConcurrentCalls: the file is cut while reads and writes
// run from several goroutines, so that calls are inside bbolt (beginning,
// reading, rolling back, committing) when the first of them faults on the
// meta pages and bbolt's Begin keeps its locks. Every call under way
// returns, with ErrCorrupt if it fails, and so does Close. (Before bbolt's
// locks were released, calls waiting on them hung in most runs.)
func TestFileCutUnderConcurrentCalls(t *testing.T) {
	fileOnly(t)
	for run := range 10 {
		path := newPath(t)
		db := openAt(t, path)
		docs, err := db.Docs("d")
		if err != nil {
			t.Fatal(err)
		}
		items := make([]any, 500)
		for i := range items {
			items[i] = storh.Map{"i": i}
		}
		recs, err := docs.PutMany(items)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var calls atomic.Int64
		var cut atomic.Bool
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Until an error, or 50 calls after the cut.
				for i, after := 0, 0; !cut.Load() || after < 50; i++ {
					if cut.Load() {
						after++
					}
					var err error
					switch g % 4 {
					case 0:
						_, err = docs.Get(recs[i%len(recs)].ID)
					case 1:
						_, err = docs.Put(storh.Map{"g": g, "i": i})
					case 2:
						_, err = streamErr(docs.Stream(query.All().After(recs[i%len(recs)].ID).Limit(20)))
					case 3:
						_, err = docs.Count()
					}
					calls.Add(1)
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		// Cut once the goroutines are under way.
		for calls.Load() < 200 {
			runtime.Gosched()
		}
		if err := os.Truncate(path, int64(run%2*os.Getpagesize())); err != nil {
			t.Fatal(err)
		}
		cut.Store(true)
		within(t, 20*time.Second, wg.Wait)
		close(errs)
		for err := range errs {
			if !errors.Is(err, storh.ErrCorrupt) {
				t.Errorf("run %d: a call after the cut = %v; want ErrCorrupt", run, err)
			}
		}
		// A commit under way when the file was cut can write its pages and
		// meta page after the cut: the file then holds what its meta page
		// claims, with holes where the rest was, which reads find damaged
		// without the file failing. Close returns either way.
		var cerr error
		within(t, 20*time.Second, func() { cerr = db.Close() })
		if cerr != nil && !errors.Is(cerr, storh.ErrCorrupt) {
			t.Errorf("run %d: Close = %v; want nil or the failure", run, cerr)
		}
	}
}
