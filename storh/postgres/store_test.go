package postgres

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/kv/kvtest"
)

// The tests run against a private PostgreSQL server (see package pgtest);
// without one they skip, or fail under STORH_REQUIRE_POSTGRES=1.
func TestMain(m *testing.M) {
	flag.Parse()
	testkit.ShortRapid()
	os.Exit(pgtest.Run(m))
}

var ctx = context.Background()

// openStore opens a store in a fresh database, closed when t ends.
func openStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestKVContract(t *testing.T) {
	pgtest.Require(t) // skip once, not in every subtest
	kvtest.Run(t, func(t *testing.T) kv.Store { return openStore(t) })
}

func begin(t testing.TB, s kv.Store, writable bool) kv.Tx {
	t.Helper()
	tx, err := s.Begin(writable)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

func commit(t testing.TB, tx kv.Tx) {
	t.Helper()
	if err := tx.Err(); err != nil {
		t.Fatalf("Tx.Err: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// create creates bucket name under p (a Tx or a Bucket).
func create(t testing.TB, p interface {
	CreateBucket([]byte) (kv.Bucket, error)
}, name string) kv.Bucket {
	t.Helper()
	b, err := p.CreateBucket([]byte(name))
	if err != nil {
		t.Fatalf("CreateBucket(%q): %v", name, err)
	}
	return b
}

func key(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }

// fill creates bucket name holding n keys, key(i) → "v<i>".
func fill(t testing.TB, s kv.Store, name string, n int) {
	t.Helper()
	tx := begin(t, s, true)
	b := create(t, tx, name)
	for i := range n {
		if err := b.Put(key(i), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, tx)
}

// Writers of one top-level bucket take turns: the second waits for the
// first's lock, then sees what it committed. Writers of another top-level
// bucket do not wait.
func TestWritersTakeTurns(t *testing.T) {
	s := openStore(t)
	tx := begin(t, s, true)
	create(t, tx, "b").Put([]byte("x"), []byte("0"))
	commit(t, tx)

	t1 := begin(t, s, true)
	b1 := t1.Bucket([]byte("b"))
	if string(b1.Get([]byte("x"))) != "0" {
		t.Fatal("setup not visible")
	}
	must(t, b1.Put([]byte("x"), []byte("1")))

	seen := make(chan string, 1)
	go func() {
		t2, err := s.Begin(true)
		if err != nil {
			seen <- err.Error()
			return
		}
		defer t2.Rollback()
		b2 := t2.Bucket([]byte("b"))
		if b2 == nil {
			seen <- fmt.Sprint("bucket missing: ", t2.Err())
			return
		}
		seen <- string(b2.Get([]byte("x")))
	}()
	waitForLockWaiters(t, s, 1)

	// Meanwhile a writer of another top-level bucket goes ahead.
	other := make(chan error, 1)
	go func() {
		t3, err := s.Begin(true)
		if err == nil {
			var b kv.Bucket
			if b, err = t3.CreateBucket([]byte("other")); err == nil {
				if err = b.Put([]byte("k"), []byte("v")); err == nil {
					err = t3.Commit()
				}
			}
			t3.Rollback()
		}
		other <- err
	}()
	select {
	case err := <-other:
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("a writer of another bucket waited for the lock on b")
	}

	select {
	case v := <-seen:
		t.Fatalf("the second writer of b read %q before the first committed", v)
	default:
	}
	must(t, t1.Commit())
	if v := <-seen; v != "1" {
		t.Errorf("the second writer read x=%q, want the first's committed 1", v)
	}
}

// waitForLockWaiters waits until n sessions wait for an advisory lock of
// this store's database.
func waitForLockWaiters(t *testing.T, s *Store, n int) {
	t.Helper()
	waitForWaiters(t, s, n, "locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
}

// waitForWaiters waits until n sessions wait for a lock of pg_locks that
// matches where.
func waitForWaiters(t *testing.T, s *Store, n int, where string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_locks WHERE NOT granted AND "+where).Scan(&waiting)
		must(t, err)
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock (%s), want %d", waiting, where, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Two writers that lock two top-level buckets in opposite orders deadlock:
// PostgreSQL fails one (40P01) with kv.ErrConflict, and the other goes on.
func TestDeadlockIsConflict(t *testing.T) {
	s := openStore(t)
	tx := begin(t, s, true)
	create(t, tx, "a")
	create(t, tx, "b")
	commit(t, tx)

	t1, t2 := begin(t, s, true), begin(t, s, true)
	if t1.Bucket([]byte("a")) == nil || t2.Bucket([]byte("b")) == nil {
		t.Fatal(t1.Err(), t2.Err())
	}
	errs := make(chan error, 2)
	run := func(tx kv.Tx, name string) {
		b := tx.Bucket([]byte(name))
		if b == nil {
			err := tx.Err()
			tx.Rollback()
			errs <- err
			return
		}
		err := b.Put([]byte("k"), []byte(name))
		if err == nil {
			err = tx.Commit()
		}
		tx.Rollback() // a loser lets the winner go on
		errs <- err
	}
	go run(t1, "b")
	go run(t2, "a")
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("errors %v and %v: want one deadlock and one commit", e1, e2)
	}
	if err := cmp.Or(e1, e2); !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("the loser's error %v does not wrap kv.ErrConflict", err)
	}
}

// Concurrent increments of one counter by writers on separate
// connections: none is lost, and none conflicts, since writers of a
// top-level bucket take turns.
func TestConcurrentIncrements(t *testing.T) {
	s := openStore(t)
	tx := begin(t, s, true)
	create(t, tx, "c").Put([]byte("n"), key(0))
	commit(t, tx)

	const workers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range each {
				tx, err := s.Begin(true)
				if err != nil {
					errs <- err
					return
				}
				b := tx.Bucket([]byte("c"))
				var n uint64
				if b != nil {
					if v := b.Get([]byte("n")); v != nil {
						n = binary.BigEndian.Uint64(v)
					}
				}
				if err = tx.Err(); err == nil {
					if err = b.Put([]byte("n"), key(int(n)+1)); err == nil {
						err = tx.Commit()
					}
				}
				tx.Rollback()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := begin(t, s, false)
	if n := binary.BigEndian.Uint64(r.Bucket([]byte("c")).Get([]byte("n"))); n != workers*each {
		t.Errorf("counter = %d, want %d", n, workers*each)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A transaction whose connection dies: reads answer nil, the failure is
// kept (Err), writes and Commit fail with it, Rollback is quiet, and the
// pool replaces the connection.
func TestStickyError(t *testing.T) {
	s := openStore(t)
	fill(t, s, "b", 3)

	for _, writable := range []bool{true, false} {
		t.Run(fmt.Sprintf("writable=%v", writable), func(t *testing.T) {
			txn := begin(t, s, writable)
			b := txn.Bucket([]byte("b"))
			if v := b.Get(key(1)); string(v) != "v1" {
				t.Fatalf("Get = %q before the failure", v)
			}
			pid := txn.(*tx).conn.Conn().PgConn().PID()
			var ok bool
			if err := s.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
				t.Fatalf("pg_terminate_backend: %v %v", ok, err)
			}
			if v := b.Get(key(2)); v != nil {
				t.Fatalf("Get on a dead connection = %q, want nil", v)
			}
			first := txn.Err()
			if first == nil {
				t.Fatal("Err() = nil after a failed read")
			}
			t.Logf("Err: %v", first)
			if k, _ := b.Cursor().First(); k != nil {
				t.Errorf("cursor after the failure found %q", k)
			}
			if txn.Bucket([]byte("b")) != nil {
				t.Errorf("Bucket after the failure is not nil")
			}
			if err := txn.Err(); err != first {
				t.Errorf("Err changed from %v to %v", first, err)
			}
			if err := txn.(kv.Failer).Failure(); err != first {
				t.Errorf("Failure = %v, want Err's %v", err, first)
			}
			if writable {
				if err := b.Put(key(9), []byte("x")); !errors.Is(err, first) {
					t.Errorf("Put after the failure: %v, want %v", err, first)
				}
				if err := txn.Commit(); err == nil || !errors.Is(err, first) {
					t.Errorf("Commit after the failure: %v, want one wrapping %v", err, first)
				}
			}
			if err := txn.Rollback(); err != nil {
				t.Errorf("Rollback after the failure: %v", err)
			}
			// The store goes on with a new connection.
			r := begin(t, s, false)
			if v := r.Bucket([]byte("b")).Get(key(2)); string(v) != "v2" {
				t.Errorf("Get in the next transaction = %q", v)
			}
			must(t, r.Err())
		})
	}
}

// The statements of Get and of cursor moves use the primary key's index,
// for custom and generic plans alike, on a table large enough and analyzed
// so that the planner chooses honestly.
func TestExplain(t *testing.T) {
	s := openStore(t)
	const n = 10000
	fill(t, s, "b", n)
	txn := begin(t, s, false)
	q := txn.Bucket([]byte("b")).(*bucket).sql
	txn.Rollback()
	if _, err := s.pool.Exec(ctx, "ANALYZE "+q.name); err != nil {
		t.Fatal(err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	k, del := key(n/2), [][]byte{key(1), key(n / 2), key(n - 2)}
	for _, st := range []struct {
		name, sql, types string
		args             []any
		indexOnly        bool // may be a bitmap scan (DELETE of many keys)
	}{
		{"get", q.get, "bytea", []any{k}, false},
		{"seek", q.ge, "bytea, int", []any{k, 16}, false},
		{"next", q.gt, "bytea, int", []any{k, 512}, false},
		{"prev", q.lt, "bytea, int", []any{k, 512}, false},
		{"first", q.first, "int", []any{16}, false},
		{"last", q.last, "int", []any{16}, false},
		{"range first", q.ranged.first, "bytea, bytea, int", []any{key(100), k, 16}, false},
		{"range last", q.ranged.last, "bytea, bytea, int", []any{key(100), k, 16}, false},
		{"range seek", q.ranged.ge, "bytea, bytea, bytea, int", []any{key(100), k, key(200), 16}, false},
		{"range next", q.ranged.gt, "bytea, bytea, bytea, int", []any{key(100), k, key(200), 512}, false},
		{"range prev", q.ranged.lt, "bytea, bytea, bytea, int", []any{key(100), k, key(200), 512}, false},
		{"delete", q.del1, "bytea", []any{k}, false},
		{"delete many", q.delN, "bytea[]", []any{del}, true},
		{"lock from", q.lockFrom, "bytea, int", []any{k, 16}, false},
		{"lock range", q.lockRange, "bytea, bytea, int", []any{k, key(n/2 + 100), 16}, false},
		{"lock keys", q.lockKeys, "bytea[]", []any{del}, true},
		{"try keys", q.tryKeys, "bytea[]", []any{del}, true},
		{"get keys", getKeysSQL(q), "bytea[]", []any{del}, true},
		{"lock range following", followSQL(q.lockRange, []string{q.name, q.name}, []bool{true, false}), "bytea, bytea, int", []any{k, key(n/2 + 100), 16}, false},
		{"lock ranges in one", rangesSQL([]string{q.lockRange, renumber(q.lockFrom, 2, 3)}, [][]string{nil, {q.name, q.name}}, [][]bool{nil, {true, false}}),
			"bytea, bytea, int, bytea, int", []any{k, key(n/2 + 100), 16, key(n / 4), 16}, false},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			t.Run(st.name+"/"+mode, func(t *testing.T) {
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx) // the deletes are only explained, but EXPLAIN EXECUTE runs nothing anyway
				if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(ctx, "PREPARE p ("+st.types+") AS "+st.sql); err != nil {
					t.Fatal(err)
				}
				defer tx.Exec(ctx, "DEALLOCATE p")
				// EXECUTE takes no parameters of the protocol's: literals.
				params := make([]string, len(st.args))
				for i, a := range st.args {
					params[i] = literal(a)
				}
				var out []byte
				err = tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE p("+strings.Join(params, ", ")+")").Scan(&out)
				if err != nil {
					t.Fatal(err)
				}
				var plans []struct{ Plan plan }
				if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
					t.Fatalf("EXPLAIN output %s: %v", out, err)
				}
				nodes := plans[0].Plan.nodes(nil)
				var onPK bool
				for _, p := range nodes {
					switch p.Type {
					case "Seq Scan":
						t.Errorf("%s: a Seq Scan:\n%s", st.sql, out)
					case "Index Scan", "Index Only Scan":
						onPK = onPK || strings.HasSuffix(p.Index, "_pkey")
					case "Bitmap Index Scan":
						onPK = onPK || (st.indexOnly && strings.HasSuffix(p.Index, "_pkey"))
					}
				}
				if !onPK {
					t.Errorf("%s: no scan of the primary key:\n%s", st.sql, out)
				}
			})
		}
	}
}

// literal writes a statement's argument as SQL.
func literal(a any) string {
	switch a := a.(type) {
	case []byte:
		return fmt.Sprintf("'\\x%x'::bytea", a)
	case [][]byte:
		elems := make([]string, len(a))
		for i, e := range a {
			elems[i] = literal(e)
		}
		return "ARRAY[" + strings.Join(elems, ", ") + "]"
	}
	return fmt.Sprint(a)
}

// plan is a node of EXPLAIN (FORMAT JSON).
type plan struct {
	Type  string `json:"Node Type"`
	Index string `json:"Index Name"`
	Plans []plan `json:"Plans"`
}

func (p plan) nodes(out []plan) []plan {
	out = append(out, p)
	for _, c := range p.Plans {
		out = c.nodes(out)
	}
	return out
}

// roundTrips counts what a store sends: batches and single queries.
// roundTrips counts round trips (n) and the statements they carry
// (stmts), and keeps the text of the statements when sqls is set.
type roundTrips struct {
	n, stmts atomic.Int64
	mu       sync.Mutex
	sqls     *[]string
}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.statement(d.SQL)
}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	r.statement(d.SQL)
	return ctx
}

func (r *roundTrips) statement(sql string) {
	r.stmts.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sqls != nil {
		*r.sqls = append(*r.sqls, sql)
	}
}

// record keeps the text of the statements sent while fn runs.
func (r *roundTrips) record(fn func()) []string {
	var sqls []string
	r.mu.Lock()
	r.sqls = &sqls
	r.mu.Unlock()
	fn()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sqls = nil
	return sqls
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// openCounted opens a store on url whose round trips the returned
// roundTrips counts, closed when the test ends.
func openCounted(t *testing.T, url string) (*Store, *roundTrips) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	must(t, err)
	rt := &roundTrips{}
	cfg.ConnConfig.Tracer = rt
	s, err := openConfig(ctx, cfg, options{})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	return s, rt
}

// Writes are buffered and sent with the next read of their bucket or
// with the commit; a cursor reads pages that grow.
func TestRoundTrips(t *testing.T) {
	s, rt := openCounted(t, pgtest.URL(t))
	count := func(what string, want int64, fn func()) {
		t.Helper()
		before := rt.n.Load()
		fn()
		if got := rt.n.Load() - before; got != want {
			t.Errorf("%s: %d round trips, want %d", what, got, want)
		}
	}
	const n = 1000
	count("create a bucket, 1000 puts, commit", 3, func() {
		tx := begin(t, s, true)
		b := create(t, tx, "b") // the marker and registry rows, then the table
		for i := range n {
			must(t, b.Put(key(i), []byte("v")))
		}
		commit(t, tx) // the puts and the COMMIT
	})
	count("read-only: begin with Bucket, Get, rollback", 3, func() {
		tx := begin(t, s, false)
		if v := tx.Bucket([]byte("b")).Get(key(7)); string(v) != "v" {
			t.Errorf("Get = %q", v)
		}
		must(t, tx.Rollback())
	})
	// That read cached the bucket's subtree: the next takes it from the
	// cache and checks it in the round trip of its Get.
	count("read-only, subtree cached: Get with the check, rollback", 2, func() {
		tx := begin(t, s, false)
		if v := tx.Bucket([]byte("b")).Get(key(7)); string(v) != "v" {
			t.Errorf("Get = %q", v)
		}
		must(t, tx.Rollback())
	})
	// A writer takes the cached subtree too: its lock and a check of the
	// subtree go with its first statement, the Get.
	count("Bucket, puts and a Get of the bucket, commit", 2, func() {
		tx := begin(t, s, true)
		b := tx.Bucket([]byte("b"))
		must(t, b.Put(key(n), []byte("new")))
		must(t, b.Delete(key(0)))
		if v := b.Get(key(n)); string(v) != "new" {
			t.Errorf("Get of a buffered put = %q", v)
		}
		commit(t, tx)
	})
	count("a walk of 1000 keys", 6+1, func() { // pages of 16…512 (the first with the check), rollback
		tx := begin(t, s, false)
		c := tx.Bucket([]byte("b")).Cursor()
		seen := 0
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			seen++
		}
		if seen != n {
			t.Errorf("walked %d keys, want %d", seen, n)
		}
		must(t, tx.Rollback())
	})
	// A walk that says how far it goes reads its first page whole: 100
	// keys and the one after them in one fetch; all 1000 in pages of 512
	// and 488.
	for _, tc := range []struct {
		n, trips int
	}{{100, 1 + 1}, {n, 2 + 1}} {
		count(fmt.Sprintf("a walk of %d keys with ReadAhead", tc.n), int64(tc.trips), func() {
			tx := begin(t, s, false)
			c := tx.Bucket([]byte("b")).Cursor()
			c.(kv.ReadAhead).ReadAhead(tc.n + 1)
			seen := 0
			for k, _ := c.Seek(key(0)); k != nil; k, _ = c.Next() {
				if seen++; seen > tc.n {
					break // the key after the walk: it is past its end
				}
			}
			if want := min(tc.n+1, n); seen != want {
				t.Errorf("walked %d keys, want %d", seen, want)
			}
			must(t, tx.Rollback())
		})
	}
	count("an empty writable transaction", 0, func() {
		tx := begin(t, s, true)
		commit(t, tx)
	})
}

// A cursor's read-ahead never hides the transaction's own writes: keys
// put or deleted ahead of it are seen, behind it are not revisited.
func TestCursorSeesWrites(t *testing.T) {
	s := openStore(t)
	fill(t, s, "b", 200) // keys 0..199
	tx := begin(t, s, true)
	b := tx.Bucket([]byte("b"))
	c := b.Cursor()
	k, _ := c.Seek(key(10))
	if !bytes.Equal(k, key(10)) {
		t.Fatalf("Seek = %x", k)
	}
	k, _ = c.Next() // 11, with a page read ahead
	must(t, b.Delete(key(12)))
	must(t, b.Put(key(5), []byte("behind")))
	must(t, b.Put(append(key(13), 0), []byte("ahead")))
	var got [][]byte
	for k, _ = c.Next(); k != nil && len(got) < 3; k, _ = c.Next() {
		got = append(got, k)
	}
	want := [][]byte{key(13), append(key(13), 0), key(14)}
	for i := range want {
		if i >= len(got) || !bytes.Equal(got[i], want[i]) {
			t.Fatalf("after writes the walk went %x, want %x", got, want)
		}
	}
	// Deleting every key through the cursor, far beyond one page.
	n := 0
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			t.Fatalf("nil value at %x", k)
		}
		must(t, c.Delete())
		n++
	}
	if n != 200 {
		t.Errorf("deleted %d keys through the cursor, want 200", n)
	}
	if k, _ := b.Cursor().Last(); k != nil {
		t.Errorf("after deleting every key Last = %x", k)
	}
	commit(t, tx)
}

// Keys up to MaxKeySize fit the primary key's index; beyond it and beyond
// MaxValueSize writes fail with the contract's errors before reaching the
// server.
func TestLimits(t *testing.T) {
	s := openStore(t)
	tx := begin(t, s, true)
	b := create(t, tx, "b")
	big := make([]byte, MaxKeySize)
	for i := range big {
		big[i] = byte(i*7 + i/251) // not compressible
	}
	must(t, b.Put(big, []byte("v")))
	if _, err := b.CreateBucket(append(big[:MaxKeySize-1:MaxKeySize-1], 1)); err != nil {
		t.Errorf("CreateBucket with a %d-byte name: %v", MaxKeySize, err)
	}
	if err := b.Put(append(big, 0), []byte("v")); !errors.Is(err, kv.ErrKeyTooLarge) {
		t.Errorf("Put of a %d-byte key: %v", MaxKeySize+1, err)
	}
	if err := b.Put([]byte("k"), make([]byte, MaxValueSize+1)); !errors.Is(err, kv.ErrValueTooLarge) {
		t.Errorf("Put of a %d-byte value: %v", MaxValueSize+1, err)
	}
	if v := b.Get(big); string(v) != "v" {
		t.Errorf("Get of the largest key = %q", v)
	}
	commit(t, tx)
}

// Two processes opening one new database at once: the advisory lock keeps
// their CREATE TABLE IF NOT EXISTS apart. The schema is the search_path's.
func TestOpen(t *testing.T) {
	url := pgtest.URL(t)
	setup, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close(ctx)
	if _, err := setup.Exec(ctx, "CREATE SCHEMA other"); err != nil {
		t.Fatal(err)
	}
	other := url + "&options=" + "-csearch_path%3Dother"
	var wg sync.WaitGroup
	stores := make([]*Store, 8)
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = Open(ctx, other) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() }) // after the transactions' cleanups
	}
	var n int
	if err := setup.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'other' AND tablename IN ('storh_buckets', 'storh_b0')").Scan(&n); err != nil || n != 2 {
		t.Fatalf("tables in schema other: %d, %v", n, err)
	}
	fill(t, stores[0], "b", 1)
	r := begin(t, stores[1], false)
	if v := r.Bucket([]byte("b")).Get(key(0)); string(v) != "v0" {
		t.Errorf("another store of the schema reads %q", v)
	}
	r.Rollback()
	if _, err := Open(ctx, url+"&options=-csearch_path%3Dmissing"); err == nil || !strings.Contains(err.Error(), "no schema") {
		t.Errorf("Open with a search_path naming no schema: %v", err)
	}
}

