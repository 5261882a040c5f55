package pgtest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pair is a primary server and a hot standby that streams the primary's
// WAL (physical replication, set up by pg_basebackup -R), for the tests of
// a store read from a standby. Primary and Standby are the same schema on
// the two servers: what the test writes through Primary, Standby shows
// once the standby has replayed it (CatchUp waits for that).
//
// Standby hands out schemas of one pair shared by the test binary, started
// on first use; NewStandby makes a standby of the test's own, which
// Promote may turn into a primary. Both servers run as the primary of URL
// does: the postgres user, Unix sockets in private directories, fsync on.
type Pair struct {
	Primary, Standby string

	schema           string
	primary, standby *server
	own              bool // the standby is this pair's alone
}

// replayDeadline bounds every wait of a Pair for the standby: replay of a
// test's writes takes milliseconds, so a standby this far behind is broken.
const replayDeadline = 30 * time.Second

// replication is the shared primary, with its standby, and the connection
// to the primary that creates the pairs' schemas (one statement at a time).
var replication struct {
	once             sync.Once
	primary, standby *server
	conn             *pgx.Conn
	err              error
	mu               sync.Mutex
}

var pairSeq atomic.Int64

// Standby returns a fresh schema on the primary and hot standby the test
// binary shares, starting them on first use, once the standby has it. It
// skips or fails t as URL does; a pair that will not start fails it.
// Tests that pause replay on it (PauseReplay) should not run in parallel
// with others that use it.
func Standby(t testing.TB) *Pair {
	t.Helper()
	Require(t)
	replication.once.Do(startReplication)
	if replication.err != nil {
		t.Fatalf("pgtest: %v", replication.err)
	}
	p := &Pair{primary: replication.primary, standby: replication.standby}
	p.newSchema(t)
	p.CatchUp(t)
	return p
}

// NewStandby returns a fresh schema on the shared primary (see Standby) and
// on a standby of the test's own, made from a base backup of the primary
// and stopped and removed when the test ends. Unlike Standby's, it may be
// promoted (Promote).
func NewStandby(t testing.TB) *Pair {
	t.Helper()
	Require(t)
	replication.once.Do(startReplication)
	if replication.err != nil {
		t.Fatalf("pgtest: %v", replication.err)
	}
	p := &Pair{primary: replication.primary, own: true}
	p.newSchema(t)
	standby, err := startStandby(replication.primary)
	if standby != nil {
		t.Cleanup(func() {
			if err := standby.stop(); err != nil {
				t.Errorf("pgtest: stopping the standby: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	p.standby = standby
	p.Standby = standby.URL("postgres") + "&search_path=" + p.schema
	p.CatchUp(t)
	return p
}

// newSchema creates the pair's schema on the primary and sets the URLs.
func (p *Pair) newSchema(t testing.TB) {
	t.Helper()
	name := fmt.Sprintf("r_%d", pairSeq.Add(1))
	p.schema = name
	replication.mu.Lock()
	_, err := replication.conn.Exec(context.Background(), "CREATE SCHEMA "+name)
	replication.mu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: create schema %s: %v%s", name, err, p.primary.LogTail())
	}
	p.Primary = p.primary.URL("postgres") + "&search_path=" + name
	if p.standby != nil {
		p.Standby = p.standby.URL("postgres") + "&search_path=" + name
	}
}

// startReplication starts the shared primary and its standby. The primary
// is a server of its own rather than URL's, whose databases the tests
// multiply: a base backup copies every database of its server.
func startReplication() {
	replication.err = func() error {
		primary, err := newServer()
		if err != nil {
			return err
		}
		extraServers.add(primary)
		// initdb's pg_hba.conf trusts local replication connections.
		if err := startPrimary(primary); err != nil {
			return err
		}
		conn, err := pgx.Connect(context.Background(), primary.URL("postgres"))
		if err != nil {
			return fmt.Errorf("connecting to the primary: %w%s", err, primary.LogTail())
		}
		replication.conn = conn
		standby, err := startStandby(primary)
		if standby != nil {
			extraServers.add(standby)
		}
		replication.primary, replication.standby = primary, standby
		return err
	}()
}

// startStandby makes a hot standby of primary from a base backup and
// starts it. The server it returns, if any, must be stopped.
func startStandby(primary *server) (*server, error) {
	s, err := newServer()
	if err != nil {
		return nil, err
	}
	// -R writes primary_conninfo (the primary's socket) and standby.signal;
	// --no-sync spares fsyncing the copy, as initdb's --no-sync does.
	if err := s.Run("pg_basebackup", "-h", primary.Dir(), "-U", "postgres", "-D", s.DataDir(),
		"-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return s, fmt.Errorf("base backup of the primary: %w%s", err, primary.LogTail())
	}
	// A hot standby takes connections once it has a snapshot of the
	// transactions running on the primary, which the primary logs at a
	// checkpoint, or every 15 seconds while it is busy: without this one,
	// the standby of an idle primary waits for the next of those.
	if err := primary.exec(context.Background(), "CHECKPOINT"); err != nil {
		return s, fmt.Errorf("checkpoint on the primary: %w", err)
	}
	// The copied postgresql.conf names the primary's socket directory:
	// configure's lines come after it and win.
	if err := s.Configure(`
hot_standby = on
hot_standby_feedback = on
`); err != nil {
		return s, err
	}
	if err := s.Launch(); err != nil {
		return s, fmt.Errorf("starting the standby: %w%s", err, s.LogTail())
	}
	return s, nil
}

// CatchUp waits until the standby has replayed everything the primary had
// written when CatchUp was called (its pg_current_wal_insert_lsn(), which
// also covers commits not flushed yet). It fails t if replay is paused or
// has not got there within 30 seconds.
func (p *Pair) CatchUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), replayDeadline)
	defer cancel()
	var lsn string
	if err := p.primary.query(ctx, "SELECT pg_current_wal_insert_lsn()::text", &lsn); err != nil {
		t.Fatalf("pgtest: asking the primary for its WAL position: %v", err)
	}
	if err := p.waitStandby(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn, pg_get_wal_replay_pause_state()", lsn); err != nil {
		t.Fatalf("pgtest: waiting for the standby to replay the primary's WAL up to %s: %v%s", lsn, err, p.standby.LogTail())
	}
}

// waitStandby asks the standby q, whose answer is whether the wait is over
// and the replay's pause state, until it is over or the deadline passes;
// a replay paused (not on its way to pausing) fails it at once.
func (p *Pair) waitStandby(ctx context.Context, q string, args ...any) error {
	conn, err := pgx.Connect(ctx, p.standby.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return pollUntil(ctx, 2*time.Millisecond, func() (bool, error) {
		var done bool
		var state string
		if err := conn.QueryRow(ctx, q, args...).Scan(&done, &state); err != nil {
			return false, err
		}
		if !done && state == "paused" {
			return false, errors.New("replay is paused (PauseReplay)")
		}
		return done, nil
	})
}

// PauseReplay pauses the standby's replay of the primary's WAL (the WAL
// still arrives) and returns once it is paused: what the primary writes
// from then on, the standby does not show until ResumeReplay, which runs
// when the test ends if the test does not call it.
func (p *Pair) PauseReplay(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), replayDeadline)
	defer cancel()
	if err := p.standby.exec(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatalf("pgtest: pausing replay: %v", err)
	}
	t.Cleanup(func() { p.ResumeReplay(t) })
	// The pause takes effect at the next WAL record replay reaches.
	if err := p.waitStandby(ctx, "SELECT pg_get_wal_replay_pause_state() = 'paused', 'not paused'"); err != nil {
		t.Fatalf("pgtest: waiting for replay to pause: %v%s", err, p.standby.LogTail())
	}
}

