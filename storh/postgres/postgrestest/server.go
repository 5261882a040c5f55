// Package postgrestest starts private PostgreSQL servers for tests and
// benchmarks of programs that keep a storh store on PostgreSQL: a real
// server per test binary (or per test), from the distribution's binaries,
// listening on a Unix socket in a temporary directory of its own and on no
// TCP port, with fsync on and trusted local connections.
//
//	srv, err := postgrestest.Start("myapp-", "")
//	if err != nil { ... }            // errors.Is(err, postgrestest.ErrUnavailable): skip
//	defer srv.Stop()
//	db, err := storh.Open(srv.URL("postgres"))
//
// The binaries are Debian's (package postgresql: /usr/lib/postgresql/<version>/bin,
// the highest version wins), run as the postgres system user: the calling
// process must run as root (the binaries then run through runuser) or as
// postgres. Each server has a watchdog process: if the caller dies
// without Stop (a test timeout, a signal), the watchdog stops the server
// and removes its directory.
//
// Start is the usual way. New, InitDB, Configure and Launch are its steps,
// for a server made another way: a standby copies its data directory from
// a primary with pg_basebackup (Run) instead of InitDB.
package postgrestest

import (
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
	"syscall"
)

// ErrUnavailable is returned by Available, New and Start when no server
// can run on this machine: no binaries, or a user that cannot run them.
// Tests usually skip then.
var ErrUnavailable = errors.New("postgrestest: no PostgreSQL server can run here")

// Server is one private PostgreSQL server and its directory: the socket,
// the data directory and the log.
type Server struct {
	bin     string // directory of initdb, pg_ctl and the other binaries
	dir     string
	data    string
	logFile string
	asUser  *user.User // the postgres user the binaries run as; nil when this process is it
	watch   *exec.Cmd
	watchW  *os.File // closing it, or exiting, tells watch to clean up
}

// Available returns nil if a server can run here, else an error wrapping
// ErrUnavailable that says why (and what to install).
func Available() error {
	_, _, err := locate()
	return err
}

