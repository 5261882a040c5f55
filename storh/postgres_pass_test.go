//go:build !storh_nopostgres

package storh_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// TestPostgresPass is the long run's second pass of this package: every
// test again on the PostgreSQL backend (STORH_TEST_BACKEND=postgres), in a
// child process of this test binary, with -short (the semantics table
// thins its matrix there, see semSparse). One switch, STORH_LONG=1, thus
// runs both backends from go test ./....
func TestPostgresPass(t *testing.T) {
	testkit.RequireLong(t)
	skipOnPostgresPass(t)
	skipUnderInvariants(t)
	pgtest.Require(t)
	ctx := context.Background()
	args := []string{"-test.short", "-test.count=1"}
	if deadline, ok := t.Deadline(); ok {
		// Leave this test the time to report what the child printed.
		left := time.Until(deadline) - 30*time.Second
		if left <= 0 {
			t.Fatalf("too little of -timeout is left for the PostgreSQL pass; raise -timeout")
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
		args = append(args, "-test.timeout="+left.String())
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "STORH_TEST_BACKEND=postgres")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests on PostgreSQL (STORH_TEST_BACKEND=postgres go test -short ./storh/) failed: %v\n%s", err, out)
	}
	t.Logf("the tests passed on PostgreSQL too (%v)", time.Since(start).Round(time.Second))
}
