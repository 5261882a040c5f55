package main

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

// pgServer is the private PostgreSQL a pgscale run starts when it is given
// no --url: Debian's binaries run as the postgres system user, a cluster in
// a temporary directory, listening on a Unix socket there only, fsync on.
//
// It repeats what storh/internal/pgtest does for storh's own tests: that
// package is internal to storh/, so this module cannot import it, and
// pgscale must not change storh/ to share it. The one addition is the log
// line prefix, which puts each error's SQLSTATE in the log so that a run
// can count the transactions the server failed (see serverErrors).
type pgServer struct {
	bin     string // directory of initdb and pg_ctl
	dir     string // the socket, data/ and the log
	data    string
	logFile string
	asUser  bool // run the binaries through runuser -u postgres
	watch   *exec.Cmd
	watchW  *os.File // closing it, or exiting, tells watch to clean up
}

// errNoServer says why this machine cannot run a private server; a run
// then needs --url.
var errNoServer = errors.New("cannot start a private PostgreSQL")

// serverUnusable returns why a private server cannot run here ("" when it
// can), and the bin directory and the postgres user to run it as.
func serverUnusable() (bin string, pg *user.User, why string) {
	bin = findPGBin()
	if bin == "" {
		return "", nil, "no initdb and pg_ctl under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
	}
	u, err := user.Current()
	switch {
	case err != nil:
		return "", nil, fmt.Sprintf("cannot tell the current user: %v", err)
	case u.Username == "postgres":
		return bin, nil, ""
	case u.Uid != "0":
		return "", nil, fmt.Sprintf("running as %s: the server must run as the postgres user, so run as root or postgres", u.Username)
	}
	if pg, err = user.Lookup("postgres"); err != nil {
		return "", nil, fmt.Sprintf("no postgres system user: %v", err)
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		return "", nil, "runuser not found (package util-linux)"
	}
	return bin, pg, ""
}

// findPGBin returns the bin directory of the highest PostgreSQL version
// installed, or "".
func findPGBin() string {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	var dir string
	var best []int
	for _, initdb := range found {
		d := filepath.Dir(initdb)
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err != nil {
			continue
		}
		v := pgVersion(filepath.Base(filepath.Dir(d)))
		if dir == "" || slices.Compare(v, best) > 0 {
			dir, best = d, v
		}
	}
	return dir
}

// pgVersion parses "15" or "9.6" for comparison; what does not parse is
// lowest.
func pgVersion(s string) []int {
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

// startServer initialises and starts a private server.
func startServer() (*pgServer, error) {
	bin, pg, why := serverUnusable()
	if why != "" {
		return nil, fmt.Errorf("%w: %s; give a server with --url", errNoServer, why)
	}
	dir, err := os.MkdirTemp("", "pgscale-")
	if err != nil {
		return nil, err
	}
	s := &pgServer{bin: bin, dir: dir, data: filepath.Join(dir, "data"), logFile: filepath.Join(dir, "log"), asUser: pg != nil}
	if err := s.start(pg); err != nil {
		err = fmt.Errorf("starting PostgreSQL from %s: %w%s", bin, err, s.logTail())
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

func (s *pgServer) start(pg *user.User) error {
	if pg != nil {
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
	}
	// The watchdog starts first: if this process dies without stopping the
	// server (a signal, a crash), its pipe closes and the watchdog stops
	// the server and removes the directory.
	if err := s.startWatchdog(); err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	// --no-sync only spares initdb's own final fsync of the template files;
	// the server runs with fsync on.
	if err := s.run("initdb", "-D", s.data, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync"); err != nil {
		return err
	}
	// The server's defaults otherwise (shared_buffers, WAL settings), as a
	// local installation has them: the numbers are for a stock server.
	conf := fmt.Sprintf(`
# pgscale: a private server for one benchmark run.
listen_addresses = ''
unix_socket_directories = '%s'
fsync = on
synchronous_commit = on
full_page_writes = on
max_connections = 200
log_min_messages = warning
log_line_prefix = '%s'
`, strings.ReplaceAll(s.dir, "'", "''"), logPrefix)
	f, err := os.OpenFile(filepath.Join(s.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return s.run("pg_ctl", "start", "-w", "-t", "60", "-D", s.data, "-l", s.logFile)
}

// logPrefix starts every server log line with the SQLSTATE of its message
// in brackets ("[40P01] ERROR:  deadlock detected").
const logPrefix = "[%e] "

// url is a connection URL to database db on the server's socket.
func (s *pgServer) url(db string) string {
	return "postgres://postgres@/" + db + "?host=" + url.QueryEscape(s.dir) + "&sslmode=disable"
}

// run runs one of the server's binaries as the postgres user.
func (s *pgServer) run(name string, args ...string) error {
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

func (s *pgServer) startWatchdog() error {
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
	cmd := exec.Command("sh", "-c", script, "pgscale-watchdog", s.bin, s.data, s.dir)
	cmd.Stdin = r
	// A process group of its own: a Ctrl-C to the run's group must not
	// kill it before it has cleaned up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	s.watch, s.watchW = cmd, w
	return nil
}

// stop stops the server at once (a checkpoint of files about to be removed
// would only cost time) and removes its directory.
func (s *pgServer) stop() error {
	var errs []error
	if _, err := os.Stat(filepath.Join(s.data, "postmaster.pid")); err == nil {
		if err := s.run("pg_ctl", "stop", "-w", "-D", s.data, "-m", "immediate"); err != nil {
			errs = append(errs, err)
		}
	}
	if s.watchW != nil {
		s.watchW.Close()
		_ = s.watch.Wait()
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// logSize is the server log's current length: where the next cell's lines
// start.
func (s *pgServer) logSize() (int64, error) {
	fi, err := os.Stat(s.logFile)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// logSince returns the server log from offset on.
func (s *pgServer) logSince(offset int64) ([]byte, error) {
	f, err := os.Open(s.logFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// logTail returns the end of the server log, for failure messages.
func (s *pgServer) logTail() string {
	size, err := s.logSize()
	if err != nil {
		return ""
	}
	b, err := s.logSince(max(0, size-4<<10))
	if err != nil || len(b) == 0 {
		return ""
	}
	return "\nserver log (" + s.logFile + "), last lines:\n" + strings.TrimRight(string(b), "\n")
}
