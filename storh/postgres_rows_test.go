package storh_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/postgres"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Writers of one collection on PostgreSQL hold it beside each other
// (engine.HoldRows): a record is read with its row locked, a new id is
// inserted, counters go to per-DB slots, unique values are claimed. These
// tests check the guarantees that a collection held alone gave, with
// writers in several stores and OS processes at once.

// aside runs fn and fails the test if it has not returned by a deadline
// far beyond what it takes: it must not wait for another transaction.
// unblock is called first on a timeout, so that the test ends.
func aside(t *testing.T, what string, unblock func(), fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		unblock()
		t.Fatalf("%s waited for another store's open transaction", what)
	}
}

// waitForLockWaits waits until n sessions of the database at url wait for
// a lock (a row, a transaction).
func waitForLockWaits(t *testing.T, url string, n int) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := conn.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock, want %d", waiting, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A transaction of one store that has written records of a collection
// and waits inside Update does not hold up another store's writes of
// other records of it, in group commits or in Update, nor its reads of
// them. A read-modify-write of the record it wrote waits for it, and then
// builds on its write.
func TestPostgresWritersOverlap(t *testing.T) {
	skipOnPostgresPass(t)
	url := pgtest.URL(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	opts := []storh.CollectionOption{storh.WithIndex(storh.Index("tag")), storh.WithIndex(storh.Index("u").Unique())}
	da, err := a.Docs("notes", opts...)
	if err != nil {
		t.Fatal(err)
	}
	dbB, err := b.Docs("notes", opts...)
	if err != nil {
		t.Fatal(err)
	}
	x, err := da.Put(storh.Map{"n": 0, "tag": "x", "u": 1})
	if err != nil {
		t.Fatal(err)
	}
	y, err := dbB.Put(storh.Map{"n": 0, "tag": "y", "u": 2})
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()
	done := make(chan error, 1)
	go func() {
		done <- a.Update(func(tx *storh.Tx) error {
			d, err := tx.Docs("notes")
			if err != nil {
				return err
			}
			rec, err := d.Get(x.ID)
			if err != nil {
				return err
			}
			if _, err := d.PutWithID(x.ID, storh.Map{"n": rec.Data()["n"].(int64) + 1, "tag": "x", "u": 1}); err != nil {
				return err
			}
			if _, err := d.Put(storh.Map{"n": 0, "tag": "a", "u": 3}); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	var z storh.Record
	aside(t, "a Put of a new record", unblock, func() (err error) {
		z, err = dbB.Put(storh.Map{"n": 0, "tag": "b", "u": 4})
		return err
	})
	aside(t, "PutMany", unblock, func() error {
		_, err := dbB.PutMany([]any{storh.Map{"tag": "c", "u": 5}, storh.Map{"tag": "c", "u": 6}})
		return err
	})
	aside(t, "a read-modify-write of another record in Update", unblock, func() error {
		return b.Update(func(tx *storh.Tx) error {
			d, err := tx.Docs("notes")
			if err != nil {
				return err
			}
			rec, err := d.Get(y.ID)
			if err != nil {
				return err
			}
			_, err = d.PutWithID(y.ID, storh.Map{"n": rec.Data()["n"].(int64) + 1, "tag": "y", "u": 2})
			return err
		})
	})
	aside(t, "a Delete of another record", unblock, func() error { return dbB.Delete(z.ID) })

	rmw := make(chan error, 1)
	go func() {
		rmw <- b.Update(func(tx *storh.Tx) error {
			d, err := tx.Docs("notes")
			if err != nil {
				return err
			}
			rec, err := d.Get(x.ID)
			if err != nil {
				return err
			}
			_, err = d.PutWithID(x.ID, storh.Map{"n": rec.Data()["n"].(int64) + 1, "tag": "x", "u": 1})
			return err
		})
	}()
	waitForLockWaits(t, url, 1) // for x's row
	select {
	case err := <-rmw:
		t.Fatalf("a read-modify-write of the held record went ahead of its holder (%v)", err)
	default:
	}
	unblock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-rmw; err != nil {
		t.Fatal(err)
	}
	if rec, err := dbB.Get(x.ID); err != nil || rec.Data()["n"] != int64(2) {
		t.Fatalf("x after two read-modify-writes: %v, %v; want n 2", rec.Data(), err)
	}
	if n := mustCount(t, dbB); n != 5 {
		t.Errorf("Count = %d, want 5", n)
	}
	verifyClean(t, a)
}

// Sixteen OS processes each add one to a record a hundred times, in
// Update, by reading it and writing it back: none of the 1,600 updates is
// lost, since each read locks the record's row until its transaction ends.
func TestPostgresReadModifyWriteProcesses(t *testing.T) {
	skipOnPostgresPass(t)
	skipUnderInvariants(t)
	url := pgtest.URL(t)
	db := openPostgres(t, url)
	docs, err := db.Docs("counters")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := docs.Put(storh.Map{"n": 0})
	if err != nil {
		t.Fatal(err)
	}
	const procs, each = 16, 100
	children := make([]*rowsChild, procs)
	for i := range children {
		children[i] = startRowsChild(t, url)
	}
	var wg sync.WaitGroup
	for _, c := range children {
		wg.Go(func() {
			if _, err := c.call(fmt.Sprintf("inc %s %d", rec.ID, each)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := docs.Get(rec.ID)
	if err != nil || got.Data()["n"] != int64(procs*each) {
		t.Fatalf("after %d×%d increments: %v, %v", procs, each, got.Data(), err)
	}
	if n := mustCount(t, docs); n != 1 {
		t.Errorf("Count = %d, want 1", n)
	}
	verifyClean(t, db)
}

// Two stores in this process and one in another OS process put records
// with the same unique values at once: each value is stored once, and
// every other put of it fails with ErrUniqueViolation.
func TestPostgresUniqueRace(t *testing.T) {
	skipOnPostgresPass(t)
	skipUnderInvariants(t)
	url := pgtest.URL(t)
	const values = 150
	dbs := []*storh.DB{openPostgres(t, url), openPostgres(t, url)}
	child := startRowsChild(t, url)
	// Created first, so that every writer meets the index with claims.
	if _, err := dbs[0].Docs("users", storh.WithIndex(storh.Index("u").Unique())); err != nil {
		t.Fatal(err)
	}
	won := make([][]int, 3) // the values each writer stored
	var wg sync.WaitGroup
	for w, db := range dbs {
		wg.Go(func() {
			docs, err := db.Docs("users", storh.WithIndex(storh.Index("u").Unique()))
			if err != nil {
				t.Error(err)
				return
			}
			for v := range values {
				_, err := docs.Put(storh.Map{"u": v, "w": w})
				switch {
				case err == nil:
					won[w] = append(won[w], v)
				case !errors.Is(err, storh.ErrUniqueViolation):
					t.Errorf("writer %d, value %d: %v, want ErrUniqueViolation", w, v, err)
				}
			}
		})
	}
	wg.Go(func() {
		words, err := child.call(fmt.Sprintf("unique %d", values))
		if err != nil {
			t.Error(err)
			return
		}
		for _, w := range words {
			v, err := strconv.Atoi(w)
			if err != nil {
				t.Error(err)
				return
			}
			won[2] = append(won[2], v)
		}
	})
	wg.Wait()
	winners := make(map[int][]int)
	for w, vs := range won {
		for _, v := range vs {
			winners[v] = append(winners[v], w)
		}
	}
	docs, err := dbs[0].Docs("users")
	if err != nil {
		t.Fatal(err)
	}
	for v := range values {
		recs, err := docs.Find(query.All().Where(query.Field("u").Eq(v)))
		if err != nil || len(recs) != 1 || len(winners[v]) != 1 || recs[0].Data()["w"] != int64(winners[v][0]) {
			t.Fatalf("value %d: stored %d times (%v), won by writers %v", v, len(recs), err, winners[v])
		}
	}
	if n := mustCount(t, docs); n != values {
		t.Errorf("Count = %d, want %d", n, values)
	}
	verifyClean(t, dbs[0])
}

// Writers in three stores put, replace and delete records at once, and
// append to a log: every counter (records, bytes, index entries) comes
// out exact, and Verify finds nothing. A transaction that then holds the
// collection alone folds the counter slots into the base counters.
func TestPostgresSharedCounters(t *testing.T) {
	skipOnPostgresPass(t)
	skipUnderInvariants(t)
	url := pgtest.URL(t)
	dbs := []*storh.DB{openPostgres(t, url), openPostgres(t, url), openPostgres(t, url)}
	opts := []storh.CollectionOption{storh.WithIndex(storh.Index("tag")), storh.WithIndex(storh.Index("u").Unique())}
	var wg sync.WaitGroup
	for w, db := range dbs {
		wg.Go(func() {
			docs, err := db.Docs("docs", opts...)
			if err != nil {
				t.Error(err)
				return
			}
			log, err := db.Log("log")
			if err != nil {
				t.Error(err)
				return
			}
			var mine []uuidv7.UUID
			for i := range 60 {
				var err error
				switch i % 6 {
				case 0, 1, 2:
					var rec storh.Record
					rec, err = docs.Put(storh.Map{"tag": i % 4, "u": w*1000 + i, "pad": strings.Repeat("x", i)})
					mine = append(mine, rec.ID)
				case 3: // a replacement of another size, without its unique value
					_, err = docs.PutWithID(mine[len(mine)-1], storh.Map{"tag": "r", "pad": strings.Repeat("y", 2*i)})
				case 4:
					err = docs.Delete(mine[0])
					mine = mine[1:]
				default:
					_, err = docs.PutMany([]any{storh.Map{"tag": w}, storh.Map{"u": w*1000 + 500 + i}})
				}
				if err == nil {
					_, err = log.Put(storh.Map{"w": w, "i": i})
				}
				if err != nil {
					t.Errorf("writer %d, step %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	check := func(when string) {
		t.Helper()
		docs, err := dbs[0].Docs("docs")
		if err != nil {
			t.Fatal(err)
		}
		all, err := docs.Find(query.All())
		if err != nil {
			t.Fatal(err)
		}
		// A record without the field has a null entry in the index.
		entries := map[string]int{"tag": len(all), "u": len(all)}
		if n := mustCount(t, docs); n != len(all) || n != 3*(30+10) {
			t.Errorf("%s: Count = %d, the records %d, want %d", when, n, len(all), 3*40)
		}
		infos, err := docs.Indexes()
		if err != nil {
			t.Fatal(err)
		}
		for _, ix := range infos {
			if ix.Entries != entries[ix.Name] {
				t.Errorf("%s: index %s counts %d entries, want %d", when, ix.Name, ix.Entries, entries[ix.Name])
			}
		}
		if n := mustCount(t, mustLog(t, dbs[1], "log")); n != 3*60 {
			t.Errorf("%s: log Count = %d, want %d", when, n, 3*60)
		}
		verifyClean(t, dbs[2])
	}
	check("after the writers")
	if n := counterSlots(t, url, "docs"); n == 0 {
		t.Errorf("no counter slot after writes beside each other")
	}
	// A query in Update holds the collection alone: its write folds.
	if err := dbs[1].Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("docs")
		if err != nil {
			return err
		}
		if _, err := d.Find(query.All().Limit(1)); err != nil {
			return err
		}
		_, err = d.Put(storh.Map{"tag": 0, "u": -1})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n := counterSlots(t, url, "docs"); n != 0 {
		t.Errorf("%d counter slots after a write that held the collection alone, want 0", n)
	}
	if err := dbs[1].Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("docs")
		if err != nil {
			return err
		}
		recs, err := d.Find(query.All().Where(query.Field("u").Eq(-1)))
		if err != nil || len(recs) != 1 {
			return fmt.Errorf("the record just put: %d, %v", len(recs), err)
		}
		return d.Delete(recs[0].ID)
	}); err != nil {
		t.Fatal(err)
	}
	check("after the fold")
}

func mustLog(t *testing.T, db *storh.DB, name string) *storh.Log {
	t.Helper()
	l, err := db.Log(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// counterSlots counts the counter slots in collection name's metadata.
func counterSlots(t *testing.T, url, name string) int {
	t.Helper()
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx, err := s.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	n := 0
	cur := tx.Bucket([]byte(name)).Bucket([]byte("m")).Cursor()
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		for _, prefix := range []string{"cs:", "xs:", "qs:"} {
			if strings.HasPrefix(string(k), prefix) {
				n++
			}
		}
	}
	if err := tx.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// A group commit whose transaction meets another store's insert of an id
// it took for new (past the largest id it knew) runs again, with every op
// of the group: the docs put replaces the other store's record, the log
// put fails with ErrExists alone, and the other puts are stored once.
func TestPostgresGroupCommitRerun(t *testing.T) {
	skipOnPostgresPass(t)
	url := pgtest.URL(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	for _, kind := range []string{"docs", "log"} {
		t.Run(kind, func(t *testing.T) {
			open := func(db *storh.DB) interface {
				Put(any) (storh.Record, error)
				PutWithID(uuidv7.UUID, any) (storh.Record, error)
				Get(uuidv7.UUID) (storh.Record, error)
				Count() (int, error)
			} {
				if kind == "log" {
					return mustLog(t, db, kind)
				}
				d, err := db.Docs(kind)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			ca, cb := open(a), open(b)
			if _, err := ca.Put(storh.Map{"by": "a"}); err != nil { // a learns the largest id
				t.Fatal(err)
			}
			// Ids past it and before the other store's: however the puts
			// are grouped, a never learns an id past the one b takes.
			const others = 8
			ids := make([]uuidv7.UUID, others)
			for i := range ids {
				ids[i] = uuidv7.New()
			}
			taken, err := cb.Put(storh.Map{"by": "b"})
			if err != nil {
				t.Fatal(err)
			}
			before, err := a.Stats()
			if err != nil {
				t.Fatal(err)
			}
			errs := make([]error, others+1)
			var wg sync.WaitGroup
			for i := range others + 1 {
				wg.Go(func() {
					if i == others {
						_, errs[i] = ca.PutWithID(taken.ID, storh.Map{"by": "a again"})
					} else {
						_, errs[i] = ca.PutWithID(ids[i], storh.Map{"by": "a", "i": i})
					}
				})
			}
			wg.Wait()
			for i, err := range errs[:others] {
				if err != nil {
					t.Errorf("put %d: %v", i, err)
				}
			}
			want := "a again"
			if kind == "log" {
				want = "b"
				if !errors.Is(errs[others], storh.ErrExists) {
					t.Errorf("the log put of the other store's id: %v, want ErrExists", errs[others])
				}
			} else if errs[others] != nil {
				t.Errorf("the docs put of the other store's id: %v", errs[others])
			}
			if rec, err := cb.Get(taken.ID); err != nil || rec.Data()["by"] != want {
				t.Errorf("the other store's id holds %v, %v; want by %q", rec.Data(), err, want)
			}
			if n, err := cb.Count(); err != nil || n != 2+others {
				t.Errorf("Count = %d, %v; want %d", n, err, 2+others)
			}
			after, err := a.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if after.Reruns <= before.Reruns {
				t.Errorf("Reruns went from %d to %d: the conflict was not run again", before.Reruns, after.Reruns)
			}
			verifyClean(t, b)
		})
	}
}

// The model-based checks of TestSharedIndexesTwoStores and
// TestSharedIndexesTwoProcesses on indexes of one key per entry, the
// layout of PostgreSQL's own: writers hold the collection beside each
// other, and the unique index's claims decide.
func TestSharedRowsTwoStores(t *testing.T) {
	skipUnderInvariants(t)
	skipOnPostgresPass(t)
	url := pgtest.SchemaURL(t)
	tuneFor(t, "layout=keys")
	var clients [2]ixClient
	for i := range clients {
		clients[i] = &localIxClient{db: openPostgres(t, url)}
	}
	checkSharedIndexes(t, clients)
}

func TestSharedRowsTwoProcesses(t *testing.T) {
	if os.Getenv(ixChildEnv) != "" {
		t.Skip("the child's own run")
	}
	skipUnderInvariants(t)
	skipOnPostgresPass(t)
	url := pgtest.SchemaURL(t)
	tuneFor(t, "layout=keys")
	child := startIxChildTuned(t, url, "layout=keys")
	checkSharedIndexes(t, [2]ixClient{&localIxClient{db: openPostgres(t, url)}, child})
}

// rowsChildEnv names the URL a child of the tests above opens.
const rowsChildEnv = "STORH_ROWS_CHILD"

// rowsChild drives a store in a child process: one request line, one
// answer line.
type rowsChild struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startRowsChild(t *testing.T, url string) *rowsChild {
	t.Helper()
	cmd, in, out := startChild(t, "TestPostgresRowsChild", rowsChildEnv+"="+url)
	c := &rowsChild{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	c.out.Buffer(nil, 1<<20)
	t.Cleanup(func() {
		c.in.Close()
		c.cmd.Wait()
	})
	return c
}

// call sends one request and returns the words of its "ok" answer.
func (c *rowsChild) call(req string) ([]string, error) {
	if _, err := fmt.Fprintln(c.in, req); err != nil {
		return nil, fmt.Errorf("child: %w", err)
	}
	for c.out.Scan() {
		kind, rest, _ := strings.Cut(c.out.Text(), " ")
		switch kind {
		case "ok":
			return strings.Fields(rest), nil
		case "err":
			return nil, errors.New("child: " + rest)
		}
		fmt.Fprintln(os.Stderr, "child:", c.out.Text()) // the test framework's own lines
	}
	return nil, fmt.Errorf("child: gone (%v)", c.out.Err())
}

// TestPostgresRowsChild is the child of the tests above: it serves their
// requests on a store of its own.
//
//	inc <id> <n>   n times, in Update: read record id, write it back with n+1
//	unique <n>     put records with u = 0..n-1 into users; answer the values stored
func TestPostgresRowsChild(t *testing.T) {
	url := os.Getenv(rowsChildEnv)
	if url == "" {
		t.Skip("run by the PostgreSQL tests of writers beside each other")
	}
	db, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		w := strings.Fields(in.Text())
		var res []string
		var err error
		switch w[0] {
		case "inc":
			id, n := uuidv7.MustParse(w[1]), 0
			if n, err = strconv.Atoi(w[2]); err != nil {
				break
			}
			for range n {
				if err = db.Update(func(tx *storh.Tx) error {
					d, err := tx.Docs("counters")
					if err != nil {
						return err
					}
					rec, err := d.Get(id)
					if err != nil {
						return err
					}
					_, err = d.PutWithID(id, storh.Map{"n": rec.Data()["n"].(int64) + 1})
					return err
				}); err != nil {
					break
				}
			}
		case "unique":
			var n int
			var docs *storh.Docs
			if n, err = strconv.Atoi(w[1]); err == nil {
				docs, err = db.Docs("users", storh.WithIndex(storh.Index("u").Unique()))
			}
			for v := 0; err == nil && v < n; v++ {
				_, err = docs.Put(storh.Map{"u": v, "w": 2})
				switch {
				case err == nil:
					res = append(res, strconv.Itoa(v))
				case errors.Is(err, storh.ErrUniqueViolation):
					err = nil
				}
			}
		default:
			err = fmt.Errorf("unknown request %q", w[0])
		}
		if err != nil {
			fmt.Println("err", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Println("ok", strings.Join(res, " "))
	}
}

// An Update that put an id past the largest one its DB knew, which
// another store had taken meanwhile, and then queried the collection
// (holding it alone from there) conflicts at its commit; its next run
// reads the largest id afresh and replaces the record.
func TestPostgresStaleBoundThenQuery(t *testing.T) {
	skipOnPostgresPass(t)
	url := pgtest.URL(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	da, err := a.Docs("notes")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second put learns the largest id
		if _, err := da.Put(storh.Map{"by": "a"}); err != nil {
			t.Fatal(err)
		}
	}
	dbB, err := b.Docs("notes")
	if err != nil {
		t.Fatal(err)
	}
	taken, err := dbB.Put(storh.Map{"by": "b"})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	if err := a.Update(func(tx *storh.Tx) error {
		runs++
		d, err := tx.Docs("notes")
		if err != nil {
			return err
		}
		if _, err := d.PutWithID(taken.ID, storh.Map{"by": "a again"}); err != nil {
			return err
		}
		_, err = d.Find(query.All().Limit(1))
		return err
	}); err != nil {
		t.Fatalf("Update after %d runs: %v", runs, err)
	}
	if rec, err := dbB.Get(taken.ID); err != nil || rec.Data()["by"] != "a again" {
		t.Fatalf("the record: %v, %v", rec.Data(), err)
	}
	if runs != 2 {
		t.Errorf("the Update ran %d times, want 2", runs)
	}
}

// A unique index made before claims (here, a file's index of one key per
// entry, migrated to PostgreSQL) gets its claims from the first write that
// would hold its collection beside other writers: one per non-null value,
// checked by Verify, rebuilt by Repair.
func TestPostgresClaimsOfAnOlderIndex(t *testing.T) {
	skipOnPostgresPass(t)
	tuneFor(t, "layout=keys")
	file := filepath.Join(t.TempDir(), "users.db")
	fdb := openAt(t, file)
	users, err := fdb.Docs("users", storh.WithIndex(storh.Index("u").Unique()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := users.PutMany([]any{storh.Map{"u": 1}, storh.Map{"u": 2}, storh.Map{"u": 3}, storh.Map{"other": true}}); err != nil {
		t.Fatal(err)
	}
	if err := fdb.Close(); err != nil {
		t.Fatal(err)
	}
	url := pgtest.URL(t)
	if _, err := storh.Migrate(context.Background(), file, url); err != nil {
		t.Fatal(err)
	}
	if n := claims(t, url, "users", "u", nil); n != 0 {
		t.Fatalf("the migrated index has %d claims, want none yet", n)
	}
	db := openPostgres(t, url)
	users, err = db.Docs("users", storh.WithIndex(storh.Index("u").Unique()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := users.Put(storh.Map{"u": 2}); !errors.Is(err, storh.ErrUniqueViolation) {
		t.Fatalf("a put of a value held: %v, want ErrUniqueViolation", err)
	}
	if _, err := users.Put(storh.Map{"u": 4}); err != nil {
		t.Fatal(err)
	}
	if n := claims(t, url, "users", "u", nil); n != 4 {
		t.Fatalf("%d claims, want the 4 values held (null claims nothing)", n)
	}
	verifyClean(t, db)

	// A claim lost behind the engine's back: Verify says so, Repair
	// claims the value again.
	claims(t, url, "users", "u", func(b kv.Bucket, k []byte) error { return b.Delete(k) })
	var problems []string
	if _, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) }); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(problems, "\n"), "have no claim") {
		t.Fatalf("Verify of a lost claim: %q", problems)
	}
	if _, err := db.Repair(nil); err != nil {
		t.Fatal(err)
	}
	verifyClean(t, db)
	if _, err := users.Put(storh.Map{"u": 1}); !errors.Is(err, storh.ErrUniqueViolation) {
		t.Fatalf("a put of a value held, after Repair: %v, want ErrUniqueViolation", err)
	}
}

// claims counts the claims of index name of collection coll, calling
// change (if not nil) on the first, in a transaction of a store of its
// own that commits.
func claims(t *testing.T, url, coll, name string, change func(b kv.Bucket, k []byte) error) int {
	t.Helper()
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx, err := s.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	root := tx.Bucket([]byte(coll)).Bucket([]byte("u"))
	if root == nil {
		return 0
	}
	b := root.Bucket([]byte(name))
	n := 0
	cur := b.Cursor()
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		if n == 0 && change != nil {
			if err := change(b, bytes.Clone(k)); err != nil {
				t.Fatal(err)
			}
		}
		n++
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return n
}
