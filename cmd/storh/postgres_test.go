package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/postgres/postgrestest"
)

// The tests' PostgreSQL server, started by the first test that asks for a
// schema and stopped by TestMain.
var pg struct {
	once sync.Once
	srv  *postgrestest.Server
	conn *pgx.Conn
	err  error
	seq  atomic.Int64
}

// postgresSchema returns the URL of a new, empty schema on the tests'
// server. Without PostgreSQL the test skips, or fails under
// STORH_REQUIRE_POSTGRES=1 (CI).
func postgresSchema(t *testing.T) string {
	t.Helper()
	if err := postgrestest.Available(); err != nil {
		if os.Getenv("STORH_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("PostgreSQL required (STORH_REQUIRE_POSTGRES=1): %v", err)
		}
		t.Skipf("no PostgreSQL here: %v", err)
	}
	pg.once.Do(func() {
		if pg.srv, pg.err = postgrestest.Start("storh-cli-", ""); pg.err == nil {
			pg.conn, pg.err = pgx.Connect(context.Background(), pg.srv.URL("postgres"))
		}
	})
	if pg.err != nil {
		t.Fatal(pg.err)
	}
	name := fmt.Sprintf("cli_%d", pg.seq.Add(1))
	if _, err := pg.conn.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	return pg.srv.URL("postgres") + "&search_path=" + name
}

func stopPostgres() error {
	if pg.srv == nil {
		return nil
	}
	var err error
	if pg.conn != nil {
		err = pg.conn.Close(context.Background())
	}
	return errors.Join(err, pg.srv.Stop())
}

// What a PostgreSQL store reports differently from a file by design: it
// has no file size, and its indexes are plain keys, never a file's blocks
// (the LAYOUT column, and its JSON).
var pgBackendWords = regexp.MustCompile(`"file_size":[0-9]+|,"layout":"[a-z]+"(,"journaled":[0-9]+)?|(blocks \([0-9]+ journaled\)|keys)\n`)

// TestPostgresSameAsFile runs the commands of TestRemoteSameAsFile on a
// file and on a PostgreSQL schema (--db postgres://…) seeded the same way,
// and wants the same stdout and exit code from every step: the CLI takes
// either store, and every command behaves alike on both.
func TestPostgresSameAsFile(t *testing.T) {
	postgresSchema(t)
	for _, c := range sameAsFileCases() {
		t.Run(c.name, func(t *testing.T) {
			local := t.TempDir() + "/local.db"
			seedRemote(t, local)
			url := postgresSchema(t)
			seedRemote(t, url)
			compareSteps(t, c.steps, []string{"--db", local}, []string{"--db", url}, "postgres", func(s string) string {
				s = strings.NewReplacer(local, "DB", url, "DB", storh.Redact(url), "DB").Replace(s)
				return pgBackendWords.ReplaceAllStringFunc(freeBytes.ReplaceAllString(s, ""), func(m string) string {
					if strings.HasSuffix(m, "\n") {
						return "\n"
					}
					return ""
				})
			})
		})
	}
}

// TestPostgresTailFollow follows a collection on PostgreSQL as records
// arrive from other stores' writes (each put below is a storh put of its
// own, opening and closing its store): -f used to fail at its first poll,
// which reopened the store with a file's lock timeout.
func TestPostgresTailFollow(t *testing.T) {
	url := postgresSchema(t)
	put := func(data string) {
		t.Helper()
		if _, stderr, code := runStorh(context.Background(), "", "--db", url, "-q", "put", "--log", "events", data); code != 0 {
			t.Fatalf("put: %s", stderr)
		}
	}
	put(`{"n":1}`)
	put(`{"n":2}`)
	var stderr bytes.Buffer
	expect, stop := followTail(t, &stderr, "--db", url, "tail", "events", "-f", "-n", "1", "--interval", "2ms")
	expect(`"data":{"n":2}`)
	put(`{"n":3}`)
	expect(`"data":{"n":3}`)
	put(`{"n":4}`)
	expect(`"data":{"n":4}`)
	if code := stop(); code != exitOK {
		t.Errorf("interrupted tail -f exit code %d, want 0; stderr:\n%s", code, stderr.String())
	}
}

// TestPostgresQueueOptions sets a queue's options on PostgreSQL with one
// storh process and reads them, and is ruled by them, in others: they are
// stored with the queue, not with a process.
func TestPostgresQueueOptions(t *testing.T) {
	url := postgresSchema(t)
	storh := func(want int, args ...string) string {
		t.Helper()
		stdout, stderr, code := runStorh(context.Background(), "", append([]string{"--db", url}, args...)...)
		if code != want {
			t.Fatalf("storh %s: exit %d, want %d; stderr:\n%s", strings.Join(args, " "), code, want, stderr)
		}
		return stdout
	}
	id := strings.TrimSpace(storh(0, "queue", "enqueue", "jobs", `{"n":1}`))
	if got := storh(0, "queue", "options", "jobs"); got != "queue \"jobs\": max attempts 5, no backoff\n" {
		t.Fatalf("options before: %q", got)
	}
	storh(0, "queue", "options", "jobs", "--max-attempts", "2", "--backoff", "1h,2h")
	if got := storh(0, "--json", "queue", "options", "jobs"); got != `{"queue":"jobs","max_attempts":2,"backoff_min":"1h0m0s","backoff_max":"2h0m0s","stored":true}`+"\n" {
		t.Fatalf("options after: %q", got)
	}
	storh(0, "queue", "claim", "jobs", "--lease", "1h")
	if got := storh(0, "queue", "fail", "jobs", id); !strings.HasSuffix(got, "is pending after 1 attempt\n") {
		t.Fatalf("fail: %q", got)
	}
	// Backed off for about an hour: nothing to claim.
	storh(exitError, "queue", "claim", "jobs")
	storh(0, "queue", "options", "jobs", "--backoff", "none")
	id2 := strings.TrimSpace(storh(0, "queue", "enqueue", "jobs", `{"n":2}`))
	for i, want := range []string{"is pending after 1 attempt\n", "is dead after 2 attempts\n"} {
		storh(0, "queue", "claim", "jobs", "--lease", "1h")
		if got := storh(0, "queue", "fail", "jobs", id2); !strings.HasSuffix(got, want) {
			t.Fatalf("fail %d: %q; want …%q", i+1, got, want)
		}
	}
}
