package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// Each URL is a database of its own on a server that keeps fsync on and
// listens on its socket only.
func TestURL(t *testing.T) {
	ctx := context.Background()
	connect := func(url string) *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatalf("connect %s: %v", url, err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	a, b := connect(pgtest.URL(t)), connect(pgtest.URL(t))
	if _, err := a.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("a table created in one test database is visible in another")
	}
	for setting, want := range map[string]string{"fsync": "on", "synchronous_commit": "on", "listen_addresses": ""} {
		var got string
		if err := a.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
}

// A standby shows the primary's writes once it has replayed them, not
// while its replay is paused; a standby of the test's own can be
// promoted and then takes writes.
func TestStandby(t *testing.T) {
	if !testkit.Long() {
		t.Skip("the harness's own test: the storh package's failover and standby tests use it in every run; this one runs in the long run (STORH_LONG=1)")
	}
	ctx := context.Background()
	connect := func(url string) *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatalf("connect %s: %v", url, err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	count := func(c *pgx.Conn) int {
		t.Helper()
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	p := pgtest.Standby(t)
	primary, standby := connect(p.Primary), connect(p.Standby)
	if _, err := primary.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	p.CatchUp(t)
	if n := count(standby); n != 1 {
		t.Fatalf("the standby shows %d rows after CatchUp, want 1", n)
	}
	var recovering bool
	if err := standby.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil || !recovering {
		t.Fatalf("pg_is_in_recovery() on the standby: %v, %v", recovering, err)
	}

	p.PauseReplay(t)
	if _, err := primary.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if n := count(standby); n != 1 {
		t.Errorf("the standby shows %d rows with replay paused, want 1", n)
	}
	p.ResumeReplay(t)
	p.CatchUp(t)
	if n := count(standby); n != 2 {
		t.Errorf("the standby shows %d rows after replay resumed, want 2", n)
	}

	own := pgtest.NewStandby(t)
	if _, err := connect(own.Primary).Exec(ctx, "CREATE TABLE u (x int)"); err != nil {
		t.Fatal(err)
	}
	own.CatchUp(t)
	own.Promote(t)
	if _, err := connect(own.Standby).Exec(ctx, "INSERT INTO u VALUES (1)"); err != nil {
		t.Errorf("the promoted standby refuses a write: %v", err)
	}
}
