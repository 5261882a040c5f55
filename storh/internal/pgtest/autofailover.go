package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/storhdb/storh-go/storh/postgres/postgrestest"
)

// AutoFailover is a pg_auto_failover formation of the test's own: a
// monitor and two Postgres nodes, each run by its pg_autoctl as the
// postgres user. The nodes find each other and the monitor by address and
// port, so they listen on loopback TCP ports (and on Unix sockets in the
// formation's directory). The monitor promotes the secondary when the
// primary stops answering its health checks, within seconds: its checks
// and timeouts are set far shorter than pg_auto_failover's defaults, with
// which a crashed primary's machine took 52 seconds to replace here (see
// autoFailoverSettings).
//
// It needs pg_autoctl and the monitor's extension for the server's
// version (Debian's postgresql-<version>-auto-failover); without them the
// test skips, or fails under STORH_REQUIRE_POSTGRES=1.
type AutoFailover struct {
	// URL is the formation's, as pg_autoctl show uri --formation default
	// gives it (both nodes, target_session_attrs=read-write), for the
	// postgres user, without TLS.
	URL string

	dir     string
	autoctl string
	monitor *autoctlNode
	nodes   []*autoctlNode
	watchW  *os.File // the watchdog's pipe: what to kill if the test binary dies
}

// autoctlNode is one pg_autoctl service and the Postgres it runs.
type autoctlNode struct {
	name, pgdata string
	port         int
	cmd          *exec.Cmd // in a process group of its own, with its postmaster
	exited       chan struct{}
}

// Timeouts of the monitor, in milliseconds, for a formation that fails
// over within seconds. pg_auto_failover's defaults (health checks every
// 5 s, a node unhealthy after 20 s, then 30 s for the old primary to
// demote itself) suit real networks. primary_demote_timeout must stay
// above the time a primary cut off from the monitor and its standby takes
// to demote itself (its keeper's network_partition_timeout, 20 s by
// default) wherever the old primary may still be alive: the tests kill it.
var autoFailoverSettings = map[string]string{
	"pgautofailover.health_check_period":               "1000",
	"pgautofailover.health_check_timeout":              "1000",
	"pgautofailover.health_check_max_retries":          "1",
	"pgautofailover.health_check_retry_delay":          "500",
	"pgautofailover.node_considered_unhealthy_timeout": "2000",
	"pgautofailover.primary_demote_timeout":            "3000",
}

// formationDeadline bounds each wait for the formation: a monitor and two
// nodes reach primary and secondary in about 10 seconds here.
const formationDeadline = 2 * time.Minute

