package storh_test

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// within fails the test if fn does not return in d: a deadlock detector, not
// a speed assertion (d is far above any plausible run time).
func within(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		// Closing a deadlocked database would hang the cleanup too.
		deadlocked.Store(true)
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		t.Fatalf("no progress after %v: deadlock (goroutines dumped to stderr)", d)
	}
}

// acked collects the ids of acknowledged writes per collection.
type acked struct {
	mu  sync.Mutex
	ids map[string][]uuidv7.UUID
}

func (a *acked) add(coll string, ids ...uuidv7.UUID) {
	a.mu.Lock()
	if a.ids == nil {
		a.ids = map[string][]uuidv7.UUID{}
	}
	a.ids[coll] = append(a.ids[coll], ids...)
	a.mu.Unlock()
}

func TestConcurrentWritersReadersAndTransactions(t *testing.T) {
	db := openTemp(t)
	docs, _ := db.Docs("docs")
	log, _ := db.Log("log")
	const (
		writers     = 8
		perWriter   = 150
		txs         = 30
		batches     = 10
		batchSize   = 40
		readerLoops = 6
	)
	var ack acked
	var wg sync.WaitGroup
	errc := make(chan error, 100)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	stopReaders := make(chan struct{})
	var readers sync.WaitGroup

	within(t, 60*time.Second, func() {
		// Writers: single Puts, group-committed.
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWriter {
					if w%2 == 0 {
						r, err := docs.Put(storh.Map{"w": w, "i": i})
						if err != nil {
							report(err)
							return
						}
						ack.add("docs", r.ID)
					} else {
						r, err := log.Put(storh.Map{"w": w, "i": i})
						if err != nil {
							report(err)
							return
						}
						ack.add("log", r.ID)
					}
				}
			}()
		}
		// Transactions writing to both collections, some rolled back.
		wg.Add(1)
		go func() {
			defer wg.Done()
			rollback := errors.New("rollback")
			for i := range txs {
				var d, l uuidv7.UUID
				err := db.Update(func(tx *storh.Tx) error {
					td, err := tx.Docs("docs")
					if err != nil {
						return err
					}
					tl, err := tx.Log("log")
					if err != nil {
						return err
					}
					rd, err := td.Put(storh.Map{"tx": i})
					if err != nil {
						return err
					}
					rl, err := tl.Put(storh.Map{"tx": i})
					if err != nil {
						return err
					}
					d, l = rd.ID, rl.ID
					if i%3 == 0 {
						return rollback
					}
					return nil
				})
				switch {
				case err == nil:
					ack.add("docs", d)
					ack.add("log", l)
				case errors.Is(err, rollback):
					ack.add("rolled back", d, l)
				default:
					report(err)
					return
				}
			}
		}()
		// PutMany batches.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				items := make([]any, batchSize)
				for i := range items {
					items[i] = storh.Map{"batch": b, "i": i}
				}
				recs, err := log.PutMany(items)
				if err != nil {
					report(err)
					return
				}
				ack.add("log", ids(recs)...)
			}
		}()
		// Streaming readers: every stream must be in order and error-free,
		// and Count never runs backwards (nothing is deleted).
		for r := range 2 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				c := log.Stream
				if r == 1 {
					c = docs.Stream
				}
				for loop := 0; loop < readerLoops; loop++ {
					select {
					case <-stopReaders:
						if loop > 0 {
							return
						}
					default:
					}
					var prev uuidv7.UUID
					q, reversed := query.All(), loop%2 == 1
					if reversed {
						q = q.Reverse()
					}
					for rec, err := range c(q) {
						if err != nil {
							report(err)
							return
						}
						if !prev.IsZero() && (rec.ID.Compare(prev) > 0) == reversed {
							report(fmt.Errorf("stream out of order: %v after %v", rec.ID, prev))
							return
						}
						prev = rec.ID
					}
				}
			}()
		}
		wg.Wait()
		close(stopReaders)
		readers.Wait()
	})
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	// Final consistency: Count equals what a stream sees, every acknowledged
	// id is readable, nothing rolled back is.
	for _, name := range []string{"docs", "log"} {
		var c interface {
			Count() (int, error)
			Get(uuidv7.UUID) (storh.Record, error)
		} = docs
		stream := docs.Stream
		if name == "log" {
			c, stream = log, log.Stream
		}
		streamed := collect(t, stream(query.All()))
		if n := mustCount(t, c); n != len(streamed) || n != len(ack.ids[name]) {
			t.Errorf("%s: Count %d, streamed %d, acknowledged %d", name, n, len(streamed), len(ack.ids[name]))
		}
		for _, id := range ack.ids[name] {
			if _, err := c.Get(id); err != nil {
				t.Errorf("%s: acknowledged %v: %v", name, id, err)
			}
		}
	}
	if len(ack.ids["rolled back"]) == 0 {
		t.Error("no transaction was rolled back")
	}
	for _, id := range ack.ids["rolled back"] {
		_, errDocs := docs.Get(id)
		_, errLog := log.Get(id)
		if !errors.Is(errDocs, storh.ErrNotFound) || !errors.Is(errLog, storh.ErrNotFound) {
			t.Errorf("rolled-back id %v: docs %v, log %v; want ErrNotFound in both", id, errDocs, errLog)
		}
	}
	wantDocs := writers/2*perWriter + txs - (txs+2)/3
	if n := mustCount(t, docs); n != wantDocs {
		t.Errorf("docs Count = %d; want %d", n, wantDocs)
	}
	wantLog := writers/2*perWriter + txs - (txs+2)/3 + batches*batchSize
	if n := mustCount(t, log); n != wantLog {
		t.Errorf("log Count = %d; want %d", n, wantLog)
	}
}

