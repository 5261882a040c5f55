// Package pgtest gives tests a real PostgreSQL: a private server, started
// once per test binary from the distribution's binaries, with an empty
// database of its own for every caller.
//
// A package whose tests call URL must run them through Run from TestMain,
// which stops the server and removes its files when the tests are done:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
//
// The server is Debian's (package postgresql: binaries under
// /usr/lib/postgresql/<version>/bin, the highest version wins), run as the
// postgres system user, so the tests must run as root or as postgres. It
// listens on a Unix socket in its own temporary directory only (no TCP
// port), keeps fsync on (durability is part of what the tests check) and
// trusts local connections. Where that is not possible the tests skip with
// a note, unless STORH_REQUIRE_POSTGRES=1 (as in CI), which makes them fail
// instead. A server that cannot start always fails the tests, with the tail
// of its log.
//
// Standby gives a primary and a hot standby that streams its WAL, for tests
// of reads from a standby (see Pair).
//
// NewProxy puts a proxy in front of the server that loses a connection
// where a test says (around a COMMIT), for tests of lost connections.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/storhdb/storh-go/storh/postgres/postgrestest"
)

// RequireEnv names the environment variable that turns a skip into a
// failure: CI sets it to 1 so that the PostgreSQL tests cannot silently
// not run.
const RequireEnv = "STORH_REQUIRE_POSTGRES"

const skipHint = "PostgreSQL tests skipped: install Debian's postgresql package (apt-get install postgresql) and run as root; CI sets " + RequireEnv + "=1"

var (
	running atomic.Bool // Run is in effect
	once    sync.Once
	srv     *server
	// unusable says why there is no server to start (no binaries, no
	// privileges): a skip, or a failure under RequireEnv.
	unusable string
	// startErr is a server that should have started and did not: always
	// a failure.
	startErr error
	dbSeq    atomic.Int64
)

// server is a private server of the tests, with, for URL's, the databases
// it makes ahead of the tests that ask for them.
type server struct {
	*postgrestest.Server

	dbs        chan newDB // from makeDBs
	stopMaking context.CancelFunc
	made       chan struct{} // closed when makeDBs returns
}

// newServer makes a server's directory and watchdog (see
// postgrestest.New); nothing runs yet.
func newServer() (*server, error) {
	ps, err := postgrestest.New("storh-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	return &server{Server: ps}, nil
}

// Run runs the tests, then stops the server if one was started and
// removes its directory. It returns m.Run's exit code, for os.Exit.
func Run(m *testing.M) int {
	running.Store(true)
	code := m.Run()
	running.Store(false)
	if srv != nil {
		if err := errors.Join(extraServers.stop(), srv.stop()); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// URL returns a connection URL to a new, empty database on the shared
// test server, starting the server on first use. It skips the test when
// there is no PostgreSQL to run (fails instead under
// STORH_REQUIRE_POSTGRES=1) and fails it when the server will not start.
func URL(t testing.TB) string {
	t.Helper()
	Require(t)
	db := <-srv.dbs
	if db.err != nil {
		t.Fatalf("pgtest: %v%s", db.err, srv.LogTail())
	}
	return srv.URL(db.name)
}

// Require starts the server if needed and skips or fails t as URL would,
// without creating a database: a test with many subtests that each call
// URL calls it first, to skip once rather than in every subtest.
func Require(t testing.TB) {
	t.Helper()
	if !running.Load() {
		t.Fatal("pgtest.URL: the package's TestMain must run the tests through pgtest.Run")
	}
	once.Do(start)
	switch {
	case unusable != "" && os.Getenv(RequireEnv) == "1":
		t.Fatalf("PostgreSQL tests required (%s=1) but cannot run: %s", RequireEnv, unusable)
	case unusable != "":
		t.Skipf("%s (here: %s)", skipHint, unusable)
	case startErr != nil:
		t.Fatal(startErr)
	}
}

// SchemaURL returns a connection URL whose search_path is a new, empty
// schema of one database shared by the whole test binary: much cheaper
// than URL's database of its own (a schema is a catalog row, a database a
// copy of a template), for suites that open a store in every test. Stores
// in different schemas never see each other's tables.
func SchemaURL(t testing.TB) string {
	t.Helper()
	Require(t)
	shared.once.Do(func() {
		db := <-srv.dbs
		if shared.err = db.err; shared.err == nil {
			shared.url = srv.URL(db.name)
			shared.conn, shared.err = pgx.Connect(context.Background(), shared.url)
		}
	})
	if shared.err != nil {
		t.Fatalf("pgtest: %v%s", shared.err, srv.LogTail())
	}
	name := fmt.Sprintf("s_%d", schemaSeq.Add(1))
	shared.mu.Lock()
	_, err := shared.conn.Exec(context.Background(), "CREATE SCHEMA "+name)
	shared.mu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: create schema %s: %v%s", name, err, srv.LogTail())
	}
	return shared.url + "&search_path=" + name
}

// shared is SchemaURL's database, and the connection that creates its
// schemas (one statement at a time: a pgx.Conn is not for concurrent use).
var shared struct {
	once sync.Once
	url  string
	conn *pgx.Conn
	err  error
	mu   sync.Mutex
}

var schemaSeq atomic.Int64

type newDB struct {
	name string
	err  error
}

// makeDBs creates databases ahead of the tests that will ask for them
// (CREATE DATABASE copies a template, a good part of a second with fsync
// on), one connection for all, until stopped.
func (s *server) makeDBs(ctx context.Context) {
	defer close(s.made)
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		err = fmt.Errorf("connecting to the test server: %w", err)
	} else {
		defer conn.Close(context.Background())
	}
	for {
		db := newDB{err: err}
		if err == nil {
			db.name = fmt.Sprintf("t_%d", dbSeq.Add(1))
			if _, cerr := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db.name}.Sanitize()); cerr != nil {
				db.err = fmt.Errorf("CREATE DATABASE %s: %w", db.name, cerr)
			}
		}
		select {
		case s.dbs <- db:
		case <-ctx.Done():
			return
		}
	}
}

// start starts URL's server; it sets unusable, startErr or srv.
func start() {
	if err := postgrestest.Available(); err != nil {
		unusable = strings.TrimPrefix(err.Error(), postgrestest.ErrUnavailable.Error()+": ")
		return
	}
	ps, err := postgrestest.Start("storh-pg-", "shared_buffers = 32MB\n")
	if err != nil {
		startErr = fmt.Errorf("pgtest: %w", err)
		return
	}
	s := &server{Server: ps}
	ctx, cancel := context.WithCancel(context.Background())
	s.dbs, s.stopMaking, s.made = make(chan newDB, 1), cancel, make(chan struct{})
	go s.makeDBs(ctx)
	srv = s
}

// pollUntil calls check every interval until it reports done or fails,
// or ctx ends (its error).
func pollUntil(ctx context.Context, interval time.Duration, check func() (done bool, err error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if done, err := check(); err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// stop stops making databases, then the server, and removes its
// directory.
func (s *server) stop() error {
	if s.stopMaking != nil {
		s.stopMaking()
		<-s.made
	}
	return s.Stop()
}