// A bucket deleted in the transaction refuses writes; one created again
// under the same name is a new, empty bucket.
func TestDeletedBucketHandle(t *testing.T) {
	s := openStore(t)
	fill(t, s, "b", 3)
	tx := begin(t, s, true)
	old := tx.Bucket([]byte("b"))
	nested := create(t, old, "n")
	must(t, tx.DeleteBucket([]byte("b")))
	if err := old.Put([]byte("k"), []byte("v")); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("Put into a deleted bucket: %v", err)
	}
	if err := nested.Put([]byte("k"), []byte("v")); !errors.Is(err, kv.ErrBucketNotFound) {
		t.Errorf("Put into a deleted bucket's nested one: %v", err)
	}
	b := create(t, tx, "b")
	if k, _ := b.Cursor().First(); k != nil {
		t.Errorf("the new bucket holds %x", k)
	}
	commit(t, tx)
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'storh_b%' AND tablename <> 'storh_buckets'").Scan(&n); err != nil || n != 2 {
		t.Errorf("bucket tables left: %d (%v), want 2: the top level and the new b", n, err)
	}
}

// Shared holders of a top-level bucket run side by side; one that holds
// it alone waits for them, and a shared holder waits for it.
func TestSharedHold(t *testing.T) {
	s := openStore(t)
	fill(t, s, "q", 4)

	// A hold begins with the statement after the lookup (which may come
	// from the cache): a Get.
	hold := func(tx kv.Locker) kv.Bucket {
		t.Helper()
		b := tx.BucketShared([]byte("q"))
		if b == nil || b.Get(key(0)) == nil {
			t.Fatal(tx.Err())
		}
		return b
	}
	t1, t2 := begin(t, s, true).(kv.Locker), begin(t, s, true).(kv.Locker)
	hold(t1)
	// t2 does not wait for t1: if it did, this would hang the test.
	hold(t2)

	alone := make(chan error, 1)
	go func() {
		t3, err := s.Begin(true)
		if err == nil {
			if b := t3.Bucket([]byte("q")); b == nil || b.Get(key(0)) == nil {
				err = cmp.Or(t3.Err(), errors.New("bucket missing"))
			}
			t3.Rollback()
		}
		alone <- err
	}()
	waitForLockWaiters(t, s, 1)
	must(t, t1.Rollback())
	waitForLockWaiters(t, s, 1) // still waiting, for t2
	select {
	case err := <-alone:
		t.Fatalf("the exclusive holder went ahead of a shared holder (err %v)", err)
	default:
	}
	must(t, t2.Rollback())
	must(t, <-alone)

	// HoldAlone waits for the other shared holders, from the next
	// statement on.
	t4, t5 := begin(t, s, true).(kv.Locker), begin(t, s, true).(kv.Locker)
	b4 := hold(t4)
	hold(t5)
	t4.HoldAlone([]byte("q"))
	got := make(chan []byte, 1)
	go func() { got <- b4.Get(key(0)) }()
	waitForLockWaiters(t, s, 1)
	must(t, t5.Rollback())
	if v := <-got; string(v) != "v0" {
		t.Fatalf("after HoldAlone, Get = %q (err %v)", v, t4.Err())
	}
}

