//go:build !storh_nopostgres

package storh_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// postgresPass is the PostgreSQL pass's child process, which TestMain
// starts before the file pass runs, so that the two overlap: most of each
// waits on fsyncs, a server or a clock, and run one after the other they
// made this package the longest of the long run. TestPostgresPass waits
// for it.
var postgresPass struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	done   chan struct{}
	out    bytes.Buffer
	err    error
	start  time.Time
}

// startPostgresPass starts the child when TestPostgresPass is to run:
// in the long run, in the file pass, without the invariant checks, and
// when -run selects it.
func startPostgresPass() {
	if !testkit.Long() || onPostgres || engine.Invariants || !selected("TestPostgresPass") {
		return
	}
	p := &postgresPass
	ctx, cancel := context.WithCancel(context.Background())
	args := []string{"-test.short", "-test.count=1"}
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			// Leave the test the time to report what the child printed.
			left := d - 30*time.Second
			ctx, cancel = context.WithTimeout(context.Background(), left)
			args = append(args, "-test.timeout="+left.String())
		}
	}
	p.cmd = exec.CommandContext(ctx, os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), "STORH_TEST_BACKEND=postgres")
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cancel, p.done, p.start = cancel, make(chan struct{}), time.Now()
	go func() {
		defer close(p.done)
		p.err = p.cmd.Run()
	}()
}

// selected reports whether -run lets top-level test name run.
func selected(name string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	top, _, _ := strings.Cut(f.Value.String(), "/")
	re, err := regexp.Compile(top)
	return err == nil && re.MatchString(name)
}

// TestPostgresPass is the long run's second pass of this package: every
// test again on the PostgreSQL backend (STORH_TEST_BACKEND=postgres), in a
// child process of this test binary, with -short (the semantics table
// thins its matrix there, see semSparse). One switch, STORH_LONG=1, thus
// runs both backends from go test ./.... The child runs beside the file
// pass (startPostgresPass); this test reports it.
func TestPostgresPass(t *testing.T) {
	testkit.RequireLong(t)
	skipOnPostgresPass(t)
	skipUnderInvariants(t)
	p := &postgresPass
	if p.cmd != nil {
		defer p.cancel()
	}
	pgtest.Require(t)
	if p.cmd == nil {
		t.Fatal("the PostgreSQL pass was not started: TestMain must call startPostgresPass")
	}
	<-p.done
	if p.err != nil {
		t.Fatalf("the tests on PostgreSQL (STORH_TEST_BACKEND=postgres go test -short ./storh/) failed: %v\n%s", p.err, p.out.Bytes())
	}
	t.Logf("the tests passed on PostgreSQL too (%v, beside the file pass)", time.Since(p.start).Round(time.Second))
}