// TestSlowStreamWhileFileGrows: a DB-level stream whose consumer writes
// between records (growing the file) while other writers grow it past the
// mmap size. bbolt must remap to grow, which waits for every open read
// transaction; a stream that held its read transaction across yields would
// deadlock here.
func TestSlowStreamWhileFileGrows(t *testing.T) {
	fileOnly(t)
	db := openTemp(t, storh.WithInitialMmapSize(1<<16))
	src, _ := db.Log("src")
	sink, _ := db.Log("sink")
	pad := string(make([]byte, 900))
	const n = 2 * 256 // two stream chunks
	items := make([]any, n)
	for i := range items {
		items[i] = storh.Map{"i": i}
	}
	if _, err := src.PutMany(items); err != nil {
		t.Fatal(err)
	}
	startSize := fileSize(t, db)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	within(t, 60*time.Second, func() {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					batch := make([]any, 50)
					for i := range batch {
						batch[i] = storh.Map{"pad": pad}
					}
					if _, err := sink.PutMany(batch); err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		seen := 0
		for rec, err := range src.Stream(query.All()) {
			if err != nil {
				t.Errorf("stream: %v", err)
				break
			}
			if rec.Data()["i"] != int64(seen) {
				t.Errorf("record %d holds %v", seen, rec.Data())
			}
			seen++
			// The consumer writes, in this goroutine, between records.
			if _, err := sink.Put(storh.Map{"pad": pad, "from": rec.ID.String()}); err != nil {
				t.Errorf("write from the consumer: %v", err)
				break
			}
		}
		close(stop)
		wg.Wait()
		if seen != n {
			t.Errorf("streamed %d records; want %d", seen, n)
		}
	})
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if size := fileSize(t, db); size < 4*(1<<16) || size <= startSize {
		t.Errorf("file grew from %d to %d bytes; the test needs it well past the 64 KiB mmap", startSize, size)
	}
}

func fileSize(t *testing.T, db *storh.DB) int64 {
	t.Helper()
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.FileSize
}

