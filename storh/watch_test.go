package storh_test

import (
	"context"
	"errors"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// watchUntil collects what a Watch yields until it has n records, then
// cancels it and checks it ends with the context's error.
func watchUntil(t *testing.T, c storh.Collection, from uuidv7.UUID, n int, started chan<- struct{}) []storh.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []storh.Record
	first := true
	for r, err := range c.Watch(ctx, from) {
		if first && started != nil {
			close(started)
		}
		first = false
		if err != nil {
			if len(got) < n {
				t.Errorf("watch ended after %d of %d records: %v", len(got), n, err)
			}
			return got
		}
		got = append(got, r)
		if len(got) == n {
			cancel()
		}
	}
	return got
}

// TestWatchSeesEveryCommitOnce: writers with interleaving ids (many
// goroutines, group commit), PutMany batches and explicit older ids, while
// a watcher follows from now and another catches up from a cursor: each
// sees every record written after its start exactly once.
func TestWatchSeesEveryCommitOnce(t *testing.T) {
	db := openTemp(t, storh.WithoutSync())
	d, err := db.Docs("d")
	if err != nil {
		t.Fatal(err)
	}
	// Records before the watch: the cursor watcher catches up on those
	// after its cursor.
	var early []storh.Record
	for i := range 300 {
		r, err := d.Put(storh.Map{"early": i})
		if err != nil {
			t.Fatal(err)
		}
		early = append(early, r)
	}
	cursor := early[99].ID

	const writers, each = 8, 150
	total := writers*each + 2*50 + 20 // single puts, two PutMany, explicit old ids
	fromNow := make(chan []storh.Record)
	fromCursor := make(chan []storh.Record)
	ready := make(chan struct{})
	go func() { fromNow <- watchUntil(t, d, uuidv7.UUID{}, total, nil) }()
	go func() { fromCursor <- watchUntil(t, d, cursor, 200+total, ready) }()
	<-ready
	time.Sleep(20 * time.Millisecond) // let the from-now watcher subscribe

	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := d.Put(storh.Map{"w": w, "i": i}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for b := range 2 {
		items := make([]any, 50)
		for i := range items {
			items[i] = storh.Map{"batch": b, "i": i}
		}
		if _, err := d.PutMany(items); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		// Ids from long ago: behind every cursor.
		if _, err := d.PutWithID(idAt(t, 1_600_000_000_000+int64(i)), storh.Map{"old": i}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()

	checkOnce := func(name string, got []storh.Record, want int) {
		t.Helper()
		seen := map[uuidv7.UUID]int{}
		for _, r := range got {
			seen[r.ID]++
			if seen[r.ID] > 1 {
				t.Fatalf("%s: %s delivered twice", name, r.ID)
			}
		}
		if len(got) != want {
			t.Fatalf("%s: %d records, want %d", name, len(got), want)
		}
	}
	now := <-fromNow
	checkOnce("from now", now, total)
	for _, r := range now {
		if _, ok := r.Data()["early"]; ok {
			t.Fatalf("from now: a record written before the watch: %v", r.Data())
		}
	}
	cur := <-fromCursor
	checkOnce("from a cursor", cur, 200+total)
	for i, r := range cur[:200] {
		if r.ID != early[100+i].ID {
			t.Fatalf("catch-up record %d is %s, want %s (id order after the cursor)", i, r.ID, early[100+i].ID)
		}
	}
}

// TestWatchLagged: a watcher that does not read falls behind and gets
// ErrLagged, while writers go on unhindered.
func TestWatchLagged(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 70k records")
	}
	db := openTemp(t, storh.WithoutSync())
	l, err := db.Log("l")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next, stop := iter.Pull2(l.Watch(ctx, uuidv7.UUID{}))
	defer stop()
	// The watch subscribes on the first pull, which waits for a record:
	// write one once it is waiting.
	go func() {
		time.Sleep(50 * time.Millisecond)
		if _, err := l.Put(storh.Map{"i": -1}); err != nil {
			t.Error(err)
		}
	}()
	if _, err, ok := next(); !ok || err != nil {
		t.Fatalf("first record: %v %v", err, ok)
	}
	items := make([]any, 5000)
	for i := range items {
		items[i] = storh.Map{"i": i}
	}
	for range 14 {
		if _, err := l.PutMany(items); err != nil {
			t.Fatal(err)
		}
	}
	for {
		_, err, ok := next()
		if !ok {
			t.Fatal("the watch ended without ErrLagged")
		}
		if errors.Is(err, storh.ErrLagged) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestWatchEnds(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("d")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	for _, err := range d.Watch(ctx, uuidv7.UUID{}) {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("watch of a quiet collection ended with %v", err)
		}
	}
	if _, err := d.Put(storh.Map{"a": 0}); err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *storh.Tx) error {
		td, err := tx.Docs("d")
		if err != nil {
			return err
		}
		for _, err := range td.Watch(context.Background(), uuidv7.UUID{}) {
			if !errors.Is(err, storh.ErrNestedTx) {
				t.Fatalf("Watch in a transaction: %v", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Breaking out of the loop unsubscribes: later writes cost nothing.
	if _, err := d.Put(storh.Map{"a": 1}); err != nil {
		t.Fatal(err)
	}
	first, err := d.First(query.All())
	if err != nil {
		t.Fatal(err)
	}
	for range d.Watch(context.Background(), idAt(t, first.ID.Time().UnixMilli()-1)) {
		break
	}
}

// TestWatchFromCursorInFlight starts watches from a cursor while writers
// keep committing: a write transaction that wrote before the watch
// subscribed but commits after it must still reach the watcher (it once
// did not, in a few percent of starts, when the catch-up had already read
// past its ids).
func TestWatchFromCursorInFlight(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(storh.Map{"x": 0}); err != nil {
		t.Fatal(err)
	}
	var gate sync.RWMutex // writers hold it for reading while they write
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for range 8 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				gate.RLock()
				_, err := d.Put(storh.Map{"w": 1})
				gate.RUnlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	defer func() { close(stop); writers.Wait() }()
	rounds := 60
	if !testkit.Long() {
		rounds = 15
	}
	for round := range rounds {
		last, err := d.First(query.All().Reverse())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		got := map[uuidv7.UUID]bool{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for r, err := range d.Watch(ctx, last.ID) {
				if err != nil {
					return
				}
				mu.Lock()
				got[r.ID] = true
				mu.Unlock()
			}
		}()
		time.Sleep(5 * time.Millisecond)
		gate.Lock() // no write in flight from here
		want, err := d.Find(query.All().After(last.ID))
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			mu.Lock()
			missing := 0
			for _, r := range want {
				if !got[r.ID] {
					missing++
				}
			}
			mu.Unlock()
			if missing == 0 {
				break
			}
			if time.Now().After(deadline) {
				gate.Unlock()
				cancel()
				t.Fatalf("round %d: %d of %d records committed after the cursor never reached the watcher", round, missing, len(want))
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		<-done
		gate.Unlock()
	}
}

// TestWatchEndsOnClose: a watch waiting for commits ends with ErrClosed
// when the database closes, instead of holding Close or its loop forever.
func TestWatchEndsOnClose(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("d")
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		var last error
		for _, err := range d.Watch(context.Background(), uuidv7.UUID{}) {
			last = err
		}
		ended <- last
	}()
	time.Sleep(50 * time.Millisecond) // the watch waits
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, storh.ErrClosed) {
			t.Fatalf("the watch ended with %v; want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch still waits after Close")
	}
}
