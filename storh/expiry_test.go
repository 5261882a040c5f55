package storh_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/postgres"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// sweepRounds hears db's background sweep rounds: each round's deletions
// and skipped collections arrive on the channel, so a test waits on them
// instead of sleeping.
type sweepRound struct {
	swept   map[string]int
	skipped []string
	err     error
}

func watchSweeps(db *storh.DB) <-chan sweepRound {
	ch := make(chan sweepRound, 1024)
	storh.SetSweepHook(db, func(swept map[string]int, skipped []string, err error) {
		select {
		case ch <- sweepRound{swept, skipped, err}:
		default: // a test that stopped listening must not stall the sweeper
		}
	})
	return ch
}

// nextRound waits for the next round, failing the test if none comes
// within a minute (a hang guard, not a measurement).
func nextRound(t *testing.T, ch <-chan sweepRound) sweepRound {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("sweep round: %v", r.err)
		}
		return r
	case <-time.After(time.Minute):
		t.Fatal("no sweep round in a minute")
	}
	return sweepRound{}
}

// fullRound waits until a round has started and ended after the call: the
// round in flight when it is called may have read the clock before.
func fullRound(t *testing.T, ch <-chan sweepRound) map[string]int {
	t.Helper()
	for len(ch) > 0 {
		<-ch
	}
	nextRound(t, ch)
	return nextRound(t, ch).swept
}

func liveIDs(t *testing.T, d *storh.Docs) []uuidv7.UUID {
	t.Helper()
	recs, err := d.Find(query.All())
	if err != nil {
		t.Fatal(err)
	}
	return ids(recs)
}

func sortIDs(s []uuidv7.UUID) []uuidv7.UUID {
	slices.SortFunc(s, func(a, b uuidv7.UUID) int { return a.Compare(b) })
	return s
}