// TestGroupCommit: many goroutines' single writes share commits; each one is
// acknowledged only when stored, and one writer's failure (a duplicate id in
// a log) fails only that writer.
func TestGroupCommit(t *testing.T) {
	const goroutines, perG = 64, 20
	db := openTemp(t)
	log, _ := db.Log("events")
	taken, err := log.PutWithID(idAt(t, 1_000), storh.Map{"first": true})
	if err != nil {
		t.Fatal(err)
	}

	for round := range perG {
		start := make(chan struct{})
		var wg sync.WaitGroup
		results := make([]error, goroutines+1)
		written := make([]uuidv7.UUID, goroutines)
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := idAt(t, int64(2_000+round))
				<-start
				_, results[g] = log.PutWithID(id, storh.Map{"g": g, "round": round})
				written[g] = id
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, results[goroutines] = log.PutWithID(taken.ID, storh.Map{"dup": round})
		}()
		within(t, 60*time.Second, func() {
			close(start)
			wg.Wait()
		})
		for g, err := range results[:goroutines] {
			if err != nil {
				t.Fatalf("round %d goroutine %d: %v", round, g, err)
			}
			r, err := log.Get(written[g])
			if err != nil || r.Data()["g"] != int64(g) {
				t.Fatalf("round %d goroutine %d: acknowledged but Get = %v, %v", round, g, r.Data(), err)
			}
		}
		checkErr(t, results[goroutines], storh.ErrExists, `"events"`, taken.ID.String())
	}
	if n := mustCount(t, log); n != 1+goroutines*perG {
		t.Errorf("Count = %d; want %d", n, 1+goroutines*perG)
	}
	if r, err := log.Get(taken.ID); err != nil || r.Data()["first"] != true {
		t.Errorf("the duplicate overwrote the original: %v, %v", r.Data(), err)
	}
}

// TestGroupCommitRacingSameID: goroutines race to append the same new id;
// exactly one wins, the others get ErrExists.
func TestGroupCommitRacingSameID(t *testing.T) {
	db := openTemp(t)
	log, _ := db.Log("l")
	docs, _ := db.Docs("d")
	for round := range 10 {
		id := idAt(t, int64(round))
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for g := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[g] = log.PutWithID(id, storh.Map{"g": g})
				// Upserts of one id on a Docs collection all succeed.
				if _, err := docs.PutWithID(id, storh.Map{"g": g}); err != nil {
					t.Errorf("docs upsert: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, storh.ErrExists):
				t.Errorf("round %d: %v", round, err)
			}
		}
		if wins != 1 {
			t.Errorf("round %d: %d writers won; want 1", round, wins)
		}
	}
	if n := mustCount(t, log); n != 10 {
		t.Errorf("log Count = %d; want 10", n)
	}
	if n := mustCount(t, docs); n != 10 {
		t.Errorf("docs Count = %d; want 10", n)
	}
}

// TestCloseWhileBusy closes the database while writers and readers run: every
// call either succeeds (and its record is there after reopening) or fails
// with ErrClosed; nothing hangs.
func TestCloseWhileBusy(t *testing.T) {
	path := newPath(t)
	db := openAt(t, path)
	docs, _ := db.Docs("d")
	var ack acked
	var wg sync.WaitGroup
	started := make(chan struct{}, 8)
	within(t, 60*time.Second, func() {
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					if i == 5 {
						started <- struct{}{}
					}
					var err error
					if g%4 == 3 {
						for _, e := range docs.Stream(query.All().Limit(10)) {
							if e != nil {
								err = e
								break
							}
						}
					} else {
						var r storh.Record
						r, err = docs.Put(storh.Map{"g": g, "i": i})
						if err == nil {
							ack.add("d", r.ID)
						}
					}
					if err != nil {
						if !errors.Is(err, storh.ErrClosed) {
							t.Errorf("goroutine %d: %v", g, err)
						}
						return
					}
				}
			}()
		}
		for range 8 {
			<-started
		}
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		wg.Wait()
	})
	db = openAt(t, path)
	docs, _ = db.Docs("d")
	if n := mustCount(t, docs); n != len(ack.ids["d"]) {
		t.Errorf("Count after reopen = %d; acknowledged %d", n, len(ack.ids["d"]))
	}
	for _, id := range ack.ids["d"] {
		if _, err := docs.Get(id); err != nil {
			t.Fatalf("acknowledged %v lost: %v", id, err)
		}
	}
}
