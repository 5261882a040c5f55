package reliability

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/tune"
)

// The test binary doubles as the helper for the subprocess suites: started
// with envRole set, TestMain runs that role instead of the tests. Roles are
// registered by the files that use them.
const envRole = "STORH_RELIABILITY_ROLE"

var roles = map[string]func() int{}

// cliPath is the storh CLI built once for the whole run; cliErr says why it
// could not be built (the CLI rows then skip).
var (
	cliPath string
	cliErr  error
)

// runDir is a scratch directory for the whole run (removed at the end), for
// fixtures shared between tests.
var runDir string

func TestMain(m *testing.M) {
	if err := tune.FromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(2)
	}
	if role := os.Getenv(envRole); role != "" {
		fn, ok := roles[role]
		if !ok {
			fmt.Fprintf(os.Stderr, "reliability: unknown child role %q\n", role)
			os.Exit(90)
		}
		os.Exit(fn())
	}
	flag.Parse()
	dir, err := os.MkdirTemp("", "storh-reliability-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
	runDir = dir
	// Fuzzing runs only its target; building the CLI would only slow it.
	if f := flag.Lookup("test.fuzz"); f == nil || f.Value.String() == "" {
		cliPath, cliErr = buildCLI(dir)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildCLI builds ./cmd/storh of this module into dir.
func buildCLI(dir string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if _, err := os.Stat(filepath.Join(root, "cmd", "storh")); err != nil {
		return "", fmt.Errorf("no CLI in this checkout: %v", err)
	}
	out := filepath.Join(dir, "storh")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/storh")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/storh: %v\n%s", err, msg)
	}
	return out, nil
}

// childCmd prepares the test binary to run role with extra environment.
// -test.run=^$ makes a child that somehow misses its role run no tests.
func childCmd(ctx context.Context, role string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envRole+"="+role), env...)
	return cmd
}

// childResult is what a finished child left behind.
type childResult struct {
	Stdout, Stderr string
	Exit           int    // -1 when killed by a signal
	Signal         string // the signal, when killed
}

// runChild runs role to completion (with a hang guard) and returns its
// output. A child that dies of a panic or a runtime fault shows up as a
// non-zero Exit with the trace in Stderr; callers decide what is allowed.
func runChild(t testing.TB, role string, env ...string) childResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := childCmd(ctx, role, env...)
	// A hung child is asked for its goroutines (SIGQUIT makes the Go
	// runtime print them) before it is killed, so the failure shows where
	// it hung.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := childResult{Stdout: stdout.String(), Stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("child %s hung for 2 minutes and was killed\nstderr:\n%s", role, head(res.Stderr, 80))
	}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("child %s: %v", role, err)
		}
		res.Exit = ee.ExitCode()
		if res.Exit == -1 {
			res.Signal = ee.String()
		}
	}
	return res
}

// diedBadly reports whether a child's stderr shows a panic or a runtime
// fatal error (fault, stack overflow, concurrent map access...).
func diedBadly(r childResult) bool {
	return r.Exit != 0 && (strings.Contains(r.Stderr, "panic:") || strings.Contains(r.Stderr, "fatal error:") ||
		strings.Contains(r.Stderr, "unexpected fault address") || r.Signal != "")
}

// crashExcerpt returns the part of a dead child's stderr that explains the
// death: from the first "panic:", "fatal error:" or "unexpected fault" line,
// the message and the first goroutine's frames.
func crashExcerpt(stderr string) string {
	lines := strings.Split(stderr, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "unexpected fault") {
			end, blanks := len(lines), 0
			for j := i + 1; j < len(lines); j++ {
				if lines[j] == "" {
					if blanks++; blanks == 2 { // after the header, then the first goroutine
						end = j
						break
					}
				}
			}
			return strings.Join(lines[i:min(end, i+40)], "\n")
		}
	}
	return tail(stderr, 30)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// runSeed returns the seed for this test's randomness: STORH_RELIABILITY_SEED
// when set (to replay a failure), else a fresh one. It is logged either way.
func runSeed(t testing.TB) uint64 {
	t.Helper()
	if s := os.Getenv("STORH_RELIABILITY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STORH_RELIABILITY_SEED=%q: %v", s, err)
		}
		t.Logf("seed %d (from STORH_RELIABILITY_SEED)", v)
		return v
	}
	v := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with STORH_RELIABILITY_SEED=%d)", v, v)
	return v
}

// envInt reads a positive integer knob from the environment.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// head returns the first n lines of s: where a goroutine dump puts the
// goroutine that was running.
func head(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}
