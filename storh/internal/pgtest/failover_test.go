package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// A Failover's standby is synchronous, and its URL reaches the primary,
// then, once the primary is killed and the standby promoted, the standby,
// which holds every commit the primary acknowledged.
func TestFailover(t *testing.T) {
	if !testkit.Long() {
		t.Skip("the harness's own test: the storh package's failover and standby tests use it in every run; this one runs in the long run (STORH_LONG=1)")
	}
	ctx := context.Background()
	start := time.Now()
	f := pgtest.NewFailover(t)
	t.Logf("primary and standby up in %v", time.Since(start).Round(time.Millisecond))
	conn, err := pgx.Connect(ctx, f.URL)
	if err != nil {
		t.Fatal(err)
	}
	var sync string
	if err := conn.QueryRow(ctx, "SELECT current_setting('synchronous_standby_names')").Scan(&sync); err != nil || sync != "*" {
		t.Fatalf("synchronous_standby_names on the URL's server: %q, %v", sync, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t SELECT generate_series(1, 100)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	f.KillPrimary(t)
	f.Promote(t)
	conn, err = pgx.Connect(ctx, f.URL)
	if err != nil {
		t.Fatalf("connecting through the URL after the failover: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "INSERT INTO t VALUES (101) RETURNING (SELECT count(*) FROM t)").Scan(&n); err != nil || n != 100 {
		t.Fatalf("the promoted standby holds %d rows before the insert (%v), want 100", n, err)
	}
	t.Logf("failover done in %v", time.Since(start).Round(time.Millisecond))
}
