package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Failover is a primary and a synchronous standby of the test's own, for
// tests of a primary lost and its standby promoted in its place. The
// primary runs with synchronous_standby_names = '*' and
// synchronous_commit = on: a COMMIT returns once the standby has flushed
// it, so that nothing acknowledged is lost when the standby takes over.
// The promoted standby needs no standby of its own.
//
// Pair's Primary and Standby name each server alone; URL names both.
type Failover struct {
	*Pair
	// URL names both servers, the primary first, with
	// target_session_attrs=read-write: a connection reaches whichever of
	// them takes writes, so the same URL reaches the promoted standby once
	// the primary is gone.
	URL string
}

// failoverSchema is the schema a Failover's URLs select, made on the
// primary before the standby is.
const failoverSchema = "f"

// NewFailover starts a primary and its synchronous standby, stopped and
// removed when the test ends, and returns once the standby is the
// primary's synchronous one. It skips or fails t as URL does.
func NewFailover(t testing.TB) *Failover {
	t.Helper()
	Require(t)
	primary, err := newServer()
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := primary.stop(); err != nil {
			t.Errorf("pgtest: stopping the primary: %v", err)
		}
	})
	if err := startPrimary(primary); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), replayDeadline)
	defer cancel()
	if err := primary.exec(ctx, "CREATE SCHEMA "+failoverSchema); err != nil {
		t.Fatalf("pgtest: creating the schema: %v%s", err, primary.LogTail())
	}
	standby, err := startStandby(primary)
	if standby != nil {
		// Cleanups run last first: the standby stops before its primary.
		t.Cleanup(func() {
			if err := standby.stop(); err != nil {
				t.Errorf("pgtest: stopping the standby: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	// Made synchronous only now, so that the base backup did not copy the
	// setting: the promoted standby would wait for a standby of its own.
	if err := primary.Configure("synchronous_standby_names = '*'\n"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := primary.exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatalf("pgtest: reloading the primary's settings: %v", err)
	}
	if err := primary.awaitSync(ctx); err != nil {
		t.Fatalf("pgtest: waiting for the standby to be synchronous: %v%s", err, primary.LogTail())
	}
	f := &Failover{Pair: &Pair{primary: primary, standby: standby, own: true, schema: failoverSchema}}
	f.Primary = primary.URL("postgres") + "&search_path=" + failoverSchema
	f.Standby = standby.URL("postgres") + "&search_path=" + failoverSchema
	f.URL = MultiHostURL([]string{primary.Dir(), standby.Dir()}, "postgres", failoverSchema)
	return f
}

// MultiHostURL is the URL of database db on every server of hosts (Unix
// socket directories, or host names), in that order, with
// target_session_attrs=read-write, selecting schema.
func MultiHostURL(hosts []string, db, schema string) string {
	escaped := make([]string, len(hosts))
	for i, h := range hosts {
		escaped[i] = url.QueryEscape(h)
	}
	return "postgres://postgres@/" + db + "?host=" + strings.Join(escaped, ",") +
		"&sslmode=disable&target_session_attrs=read-write&search_path=" + url.QueryEscape(schema)
}

// startPrimary initializes and starts s, whose directory is made, as a
// primary that standbys can stream from.
func startPrimary(s *server) error {
	if err := s.InitDB(); err != nil {
		return err
	}
	if err := s.Configure(`
fsync = on
synchronous_commit = on
shared_buffers = 16MB
max_connections = 100
wal_level = replica
max_wal_senders = 10
log_min_messages = warning
`); err != nil {
		return err
	}
	if err := s.Launch(); err != nil {
		return fmt.Errorf("starting the primary: %w%s", err, s.LogTail())
	}
	return nil
}

// awaitSync waits until a standby streams from s as its synchronous one.
func (s *server) awaitSync(ctx context.Context) error {
	return pollUntil(ctx, 5*time.Millisecond, func() (bool, error) {
		var sync bool
		err := s.query(ctx, "SELECT EXISTS (SELECT FROM pg_stat_replication WHERE sync_state = 'sync')", &sync)
		return sync, err
	})
}

// KillPrimary kills the primary's postmaster with SIGKILL, as a crash of
// its machine would: no shutdown, no answer to the commits in flight. Its
// backends notice and exit on their own; nothing restarts it. Promote
// makes the standby take over.
func (f *Failover) KillPrimary(t testing.TB) {
	t.Helper()
	if err := f.primary.Kill(); err != nil {
		t.Fatalf("pgtest: killing the primary: %v", err)
	}
}
