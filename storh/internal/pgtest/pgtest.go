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
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	// runAs is the postgres system user the servers run as when this
	// process is root, nil when it is that user.
	runAs *user.User
)

type server struct {
	bin     string // directory of initdb, pg_ctl
	dir     string // temporary directory: the socket, data/, log
	data    string
	logFile string
	asUser  bool // run the binaries through runuser -u postgres
	watch   *exec.Cmd
	watchW  *os.File // closing it (or exiting) tells watch to clean up

	dbs        chan newDB // from makeDBs
	stopMaking context.CancelFunc
	made       chan struct{} // closed when makeDBs returns
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
		t.Fatalf("pgtest: %v%s", db.err, srv.logTail())
	}
	return srv.url(db.name)
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
			shared.url = srv.url(db.name)
			shared.conn, shared.err = pgx.Connect(context.Background(), shared.url)
		}
	})
	if shared.err != nil {
		t.Fatalf("pgtest: %v%s", shared.err, srv.logTail())
	}
	name := fmt.Sprintf("s_%d", schemaSeq.Add(1))
	shared.mu.Lock()
	_, err := shared.conn.Exec(context.Background(), "CREATE SCHEMA "+name)
	shared.mu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: create schema %s: %v%s", name, err, srv.logTail())
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
	conn, err := pgx.Connect(ctx, s.url("postgres"))
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

func (s *server) url(db string) string {
	return "postgres://postgres@/" + db + "?host=" + url.QueryEscape(s.dir) + "&sslmode=disable"
}

// start finds the binaries and starts the server; it sets unusable,
// startErr or srv.
func start() {
	bin, why := findBin()
	if why != "" {
		unusable = why
		return
	}
	s := &server{bin: bin}
	var pgUser *user.User
	switch u, err := user.Current(); {
	case err != nil:
		unusable = fmt.Sprintf("cannot tell the current user: %v", err)
		return
	case u.Uid == "0":
		pg, err := user.Lookup("postgres")
		if err != nil {
			unusable = fmt.Sprintf("no postgres system user: %v", err)
			return
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			unusable = "runuser not found (package util-linux)"
			return
		}
		pgUser, s.asUser = pg, true
	case u.Username != "postgres":
		unusable = fmt.Sprintf("running as %s, not root or postgres", u.Username)
		return
	}
	if err := s.makeDir(); err != nil {
		startErr = fmt.Errorf("pgtest: %w", err)
		return
	}
	runAs = pgUser
	if err := s.start(pgUser); err != nil {
		startErr = fmt.Errorf("pgtest: starting PostgreSQL from %s: %w%s", bin, err, s.logTail())
		s.stop()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.dbs, s.stopMaking, s.made = make(chan newDB, 1), cancel, make(chan struct{})
	go s.makeDBs(ctx)
	srv = s
}

// findBin returns the bin directory of the highest PostgreSQL version
// installed, or why there is none.
func findBin() (dir, why string) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	var best []int
	for _, initdb := range found {
		d := filepath.Dir(initdb)
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err != nil {
			continue
		}
		v := version(filepath.Base(filepath.Dir(d)))
		if dir == "" || slices.Compare(v, best) > 0 {
			dir, best = d, v
		}
	}
	if dir == "" {
		return "", "no initdb and pg_ctl under /usr/lib/postgresql/*/bin"
	}
	return dir, ""
}

// version parses "15" or "9.6" for comparison; what does not parse is
// lowest.
func version(s string) []int {
	var v []int
	for _, part := range strings.Split(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil
		}
		v = append(v, n)
	}
	return v
}

