package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
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