// A writer's hold is its bucket's registry row, not only the advisory
// lock ahead of it: a session that changes the subtree holding the row
// alone, and no advisory lock (as on a server without them), makes a
// writer that took the subtree from the cache wait, and then fail with
// kv.ErrConflict, rather than write on the stale subtree. Its next run
// looks the subtree up afresh.
func TestHoldIsTheRegistryRow(t *testing.T) {
	s := openStore(t)
	fill(t, s, "b", 1)
	// A write that caches b's subtree: the next one takes it from there.
	w := begin(t, s, true)
	must(t, w.Bucket([]byte("b")).Put(key(1), []byte("cached")))
	commit(t, w)

	reg := pgx.Identifier{s.schema, "storh_buckets"}.Sanitize()
	otx, err := s.pool.Begin(ctx)
	must(t, err)
	defer otx.Rollback(ctx)
	tag, err := otx.Exec(ctx, "UPDATE "+reg+" SET gen = gen + 1 WHERE parent = 0 AND name = 'b'")
	must(t, err)
	if tag.RowsAffected() != 1 {
		t.Fatalf("raised the generation of %d rows", tag.RowsAffected())
	}

	done := make(chan error, 1)
	go func() {
		tx, err := s.Begin(true)
		if err != nil {
			done <- err
			return
		}
		defer tx.Rollback()
		if err := tx.Bucket([]byte("b")).Put(key(2), []byte("stale")); err != nil {
			done <- err
			return
		}
		done <- tx.Commit()
	}()
	waitForRowLockWaiters(t, s, 1)
	select {
	case err := <-done:
		t.Fatalf("the writer went ahead of the session holding b's registry row (Commit: %v)", err)
	default:
	}
	must(t, otx.Commit(ctx))
	if err := <-done; !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("Commit after the subtree changed = %v, want kv.ErrConflict", err)
	}
	tx := begin(t, s, true)
	b := tx.Bucket([]byte("b"))
	if b == nil || b.Get(key(2)) != nil {
		t.Fatalf("the failed writer's key is there, or b is missing (err %v)", tx.Err())
	}
	must(t, b.Put(key(2), []byte("fresh")))
	commit(t, tx)
}