// locate finds the binaries and the user to run them as.
func locate() (bin string, pg *user.User, err error) {
	unavailable := func(why string) (string, *user.User, error) {
		return "", nil, fmt.Errorf("%w: %s", ErrUnavailable, why)
	}
	if bin = findBin(); bin == "" {
		return unavailable("no initdb and pg_ctl under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
	}
	u, err := user.Current()
	switch {
	case err != nil:
		return unavailable(fmt.Sprintf("cannot tell the current user: %v", err))
	case u.Username == "postgres":
		return bin, nil, nil
	case u.Uid != "0":
		return unavailable(fmt.Sprintf("running as %s: the server runs as the postgres user, so run as root or postgres", u.Username))
	}
	if pg, err = user.Lookup("postgres"); err != nil {
		return unavailable(fmt.Sprintf("no postgres system user: %v", err))
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		return unavailable("runuser not found (package util-linux)")
	}
	return bin, pg, nil
}

// findBin returns the bin directory of the highest PostgreSQL version
// installed, or "".
func findBin() string {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	var dir string
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
	return dir
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

// Start makes a server, initializes its data directory, appends settings
// (postgresql.conf lines) to the defaults below, and starts it. On
// failure nothing is left behind, and the error holds the end of the
// server's log. The defaults: fsync, synchronous_commit and
// full_page_writes on, 200 connections, warnings and worse logged.
func Start(prefix, settings string) (*Server, error) {
	s, err := New(prefix)
	if err != nil {
		return nil, err
	}
	err = s.InitDB()
	if err == nil {
		err = s.Configure(`
fsync = on
synchronous_commit = on
full_page_writes = on
max_connections = 200
log_min_messages = warning
` + settings)
	}
	if err == nil {
		err = s.Launch()
	}
	if err != nil {
		err = fmt.Errorf("postgrestest: starting PostgreSQL from %s: %w%s", s.bin, err, s.LogTail())
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// New makes a server's temporary directory (its name starts with prefix),
// gives it to the postgres user and starts the watchdog. Nothing runs yet,
// and the data directory is not made: InitDB makes it, or a base backup
// into DataDir. Stop removes it all.
func New(prefix string) (*Server, error) {
	bin, pg, err := locate()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, fmt.Errorf("postgrestest: %w", err)
	}
	s := &Server{bin: bin, dir: dir, data: filepath.Join(dir, "data"), logFile: filepath.Join(dir, "log"), asUser: pg}
	if pg != nil {
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgrestest: %w", err)
		}
	}
	// The watchdog starts before anything is put in the directory.
	if err := s.startWatchdog(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("postgrestest: watchdog: %w", err)
	}
	return s, nil
}

// InitDB makes the data directory: trusted local connections (replication
// too), role postgres, UTF-8 in the C locale. --no-sync only spares
// initdb's own final fsync of the template files; the server runs with
// fsync as configured.
func (s *Server) InitDB() error {
	return s.Run("initdb", "-D", s.data, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync")
}

// Configure appends settings to the server's postgresql.conf, after the
// lines every server here has: its own socket directory, no TCP port.
// Later lines win, so they also override what a base backup copied. A
// running server reads them on pg_reload_conf() or a restart.
func (s *Server) Configure(settings string) error {
	conf := fmt.Sprintf(`
# postgrestest: a private server
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

// Launch starts the configured server and waits until it takes
// connections (a minute at most).
func (s *Server) Launch() error {
	return s.Run("pg_ctl", "start", "-w", "-t", "60", "-D", s.data, "-l", s.logFile,
		"-o", "-c listen_addresses='' -k '"+strings.ReplaceAll(s.dir, "'", `'\''`)+"'")
}

// Run runs one of the server's binaries (initdb, pg_ctl, pg_basebackup,
// …) as the postgres user, in the server's directory, and returns its
// output in the error if it fails.
func (s *Server) Run(name string, args ...string) error {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.asUser != nil {
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

func (s *Server) startWatchdog() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	stop := `"$1/pg_ctl" stop -D "$2" -m immediate -s >/dev/null 2>&1`
	if s.asUser != nil {
		stop = `runuser -u postgres -- ` + stop
	}
	script := `read -r _; if [ -f "$2/postmaster.pid" ]; then ` + stop + `; fi; rm -rf "$3"`
	cmd := exec.Command("sh", "-c", script, "postgrestest-watchdog", s.bin, s.data, s.dir)
	cmd.Stdin = r
	// Its own process group: a Ctrl-C to the caller's group must not kill
	// it before it cleans up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	s.watch, s.watchW = cmd, w
	return nil
}

// Kill sends SIGKILL to the server's postmaster, as a crash of its machine
// would: no shutdown, no answer to the commits in flight. Its backends
// notice and exit on their own; nothing restarts it. Stop then only
// removes the directory.
func (s *Server) Kill() error {
	pidFile := filepath.Join(s.data, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return fmt.Errorf("%s: %w", pidFile, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("postmaster %d: %w", pid, err)
	}
	return os.Remove(pidFile)
}

// Stop stops the server and removes its directory; a stopped server stays
// stopped (Stop again does nothing more). The shutdown is immediate, not
// fast: a fast one writes a shutdown checkpoint, fsyncing every database,
// for files about to be removed.
func (s *Server) Stop() error {
	var errs []error
	if _, err := os.Stat(filepath.Join(s.data, "postmaster.pid")); err == nil {
		if err := s.Run("pg_ctl", "stop", "-w", "-D", s.data, "-m", "immediate"); err != nil {
			errs = append(errs, err)
		}
	}
	if s.watchW != nil {
		s.watchW.Close()
		// The server is down, so the watchdog only removes what is left;
		// wait for it rather than leave it behind.
		_ = s.watch.Wait()
		s.watchW = nil
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// URL is a connection URL to database db on the server's socket, as
// user postgres.
func (s *Server) URL(db string) string {
	return "postgres://postgres@/" + db + "?host=" + url.QueryEscape(s.dir) + "&sslmode=disable"
}

// Dir is the server's directory, which holds its socket: the host of a
// connection to it.
func (s *Server) Dir() string { return s.dir }

// DataDir is the server's data directory.
func (s *Server) DataDir() string { return s.data }

// BinDir is the directory of the server's binaries.
func (s *Server) BinDir() string { return s.bin }

// User is the postgres system user the server's binaries run as (through
// runuser), or nil when this process is that user: what a caller that
// runs more of PostgreSQL's tools gives its files to.
func (s *Server) User() *user.User { return s.asUser }

// LogFile is the server's log.
func (s *Server) LogFile() string { return s.logFile }

// LogTail returns the last 4 KiB of the server's log, introduced by a
// newline and the log's path, for failure messages; "" if it is empty.
func (s *Server) LogTail() string { return LogTail(s.logFile) }

// LogTail returns the last 4 KiB of the log file at path as Server's
// method does, for the logs of tools that run beside a server.
func LogTail(path string) string {
	f, err := os.Open(path)
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
	return "\nserver log (" + path + "), last lines:\n" + strings.TrimRight(string(b), "\n")
}
