package postgrestest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/postgres/postgrestest"
)

// require skips t when no server can run here, or fails it under
// STORH_REQUIRE_POSTGRES=1 (as in CI).
func require(t *testing.T) {
	t.Helper()
	err := postgrestest.Available()
	if err == nil {
		return
	}
	if !errors.Is(err, postgrestest.ErrUnavailable) {
		t.Fatalf("Available() = %v, which does not wrap ErrUnavailable", err)
	}
	if os.Getenv("STORH_REQUIRE_POSTGRES") == "1" {
		t.Fatal(err)
	}
	t.Skip(err)
}

func query(t *testing.T, url, q string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, q).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Start gives a running server on its own socket, with the settings given
// over the defaults; Stop stops it and removes its directory.
func TestStartAndStop(t *testing.T) {
	require(t)
	s, err := postgrestest.Start("postgrestest-", "work_mem = '7MB'\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := query(t, s.URL("postgres"), "SHOW fsync"); got != "on" {
		t.Errorf("fsync = %s, want on", got)
	}
	if got := query(t, s.URL("postgres"), "SHOW work_mem"); got != "7MB" {
		t.Errorf("work_mem = %s, want the setting given, 7MB", got)
	}
	if got := query(t, s.URL("postgres"), "SHOW listen_addresses"); got != "" {
		t.Errorf("listen_addresses = %q, want none: a Unix socket only", got)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), ".s.PGSQL.5432")); err != nil {
		t.Errorf("no socket in the server's directory: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory is still there after Stop: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}

// A server made step by step takes settings that Configure appends after
// InitDB; Kill stops it without a shutdown, and Stop then removes what is
// left. A failed Launch leaves the server's log for the error.
func TestStepsAndKill(t *testing.T) {
	require(t)
	s, err := postgrestest.New("postgrestest-")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := s.InitDB(); err != nil {
		t.Fatal(err)
	}
	if err := s.Configure("no_such_setting = 1\n"); err != nil {
		t.Fatal(err)
	}
	if err := s.Launch(); err == nil {
		t.Fatal("Launch with a setting the server does not know succeeded")
	}
	if tail := s.LogTail(); !strings.Contains(tail, "no_such_setting") {
		t.Errorf("the log's tail does not name the bad setting:%s", tail)
	}
	// Later lines win, but an unknown name stays unknown: take it out, as
	// a caller fixing its settings would.
	conf := filepath.Join(s.DataDir(), "postgresql.conf")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(strings.ReplaceAll(string(b), "no_such_setting = 1\n", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Launch(); err != nil {
		t.Fatalf("%v%s", err, s.LogTail())
	}
	if got := query(t, s.URL("postgres"), "SELECT 'up'"); got != "up" {
		t.Fatalf("query: %s", got)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if conn, err := pgx.Connect(ctx, s.URL("postgres")); err == nil {
		// Backends may outlive the postmaster for a moment; a new
		// connection must not be served.
		conn.Close(ctx)
		t.Error("a connection to a killed server succeeded")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory is still there after Stop: %v", err)
	}
}

func ExampleStart() {
	srv, err := postgrestest.Start("example-", "")
	if errors.Is(err, postgrestest.ErrUnavailable) {
		fmt.Println("no PostgreSQL here:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()
	// srv.URL("postgres") is what storh.Open takes.
	fmt.Println(strings.HasPrefix(srv.URL("postgres"), "postgres://postgres@/postgres?host="))
}