// NewAutoFailover starts a monitor and two nodes, stopped and removed when
// the test ends, and returns once one node is primary and the other its
// secondary. It logs how long each step took.
func NewAutoFailover(t testing.TB) *AutoFailover {
	t.Helper()
	Require(t)
	autoctl, why := findAutoctl()
	switch {
	case why != "" && os.Getenv(RequireEnv) == "1":
		t.Fatalf("pg_auto_failover tests required (%s=1) but cannot run: %s", RequireEnv, why)
	case why != "":
		t.Skipf("pg_auto_failover tests skipped: %s", why)
	}
	dir, err := os.MkdirTemp("", "storh-paf-")
	if err != nil {
		t.Fatal(err)
	}
	a := &AutoFailover{dir: dir, autoctl: autoctl}
	t.Cleanup(func() {
		if err := a.stop(); err != nil {
			t.Errorf("pgtest: stopping the formation: %v", err)
		}
	})
	if err := a.prepare(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	start := time.Now()
	step := func(what string) {
		t.Logf("pg_auto_failover: %s after %v", what, time.Since(start).Round(10*time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), formationDeadline)
	defer cancel()

	// The monitor is made, told to listen on loopback only (pg_autoctl
	// would have it listen everywhere), then run.
	a.monitor = &autoctlNode{name: "monitor", pgdata: filepath.Join(dir, "monitor"), port: ports[0]}
	if err := a.run(ctx, "create", "monitor", "--pgdata", a.monitor.pgdata, "--pgport", strconv.Itoa(a.monitor.port),
		"--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := a.run(ctx, "config", "set", "--pgdata", a.monitor.pgdata, "postgresql.listen_addresses", "127.0.0.1"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := a.serve(a.monitor, "run", "--pgdata", a.monitor.pgdata); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := a.await(ctx, "the monitor", "SELECT count(*) = 1 FROM pg_extension WHERE extname = 'pgautofailover'"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	for name, value := range autoFailoverSettings {
		if err := a.monitorExec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = %s", name, value)); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	if err := a.monitorExec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	step("the monitor runs")

	monitorURL := fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", a.monitor.port)
	for i := range 2 {
		n := &autoctlNode{name: fmt.Sprintf("node_%d", i+1), pgdata: filepath.Join(dir, fmt.Sprintf("node%d", i+1)), port: ports[i+1]}
		a.nodes = append(a.nodes, n)
		if err := a.serve(n, "create", "postgres", "--pgdata", n.pgdata, "--pgport", strconv.Itoa(n.port), "--name", n.name,
			"--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl", "--monitor", monitorURL, "--run"); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		if i == 0 {
			if err := a.awaitStates(ctx, "node_1:single"); err != nil {
				t.Fatalf("pgtest: %v", err)
			}
			step("node_1 runs alone")
			// The secondary's base backup starts with a checkpoint, spread
			// out unless there is nothing left to write.
			if err := a.nodeExec(ctx, n, "CHECKPOINT"); err != nil {
				t.Fatalf("pgtest: %v", err)
			}
		}
	}
	if err := a.awaitStates(ctx, "node_1:primary", "node_2:secondary"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	step("node_1 is primary and node_2 its secondary")

	uri, err := a.output(ctx, "show", "uri", "--pgdata", a.monitor.pgdata, "--formation", "default")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u, err := url.Parse(strings.TrimSpace(uri))
	if err != nil {
		t.Fatalf("pgtest: the formation's URI %q: %v", uri, err)
	}
	u.User = url.User("postgres")
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	a.URL = u.String()
	return a
}

// findAutoctl returns the path of pg_autoctl, or why it cannot run the
// server's version.
func findAutoctl() (path, why string) {
	path, err := exec.LookPath("pg_autoctl")
	if err != nil {
		return "", "no pg_autoctl in PATH (Debian: apt-get install postgresql-<version>-auto-failover)"
	}
	lib := filepath.Join(filepath.Dir(srv.BinDir()), "lib", "pgautofailover.so")
	if _, err := os.Stat(lib); err != nil {
		return "", fmt.Sprintf("no %s: install postgresql-%s-auto-failover", lib, filepath.Base(filepath.Dir(srv.BinDir())))
	}
	return path, ""
}

// freePorts returns n TCP ports of loopback that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// prepare gives the formation's directory to the postgres user and
// starts its watchdog.
func (a *AutoFailover) prepare() error {
	if pg := srv.User(); pg != nil {
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chown(a.dir, uid, gid); err != nil {
			return err
		}
	}
	// The watchdog is told the process group of every service started;
	// if this process exits without the test's cleanup (a timeout's panic,
	// a signal), the pipe closes and it kills them and removes the
	// directory. The cleanup stops the services first and says "done".
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	script := `while read -r g; do if [ "$g" = done ]; then gs=; else gs="$gs $g"; fi; done
for g in $gs; do kill -KILL -- "-$g" 2>/dev/null; done; rm -rf "$1"`
	cmd := exec.Command("sh", "-c", script, "pgtest-paf-watchdog", a.dir)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	a.watchW = w
	go cmd.Wait()
	return nil
}

// command is pg_autoctl with args, run as the postgres user with its
// state, configuration and sockets in the formation's directory.
func (a *AutoFailover) command(args ...string) *exec.Cmd {
	// pg_autoctl keeps its state under XDG_DATA_HOME and its settings
	// under XDG_CONFIG_HOME, and the Postgres it runs puts its sockets in
	// PG_REGRESS_SOCK_DIR (else the system's directory), where PGHOST has
	// pg_autoctl look for them.
	env := []string{
		"XDG_CONFIG_HOME=" + filepath.Join(a.dir, "config"),
		"XDG_DATA_HOME=" + filepath.Join(a.dir, "data"),
		"XDG_RUNTIME_DIR=" + filepath.Join(a.dir, "run"),
		"PG_REGRESS_SOCK_DIR=" + a.dir,
		"PGHOST=" + a.dir,
		"PATH=" + srv.BinDir() + ":/usr/bin:/bin",
	}
	var cmd *exec.Cmd
	if srv.User() != nil {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", "env"}, append(env, append([]string{a.autoctl}, args...)...)...)...)
	} else {
		cmd = exec.Command(a.autoctl, args...)
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Dir = a.dir
	return cmd
}

// run runs a pg_autoctl command that ends.
func (a *AutoFailover) run(ctx context.Context, args ...string) error {
	_, err := a.output(ctx, args...)
	return err
}

func (a *AutoFailover) output(ctx context.Context, args ...string) (string, error) {
	cmd := a.command(args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return "", fmt.Errorf("pg_autoctl %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
		}
		return out.String(), nil
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		return "", fmt.Errorf("pg_autoctl %s: %w\n%s", strings.Join(args, " "), ctx.Err(), strings.TrimSpace(errOut.String()))
	}
}

// serve starts a pg_autoctl service of node n, logging to a file of the
// formation's directory, in a process group of its own that its Postgres
// shares (a backend puts itself in a group of its own, and exits when its
// postmaster dies).
func (a *AutoFailover) serve(n *autoctlNode, args ...string) error {
	log, err := os.Create(filepath.Join(a.dir, n.name+".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	n.cmd = a.command(args...)
	n.cmd.Stdout, n.cmd.Stderr = log, log
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		return err
	}
	n.exited = make(chan struct{})
	go func() {
		n.cmd.Wait()
		close(n.exited)
	}()
	_, err = fmt.Fprintln(a.watchW, n.cmd.Process.Pid)
	return err
}

// monitorConn connects to the monitor's database through its socket.
func (a *AutoFailover) monitorConn(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@/pg_auto_failover?host=%s&port=%d&sslmode=disable", url.QueryEscape(a.dir), a.monitor.port))
}

func (a *AutoFailover) monitorExec(ctx context.Context, q string) error {
	conn, err := a.monitorConn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, q)
	return err
}

func (a *AutoFailover) nodeExec(ctx context.Context, n *autoctlNode, q string) error {
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=%d&sslmode=disable", url.QueryEscape(a.dir), n.port))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, q)
	return err
}

// await polls the monitor's database with q, whose one column says
// whether the wait is over, until it is or ctx ends.
func (a *AutoFailover) await(ctx context.Context, what, q string) error {
	var last error
	err := pollUntil(ctx, 50*time.Millisecond, func() (bool, error) {
		conn, err := a.monitorConn(ctx)
		if last = err; err != nil {
			return false, nil
		}
		var done bool
		last = conn.QueryRow(ctx, q).Scan(&done)
		conn.Close(context.Background())
		return last == nil && done, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (last: %v)%s", what, err, last, a.logTails())
	}
	return nil
}

// states are the formation's nodes as the monitor sees them, "name:state"
// in node order, each state reported by its node and assigned to it alike.
const statesSQL = "SELECT coalesce(string_agg(nodename || ':' || CASE WHEN reportedstate = goalstate THEN reportedstate::text ELSE reportedstate || '->' || goalstate END, ' ' ORDER BY nodeid), '') FROM pgautofailover.node"

// awaitStates waits until the monitor reports each node "name:state" of
// want, reported and assigned alike.
func (a *AutoFailover) awaitStates(ctx context.Context, want ...string) error {
	var states string
	var last error
	err := pollUntil(ctx, 50*time.Millisecond, func() (bool, error) {
		conn, err := a.monitorConn(ctx)
		if err == nil {
			err = conn.QueryRow(ctx, statesSQL).Scan(&states)
			conn.Close(context.Background())
		}
		last = err
		return err == nil && containsAll(strings.Fields(states), want), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the formation to be %v: %w (it is %q, %v)%s", want, err, states, last, a.logTails())
	}
	return nil
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// primary returns the node the monitor reports primary.
func (a *AutoFailover) primary(ctx context.Context) (*autoctlNode, error) {
	conn, err := a.monitorConn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	var name string
	if err := conn.QueryRow(ctx, "SELECT nodename FROM pgautofailover.node WHERE reportedstate = 'primary' AND goalstate = 'primary'").Scan(&name); err != nil {
		return nil, fmt.Errorf("asking the monitor for the primary: %w", err)
	}
	for _, n := range a.nodes {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the monitor's primary %q is none of the formation's nodes", name)
}

// KillPrimary kills the primary node's pg_autoctl and its postmaster with
// SIGKILL, as a crash of its machine would: no demotion, no answer to the
// commits in flight, and nothing to restart it. It returns the node's
// name; AwaitPromotion waits for the monitor to promote the other.
func (a *AutoFailover) KillPrimary(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), formationDeadline)
	defer cancel()
	n, err := a.primary(ctx)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("pgtest: killing %s: %v", n.name, err)
	}
	<-n.exited
	return n.name
}

// AwaitPromotion waits until the monitor has promoted a node other than
// killed: it takes writes (wait_primary, as it has no secondary left, or
// primary).
func (a *AutoFailover) AwaitPromotion(t testing.TB, killed string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), formationDeadline)
	defer cancel()
	q := "SELECT EXISTS (SELECT FROM pgautofailover.node WHERE nodename <> '" + strings.ReplaceAll(killed, "'", "''") +
		"' AND reportedstate IN ('wait_primary', 'primary') AND reportedstate = goalstate)"
	if err := a.await(ctx, "the promotion of the secondary", q); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

// stop stops every service still running (pg_autoctl stop, or SIGKILL
// after a while) and removes the formation's directory.
func (a *AutoFailover) stop() error {
	var errs []error
	for _, n := range append(append([]*autoctlNode(nil), a.nodes...), a.monitor) {
		if n == nil || n.cmd == nil {
			continue
		}
		select {
		case <-n.exited:
			continue
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := a.run(ctx, "stop", "--pgdata", n.pgdata, "--immediate"); err != nil {
			errs = append(errs, err)
		}
		select {
		case <-n.exited:
		case <-ctx.Done():
			syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
			<-n.exited
		}
		cancel()
	}
	if a.watchW != nil {
		fmt.Fprintln(a.watchW, "done")
		a.watchW.Close()
	}
	return errors.Join(append(errs, os.RemoveAll(a.dir))...)
}

// logTails returns the end of every service's log, for failure messages.
func (a *AutoFailover) logTails() string {
	var b strings.Builder
	for _, n := range append([]*autoctlNode{a.monitor}, a.nodes...) {
		if n == nil {
			continue
		}
		tail := postgrestest.LogTail(filepath.Join(a.dir, n.name+".log"))
		b.WriteString(strings.Replace(tail, "server log", n.name+"'s pg_autoctl log", 1))
	}
	return b.String()
}