// makeDir makes the server's temporary directory, which holds its
// socket, its data directory and its log. Not t.TempDir: the server
// outlives the test that started it.
func (s *server) makeDir() error {
	dir, err := os.MkdirTemp("", "storh-pg-")
	if err != nil {
		return err
	}
	s.dir, s.data, s.logFile = dir, filepath.Join(dir, "data"), filepath.Join(dir, "log")
	return nil
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

// initdb makes s's data directory: trusted local connections, role
// postgres, UTF-8 in the C locale. --no-sync only spares initdb's own
// final fsync of the template files; the server itself runs with fsync
// on.
func (s *server) initdb() error {
	return s.run("initdb", "-D", s.data, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync")
}

func (s *server) start(pg *user.User) error {
	if err := s.prepare(pg); err != nil {
		return err
	}
	if err := s.initdb(); err != nil {
		return err
	}
	if err := s.configure(`
fsync = on
synchronous_commit = on
full_page_writes = on
shared_buffers = 32MB
max_connections = 200
log_min_messages = warning
`); err != nil {
		return err
	}
	return s.launch()
}

// prepare gives the server's directory to the postgres user and starts
// the watchdog, before anything is put in it.
func (s *server) prepare(pg *user.User) error {
	if pg != nil {
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
	}
	// A watchdog, started before the server: when this process exits
	// without Run's cleanup (a test timeout's panic, a signal), the pipe
	// closes and the watchdog stops the server and removes the directory.
	if err := s.startWatchdog(); err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	return nil
}

// configure appends settings to the server's postgresql.conf, after the
// ones every test server has: its own socket directory and no TCP port.
// Later lines win, so they also override what a base backup copied.
func (s *server) configure(settings string) error {
	conf := fmt.Sprintf(`
# pgtest: a private server for one test binary.
listen_addresses = ''
unix_socket_directories = '%s'
`, strings.ReplaceAll(s.dir, "'", "''")) + settings
	f, err := os.OpenFile(filepath.Join(s.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// launch starts the configured server and waits until it takes
// connections.
func (s *server) launch() error {
	return s.run("pg_ctl", "start", "-w", "-t", "60", "-D", s.data, "-l", s.logFile,
		"-o", "-c listen_addresses='' -k '"+strings.ReplaceAll(s.dir, "'", `'\''`)+"'")
}

// run runs one of the server's binaries as the postgres user.
func (s *server) run(name string, args ...string) error {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.asUser {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir // the postgres user may not be able to read the caller's directory
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (s *server) startWatchdog() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	stop := `"$1/pg_ctl" stop -D "$2" -m immediate -s >/dev/null 2>&1`
	if s.asUser {
		stop = `runuser -u postgres -- ` + stop
	}
	script := `read -r _; if [ -f "$2/postmaster.pid" ]; then ` + stop + `; fi; rm -rf "$3"`
	cmd := exec.Command("sh", "-c", script, "pgtest-watchdog", s.bin, s.data, s.dir)
	cmd.Stdin = r
	// Its own process group: a Ctrl-C to the test's group must not kill
	// it before it cleans up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	s.watch, s.watchW = cmd, w
	return nil
}

// stop stops the server and removes its directory. The shutdown is
// immediate, not fast: a fast one writes a shutdown checkpoint, fsyncing
// every database the tests created (tens of seconds on a busy machine),
// for files about to be removed.
func (s *server) stop() error {
	var errs []error
	if s.stopMaking != nil {
		s.stopMaking()
		<-s.made
	}
	if _, err := os.Stat(filepath.Join(s.data, "postmaster.pid")); err == nil {
		if err := s.run("pg_ctl", "stop", "-w", "-D", s.data, "-m", "immediate"); err != nil {
			errs = append(errs, err)
		}
	}
	if s.watchW != nil {
		s.watchW.Close()
		// The server is down, so the watchdog only removes what is left;
		// wait for it rather than leave it behind.
		_ = s.watch.Wait()
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// logTail returns the end of the server log, for failure messages.
func (s *server) logTail() string {
	f, err := os.Open(s.logFile)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 4 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(fi.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	if len(b) == 0 {
		return ""
	}
	return "\nserver log (" + s.logFile + "), last lines:\n" + strings.TrimRight(string(b), "\n")
}