// ResumeReplay resumes the standby's replay after PauseReplay; it does
// not wait for replay to catch up (CatchUp does).
func (p *Pair) ResumeReplay(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), replayDeadline)
	defer cancel()
	if err := p.standby.exec(ctx, "SELECT pg_wal_replay_resume()"); err != nil {
		t.Fatalf("pgtest: resuming replay: %v", err)
	}
}

// Promote ends the standby's recovery (pg_promote, waiting until it is
// done): it becomes a primary of its own, which takes writes and no
// longer follows the old primary. Only a standby of the test's own
// (NewStandby) may be promoted: promoting the shared one would take it
// from every later test.
func (p *Pair) Promote(t testing.TB) {
	t.Helper()
	if !p.own {
		t.Fatal("pgtest: Promote of the shared standby: make one with NewStandby")
	}
	ctx, cancel := context.WithTimeout(context.Background(), replayDeadline)
	defer cancel()
	var done bool
	if err := p.standby.query(ctx, "SELECT pg_promote(true, 30)", &done); err != nil || !done {
		t.Fatalf("pgtest: promoting the standby: %v (done: %v)%s", err, done, p.standby.LogTail())
	}
}

// query runs q on the server's postgres database and scans its one row.
func (s *server) query(ctx context.Context, q string, dest ...any) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, q).Scan(dest...)
}

// exec runs q on the server's postgres database.
func (s *server) exec(ctx context.Context, q string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, q)
	return err
}

// extraServers are the servers besides URL's that Run stops when the
// tests are done.
var extraServers serverList

type serverList struct {
	mu   sync.Mutex
	list []*server
}

func (l *serverList) add(s *server) {
	l.mu.Lock()
	l.list = append(l.list, s)
	l.mu.Unlock()
}

// stop stops every server of the list, standbys (added last) first.
func (l *serverList) stop() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if replication.conn != nil {
		replication.conn.Close(context.Background())
	}
	var errs []error
	for i := len(l.list) - 1; i >= 0; i-- {
		if err := l.list[i].stop(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Base(l.list[i].Dir()), err))
		}
	}
	l.list = nil
	return errors.Join(errs...)
}