// LockRange skips the rows another transaction holds and sees the
// transaction's own buffered writes; LockKeys waits for a holder, or
// skips it without wait.
func TestRowLocks(t *testing.T) {
	s := openStore(t)
	fill(t, s, "q", 10)
	t1, t2 := begin(t, s, true).(kv.Locker), begin(t, s, true).(kv.Locker)
	r1 := t1.BucketShared([]byte("q")).(kv.RowLocker)
	r2 := t2.BucketShared([]byte("q")).(kv.RowLocker)

	keys, values := r1.LockRange(key(2), key(6), 3)
	if want := [][]byte{key(2), key(3), key(4)}; !slices.EqualFunc(keys, want, bytes.Equal) ||
		string(values[0]) != "v2" || string(values[2]) != "v4" {
		t.Fatalf("LockRange [2,6) n=3: %x %q", keys, values)
	}
	// t2 skips 2..4, which t1 holds, and sees its own write of 6.
	must(t, t2.Bucket([]byte("q")).Put(key(6), []byte("mine")))
	keys, values = r2.LockRange(key(1), nil, 4)
	if want := [][]byte{key(1), key(5), key(6), key(7)}; !slices.EqualFunc(keys, want, bytes.Equal) || string(values[2]) != "mine" {
		t.Fatalf("LockRange from 1 beside t1's locks: %x %q", keys, values)
	}
	// Without wait, held keys read nil; a missing key reads nil.
	got := r2.LockKeys([][]byte{key(3), key(8), key(99)}, false)
	if got[0] != nil || string(got[1]) != "v8" || got[2] != nil {
		t.Fatalf("LockKeys without wait: %q", got)
	}
	// With wait, t2 gets key 3 once t1 ends, as t1 committed it.
	must(t, t1.Bucket([]byte("q")).Put(key(3), []byte("new")))
	done := make(chan [][]byte, 1)
	go func() { done <- r2.LockKeys([][]byte{key(3)}, true) }()
	waitForRowLockWaiters(t, s, 1)
	commit(t, t1)
	if v := <-done; string(v[0]) != "new" {
		t.Fatalf("LockKeys with wait after the holder committed: %q (err %v)", v, t2.Err())
	}
	must(t, t2.Err())
}

