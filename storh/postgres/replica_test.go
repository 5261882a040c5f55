package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/kv"
)

// A read-only open finds the store and changes nothing: without one it
// fails with ErrNotFound naming what is missing, and creates no table;
// with one it reads, refuses writable transactions, and its connections
// refuse every write.
func TestReadOnlyStore(t *testing.T) {
	url := pgtest.URL(t)
	if _, err := Open(ctx, url+"&search_path=nowhere", WithReadOnly()); !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), `"nowhere"`) {
		t.Errorf("read-only Open of a search_path naming no schema: %v, want ErrNotFound naming it", err)
	}
	other := url + "&search_path=other"
	setup := openURL(t, url)
	if _, err := setup.pool.Exec(ctx, "CREATE SCHEMA other"); err != nil {
		t.Fatal(err)
	}
	tables := func() int {
		t.Helper()
		var n int
		if err := setup.pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'other'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := Open(ctx, other, WithReadOnly()); !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "storh_buckets") {
		t.Errorf("read-only Open of an empty schema: %v, want ErrNotFound naming storh_buckets", err)
	}
	if n := tables(); n != 0 {
		t.Fatalf("a read-only Open made %d tables", n)
	}

	fill(t, openURL(t, other), "b", 3)
	s, err := Open(ctx, other, WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r := begin(t, s, false)
	if v := r.Bucket([]byte("b")).Get(key(2)); string(v) != "v2" {
		t.Errorf("Get = %q, %v", v, r.Err())
	}
	r.Rollback()
	if _, err := s.Begin(true); !errors.Is(err, kv.ErrTxNotWritable) {
		t.Errorf("writable Begin on a read-only store: %v, want kv.ErrTxNotWritable", err)
	}
	var pe *pgconn.PgError
	if _, err := s.pool.Exec(ctx, "CREATE TABLE other.made (x int)"); !errors.As(err, &pe) || pe.Code != "25006" {
		t.Errorf("a write on a read-only store's connection: %v, want read_only_sql_transaction", err)
	}
	if s.Replaying() {
		t.Error("a read-only store on a primary says it reads a standby")
	}

	// Position grows with the primary's commits, which it reads as a
	// standby's replay would.
	before, err := s.Position()
	if err != nil {
		t.Fatal(err)
	}
	fill(t, openURL(t, other), "c", 1)
	if after, err := s.Position(); err != nil || after <= before {
		t.Errorf("Position after a commit = %d, %v; before it %d", after, err, before)
	}

	// A store made before the registry had generations: a read-only
	// open cannot add the column.
	if _, err := setup.pool.Exec(ctx, "ALTER TABLE other.storh_buckets DROP COLUMN gen"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, other, WithReadOnly()); !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "gen column") {
		t.Errorf("read-only Open of a registry without generations: %v, want ErrNotFound naming the column", err)
	}
}

func TestParseLSN(t *testing.T) {
	for _, tc := range []struct {
		text string
		want uint64
		ok   bool
	}{
		{"0/0", 0, true},
		{"0/3016300", 0x3016300, true},
		{"16/B374D848", 0x16_B374D848, true},
		{"FFFFFFFF/FFFFFFFF", 1<<64 - 1, true},
		{"", 0, false},
		{"3016300", 0, false},
		{"1/2/3", 0, false},
		{"100000000/0", 0, false},
		{"x/1", 0, false},
	} {
		got, err := parseLSN(tc.text)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseLSN(%q) = %#x, %v; want %#x, ok %v", tc.text, got, err, tc.want, tc.ok)
		}
	}
}