// TestExpiryBackgroundSweep: a docs collection with a TTL and a log with
// a retention, on a fake clock, are swept by the database itself: nothing
// before it expires, everything once it has, and the log's old records.
func TestExpiryBackgroundSweep(t *testing.T) {
	clk := newTestClock()
	path := newPath(t)
	db := openAt(t, path, storh.WithClock(clk.Now), storh.WithSweepEvery(time.Millisecond))
	rounds := watchSweeps(db)
	sessions, err := db.Docs("sessions", storh.WithTTL("exp"), storh.WithIndex(storh.Index("exp")))
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	var items []any
	var keep []uuidv7.UUID
	for i := range 4000 {
		switch i % 8 {
		case 0, 1, 2:
			items = append(items, storh.Map{"i": i, "exp": now.Add(time.Second)})
		case 3:
			items = append(items, storh.Map{"i": i, "exp": now.Add(time.Second).In(time.FixedZone("", -5*3600)).Format(time.RFC3339Nano)})
		case 4, 5:
			items = append(items, storh.Map{"i": i, "exp": now.Add(time.Hour)})
		case 6:
			items = append(items, storh.Map{"i": i})
		case 7:
			items = append(items, storh.Map{"i": i, "exp": "not a time"})
		}
	}
	recs, err := sessions.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if i%8 >= 4 {
			keep = append(keep, r.ID)
		}
	}
	// The log: a record a minute for three hours of ids, retention an hour.
	events, err := db.Log("events", storh.WithRetention(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var keepEvents int
	for m := range 180 {
		if _, err := events.PutWithID(idAt(t, now.Add(time.Duration(m-179)*time.Minute).UnixMilli()), storh.Map{"m": m}); err != nil {
			t.Fatal(err)
		}
	}

	// Rounds before anything expires delete only the log's old records.
	fullRound(t, rounds)
	if n := mustCount(t, sessions); n != 4000 {
		t.Fatalf("before expiry: %d sessions, want 4000", n)
	}
	keepEvents = mustCount(t, events)
	if keepEvents < 60 || keepEvents > 61 {
		t.Fatalf("the log keeps %d records of the last hour, want 60 or 61", keepEvents)
	}

	clk.Advance(2 * time.Second)
	// The records are hidden at once, swept soon.
	if got := liveIDs(t, sessions); !sameIDs(got, keep) {
		t.Fatalf("after expiry, Find returned %d records, want the %d that live", len(got), len(keep))
	}
	fullRound(t, rounds)
	if n := mustCount(t, sessions); n != len(keep) {
		t.Fatalf("after a sweep: %d sessions stored, want %d", n, len(keep))
	}
	plain, err := db.Docs("sessions")
	if err != nil {
		t.Fatal(err)
	}
	if got := liveIDs(t, plain); !sameIDs(got, keep) {
		t.Fatalf("after a sweep the collection holds %d records, want the %d that live", len(got), len(keep))
	}
	st, err := db.Stats()
	if err != nil || st.SweepError != nil {
		t.Fatalf("Stats: %v, SweepError %v", err, st.SweepError)
	}
}

// TestExpiryCloseDuringSweep closes the database while its sweeper has
// thousands of records to delete: Close returns, and the file reopened
// holds every live record, a count that agrees with its records, and no
// record that had not expired missing.
func TestExpiryCloseDuringSweep(t *testing.T) {
	clk := newTestClock()
	path := newPath(t)
	db, err := storh.Open(path, storh.WithoutSync(), storh.WithClock(clk.Now), storh.WithSweepEvery(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rounds := watchSweeps(db)
	sessions, err := db.Docs("sessions", storh.WithTTL("exp"))
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 0, 20000)
	for i := range 20000 {
		exp := clk.Now().Add(time.Second)
		if i%10 == 0 {
			exp = clk.Now().Add(time.Hour)
		}
		items = append(items, storh.Map{"i": i, "exp": exp})
	}
	recs, err := sessions.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	paused := make(chan struct{}, 1)
	storh.SetSweepPauseHook(db, func() {
		select {
		case paused <- struct{}{}:
		default:
		}
	})
	nextRound(t, rounds)
	clk.Advance(2 * time.Second)
	select {
	case <-paused: // a sweep is between two of its transactions
	case <-time.After(time.Minute):
		t.Fatal("no sweep paused in a minute")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path, storh.WithoutBackground())
	plain, err := db.Docs("sessions")
	if err != nil {
		t.Fatal(err)
	}
	left := liveIDs(t, plain)
	if n := mustCount(t, plain); n != len(left) {
		t.Fatalf("Count = %d, but %d records are stored", n, len(left))
	}
	stored := map[uuidv7.UUID]bool{}
	for _, id := range left {
		stored[id] = true
	}
	for i, r := range recs {
		if i%10 == 0 && !stored[r.ID] {
			t.Fatalf("record %d (%s), not expired, was deleted", i, r.ID)
		}
	}
	t.Logf("%d of 18000 expired records were swept before Close", 20000-len(left))
}

// TestExpiryNoSweeper: WithoutBackground and read-only opens never start a
// sweeper, and still hide what has expired.
func TestExpiryNoSweeper(t *testing.T) {
	clk := newTestClock()
	path := newPath(t)
	db := openAt(t, path, storh.WithClock(clk.Now), storh.WithoutBackground())
	sessions, err := db.Docs("sessions", storh.WithTTL("exp"))
	if err != nil {
		t.Fatal(err)
	}
	gone, err := sessions.Put(storh.Map{"exp": clk.Now().Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := sessions.Put(storh.Map{"exp": clk.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if storh.SweeperStarted(db) {
		t.Fatal("WithoutBackground started a sweeper")
	}
	clk.Advance(time.Minute)
	if _, err := sessions.Get(gone.ID); !errors.Is(err, storh.ErrNotFound) {
		t.Fatalf("Get of an expired record: %v, want ErrNotFound", err)
	}
	if _, err := sessions.Patch(gone.ID, storh.Set("exp", clk.Now().Add(time.Hour))); !errors.Is(err, storh.ErrNotFound) {
		t.Fatalf("Patch of an expired record: %v, want ErrNotFound", err)
	}
	if _, err := sessions.Get(kept.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("sessions", storh.WithTTL("exp"))
		if err != nil {
			return err
		}
		if _, err := d.Get(gone.ID); !errors.Is(err, storh.ErrNotFound) {
			return fmt.Errorf("Get in Update of an expired record: %v, want ErrNotFound", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := mustCount(t, sessions); n != 2 {
		t.Fatalf("Count = %d before any sweep, want 2 (it counts until the sweep)", n)
	}
	if n, err := sessions.ApplyTTL(); err != nil || n != 1 {
		t.Fatalf("ApplyTTL = %d, %v; want 1", n, err)
	}
	if n := mustCount(t, sessions); n != 1 {
		t.Fatalf("Count = %d after ApplyTTL, want 1", n)
	}
	if _, err := sessions.Put(storh.Map{"exp": clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if onPostgres {
		return // a read-only open of PostgreSQL: TestExpiryPostgresProcesses
	}
	ro := openAt(t, path, storh.WithClock(clk.Now), storh.WithReadOnly(), storh.WithSweepEvery(time.Millisecond))
	roDocs, err := ro.Docs("sessions", storh.WithTTL("exp"))
	if err != nil {
		t.Fatal(err)
	}
	if storh.SweeperStarted(ro) {
		t.Fatal("a read-only open started a sweeper")
	}
	if got := liveIDs(t, roDocs); !sameIDs(got, []uuidv7.UUID{kept.ID}) {
		t.Fatalf("read-only Find: %v, want only %s", got, kept.ID)
	}
	if n, err := roDocs.ApplyTTL(); !errors.Is(err, storh.ErrReadOnly) || n != 0 {
		t.Fatalf("read-only ApplyTTL = %d, %v; want ErrReadOnly", n, err)
	}
}

// TestExpiryOptions: the options' bad uses fail with ErrInvalidOption.
func TestExpiryOptions(t *testing.T) {
	db := openTemp(t, storh.WithoutBackground())
	for _, tc := range []struct {
		name string
		open func() error
	}{
		{"ttl on a log", func() error { _, err := db.Log("l", storh.WithTTL("exp")); return err }},
		{"ttl on a queue", func() error { _, err := db.Queue("q", storh.WithTTL("exp")); return err }},
		{"ttl of no path", func() error { _, err := db.Docs("d", storh.WithTTL("")); return err }},
		{"retention on docs", func() error { _, err := db.Docs("d", storh.WithRetention(time.Hour)); return err }},
		{"sweep every 0", func() error { _, err := storh.Open(newPath(t), storh.WithSweepEvery(0)); return err }},
		{"sweep every <0", func() error { _, err := storh.Open(newPath(t), storh.WithSweepEvery(-time.Second)); return err }},
	} {
		if err := tc.open(); !errors.Is(err, storh.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", tc.name, err)
		}
	}
}

// TestExpiryRetentionReads: a log's records past its retention vanish from
// the handle's reads before they are deleted.
func TestExpiryRetentionReads(t *testing.T) {
	clk := newTestClock()
	db := openTemp(t, storh.WithClock(clk.Now), storh.WithoutBackground())
	events, err := db.Log("events", storh.WithRetention(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now().UnixMilli()
	old, mid, fresh := idAt(t, now-2*3600_000), idAt(t, now-3600_000+1), idAt(t, now)
	for _, id := range []uuidv7.UUID{old, mid, fresh} {
		if _, err := events.PutWithID(id, storh.Map{}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want ...uuidv7.UUID) {
		t.Helper()
		recs, err := events.Find(query.All())
		if err != nil {
			t.Fatal(err)
		}
		if !sameIDs(ids(recs), want) {
			t.Fatalf("Find: %v, want %v", ids(recs), want)
		}
		if n, err := events.CountMatching(query.All()); err != nil || n != len(want) {
			t.Fatalf("CountMatching = %d, %v; want %d", n, err, len(want))
		}
		for _, id := range []uuidv7.UUID{old, mid, fresh} {
			_, err := events.Get(id)
			if slices.Contains(want, id) != (err == nil) {
				t.Fatalf("Get(%s): %v", id, err)
			}
		}
	}
	check(mid, fresh)
	clk.Advance(time.Millisecond)
	check(mid, fresh) // mid is exactly an hour old now: kept, as DeleteBefore keeps it
	clk.Advance(time.Millisecond)
	check(fresh)
	if n, err := events.ApplyRetention(); err != nil || n != 2 {
		t.Fatalf("ApplyRetention = %d, %v; want 2", n, err)
	}
}

// TestExpirySweepSeeks: with an index on the TTL path, a sweep reads the
// expired records and no others; without one it reads them all.
func TestExpirySweepSeeks(t *testing.T) {
	clk := newTestClock()
	db := openTemp(t, storh.WithClock(clk.Now), storh.WithoutBackground())
	for _, indexed := range []bool{true, false} {
		name := fmt.Sprintf("indexed-%v", indexed)
		opts := []storh.CollectionOption{storh.WithTTL("exp")}
		if indexed {
			opts = append(opts, storh.WithIndex(storh.Index("exp")))
		}
		d, err := db.Docs(name, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var items []any
		for i := range 2000 {
			exp := any(clk.Now().Add(time.Hour))
			switch {
			case i%100 == 0:
				exp = clk.Now().Add(-time.Second)
			case i%100 == 1:
				exp = clk.Now().Add(-time.Second).Format(time.RFC3339)
			case i%100 == 2:
				exp = clk.Now().Add(48 * time.Hour).Format(time.RFC3339) // text, not expired
			}
			items = append(items, storh.Map{"exp": exp})
		}
		if _, err := d.PutMany(items); err != nil {
			t.Fatal(err)
		}
		p, err := storh.ExplainTTL(d)
		if err != nil {
			t.Fatal(err)
		}
		if p.Returned != 40 {
			t.Fatalf("%s: the sweep selects %d records, want 40", name, p.Returned)
		}
		if indexed && (p.RecordsRead != 40 || len(p.Indexes) == 0 || p.Sorted) {
			t.Fatalf("%s: the sweep read %d records through %v (sorted %v), want 40 through the index in its order", name, p.RecordsRead, p.Indexes, p.Sorted)
		}
		if !indexed && p.RecordsRead != 2000 {
			t.Fatalf("%s: the sweep read %d records, want all 2000", name, p.RecordsRead)
		}
	}
}

const expiryChildEnv = "STORH_EXPIRY_CHILD"

// TestExpiryPostgresProcesses: on PostgreSQL a collection is swept by one
// process at a time. While a second OS process holds the collection's
// sweep lock, this process's sweeper leaves it alone; then two stores here
// and a second process sweep it together, and every expired record goes,
// each deleted once, and none that has not expired.
func TestExpiryPostgresProcesses(t *testing.T) {
	skipOnPostgresPass(t)
	url := pgtest.URL(t)
	seed := openAt(t, url, storh.WithoutBackground())
	sessions, err := seed.Docs("sessions", storh.WithTTL("exp"), storh.WithIndex(storh.Index("exp")))
	if err != nil {
		t.Fatal(err)
	}
	past, future := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	const expired = 3000
	var items []any
	for i := range expired + 1000 {
		switch {
		case i < expired:
			items = append(items, storh.Map{"i": i, "exp": past})
		case i%2 == 0:
			items = append(items, storh.Map{"i": i, "exp": future.Format(time.RFC3339)})
		default:
			items = append(items, storh.Map{"i": i})
		}
	}
	recs, err := sessions.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	var keep []uuidv7.UUID
	for _, r := range recs[expired:] {
		keep = append(keep, r.ID)
	}
	keep = sortIDs(keep)

	holder := startExpiryChild(t, url)
	if _, err := holder.call("hold"); err != nil {
		t.Fatal(err)
	}
	a := openAt(t, url, storh.WithSweepEvery(time.Millisecond))
	roundsA := watchSweeps(a)
	if _, err := a.Docs("sessions", storh.WithTTL("exp")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r := nextRound(t, roundsA)
		if !slices.Equal(r.skipped, []string{"sessions"}) || r.swept["sessions"] != 0 {
			t.Fatalf("while another process sweeps, a round swept %v and skipped %v", r.swept, r.skipped)
		}
	}
	if n := mustCount(t, sessions); n != len(recs) {
		t.Fatalf("while the lock was held elsewhere %d records went", len(recs)-n)
	}
	// Three sweepers at once: a second process, two stores here.
	b := openAt(t, url, storh.WithSweepEvery(time.Millisecond))
	var mu sync.Mutex
	total := 0
	for _, db := range []*storh.DB{a, b} {
		storh.SetSweepHook(db, func(swept map[string]int, _ []string, err error) {
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			mu.Lock()
			total += swept["sessions"]
			mu.Unlock()
		})
	}
	sweeper := startExpiryChild(t, url)
	if _, err := sweeper.call("sweep"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.call("release"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Docs("sessions", storh.WithTTL("exp")); err != nil {
		t.Fatal(err)
	}
	// Wait for the child's sweeper to finish a round after the records are
	// gone: each round it answers "swept N" when asked.
	for mustCount(t, sessions) != len(keep) {
		if _, err := sweeper.call("round"); err != nil {
			t.Fatal(err)
		}
	}
	w, err := sweeper.call("stop")
	if err != nil {
		t.Fatal(err)
	}
	childSwept, err := strconv.Atoi(w[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	plain, err := seed.Docs("sessions")
	if err != nil {
		t.Fatal(err)
	}
	if got := liveIDs(t, plain); !sameIDs(got, keep) {
		t.Fatalf("after the sweeps %d records are stored, want the %d live ones", len(got), len(keep))
	}
	mu.Lock()
	defer mu.Unlock()
	if total+childSwept != expired {
		t.Fatalf("the sweepers deleted %d here and %d in the child, want %d in all", total, childSwept, expired)
	}
	t.Logf("swept %d here, %d in the second process", total, childSwept)
}

func startExpiryChild(t *testing.T, url string) *rowsChild {
	t.Helper()
	cmd, in, out := startChild(t, "TestExpiryChild", expiryChildEnv+"="+url)
	c := &rowsChild{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() {
		c.in.Close()
		c.cmd.Wait()
	})
	return c
}

// TestExpiryChild is the second process of TestExpiryPostgresProcesses:
//
//	recreate N  drop "sessions", make it again without a TTL, with N expired-looking records
//	hold      take the sweep lock of "sessions" on a store of its own
//	release   release it
//	sweep     open a database that sweeps "sessions" in the background
//	round     wait for a round to start and end; answer how many it swept in all
//	stop      close that database; answer how many it swept in all
func TestExpiryChild(t *testing.T) {
	url := os.Getenv(expiryChildEnv)
	if url == "" {
		t.Skip("run by TestExpiryPostgresProcesses")
	}
	var release func()
	var db *storh.DB
	var mu sync.Mutex
	total, done := 0, 0 // records swept and rounds ended
	ended := make(chan struct{}, 1)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var res []string
		var err error
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "recreate":
			// Drop "sessions" and make it again without a TTL, with arg
			// records whose "exp" passed long ago (TestExpirySweepFollowsCollection).
			var other *storh.DB
			if other, err = storh.Open(url, storh.WithoutBackground()); err != nil {
				break
			}
			var n int
			if n, err = strconv.Atoi(arg); err == nil {
				err = recreateSessionsErr(other, n)
			}
			err = errors.Join(err, other.Close())
		case "hold":
			var store *postgres.Store
			if store, err = postgres.Open(context.Background(), url); err != nil {
				break
			}
			var ok bool
			if release, ok, err = store.TryExclusive("sweep/sessions"); err == nil && !ok {
				err = errors.New("the lock is taken")
			}
			defer store.Close()
		case "release":
			release()
		case "sweep":
			if db, err = storh.Open(url, storh.WithSweepEvery(time.Millisecond)); err != nil {
				break
			}
			storh.SetSweepHook(db, func(swept map[string]int, _ []string, roundErr error) {
				mu.Lock()
				total += swept["sessions"]
				done++
				mu.Unlock()
				if roundErr != nil {
					fmt.Fprintln(os.Stderr, "child sweep:", roundErr)
				}
				select {
				case ended <- struct{}{}:
				default:
				}
			})
			_, err = db.Docs("sessions", storh.WithTTL("exp"))
		case "round":
			mu.Lock()
			from := done
			mu.Unlock()
			for {
				<-ended
				mu.Lock()
				n, d := total, done
				mu.Unlock()
				if d >= from+2 {
					res = []string{strconv.Itoa(n)}
					break
				}
			}
		case "stop":
			err = db.Close()
			mu.Lock()
			res = []string{strconv.Itoa(total)}
			mu.Unlock()
		default:
			err = fmt.Errorf("unknown request %q", in.Text())
		}
		if err != nil {
			fmt.Println("err", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Println("ok", strings.Join(res, " "))
	}
}