// waitForRowLockWaiters waits until n sessions wait for a row (which shows
// in pg_locks as a wait for its holder's transaction, or for the tuple).
func waitForRowLockWaiters(t *testing.T, s *Store, n int) {
	t.Helper()
	waitForWaiters(t, s, n, "locktype IN ('transactionid', 'tuple')")
}

// Open's errors show no password of the connection string, in whatever
// form pgx takes it, nor does the string a parse error keeps; they still
// say what went wrong.
func TestOpenErrorHidesPassword(t *testing.T) {
	for _, tc := range []struct {
		conn    string
		secrets []string
		says    string
	}{
		{"host=/nonexistent-dir user=app password=hunter2 dbname=x connect_timeout=1", nil, "no such file or directory"},
		{"host=/nonexistent-dir user=app password='hunter2' dbname=x port=abc", nil, "invalid port"},
		{"host=/nonexistent-dir password = 'hun ter2' port=abc", []string{"hun ter2", "ter2"}, "invalid port"},
		{`host=/nonexistent-dir password=hun\ ter2 port=abc`, []string{"ter2"}, "invalid port"},
		{"host=/nonexistent-dir password='hunter2", nil, "unterminated quoted string"},
		{"postgres://app@/x?host=/nonexistent-dir&password=first1&password=hunter2&port=abc", []string{"first1"}, "invalid port"},
		{"postgres://app:hun/ter2@/x?host=/nonexistent-dir", []string{"hun/ter2", "ter2"}, "invalid port"},
	} {
		_, err := Open(ctx, tc.conn)
		if err == nil {
			t.Errorf("Open(%q) succeeded", tc.conn)
			continue
		}
		var pe *pgconn.ParseConfigError
		for _, secret := range append(tc.secrets, "hunter2") {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Open(%q): the error shows %q: %v", tc.conn, secret, err)
			}
			if errors.As(err, &pe) && strings.Contains(pe.ConnString, secret) {
				t.Errorf("Open(%q): the parse error keeps %q in %q", tc.conn, secret, pe.ConnString)
			}
		}
		if !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Open(%q) = %v; want it to say %q", tc.conn, err, tc.says)
		}
	}
}

// Open refuses the engines that speak PostgreSQL's protocol without the
// semantics storh needs, by their version(), before it creates anything.
func TestSupported(t *testing.T) {
	for _, tc := range []struct {
		version string
		refused bool
	}{
		{"PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit", false},
		{"PostgreSQL 17.2 on aarch64-unknown-linux-gnu, compiled by gcc (GCC) 14.2.1, 64-bit", false},
		{"CockroachDB CCL v25.2.1 (x86_64-pc-linux-gnu, built 2025/06/10 18:25:21, go1.23.7 X:nocoverageredesign)", true},
		{"PostgreSQL 15.2-YB-2025.1.0.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 17.0.6, 64-bit", true},
		{"PostgreSQL 11.2-YB-2.20.1.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 15.0.7, 64-bit", true},
	} {
		err := supported(tc.version)
		if refused := err != nil; refused != tc.refused {
			t.Errorf("supported(%q) = %v, want refused %v", tc.version, err, tc.refused)
		}
		if err != nil && !errors.Is(err, errs.ErrUnsupported) {
			t.Errorf("supported(%q) = %v, want an error wrapping ErrUnsupported", tc.version, err)
		}
	}
}
