package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/kv"
)

// A commit whose connection is lost around its COMMIT: the store asks the
// server how the transaction ended, and Commit answers as the server
// does. Only when the server cannot be asked is the outcome unknown
// (kv.ErrCommitUnknown), and then the record may well be stored.
func TestCommitOutcome(t *testing.T) {
	const (
		committed  = "committed"
		rolledBack = "rolled back"
		unknown    = "unknown"
	)
	for _, tc := range []struct {
		name   string
		cut    pgtest.Cut
		refuse bool
		want   string
		stored bool
	}{
		{"the server committed", pgtest.AfterCommit, false, committed, true},
		{"the server committed and cannot be asked", pgtest.AfterCommit, true, unknown, true},
		{"the COMMIT never reached the server", pgtest.BeforeCommit, false, rolledBack, false},
		// The server's backend waits in its transaction for a client that
		// is gone: the store ends it rather than wait for the server to
		// notice (without that, the outcome would stay unknown).
		{"the server waits for the COMMIT", pgtest.BeforeCommitServerWaits, false, rolledBack, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := pgtest.URL(t)
			proxy := pgtest.NewProxy(t, url)
			s := openURL(t, proxy.URL)
			if tc.want == unknown {
				s.commitCheckTime = 200 * time.Millisecond
			}
			direct := openURL(t, url)
			fill(t, s, "b", 1)

			proxy.Arm(tc.cut, tc.refuse)
			txn := begin(t, s, true)
			must(t, txn.Bucket([]byte("b")).Put(key(7), []byte("new")))
			txn.(kv.SharedTx).Announce("b", key(7))
			err := txn.Commit()
			if proxy.Cuts() != 1 {
				t.Fatalf("the proxy cut %d connections, want 1 (Commit: %v)", proxy.Cuts(), err)
			}
			t.Logf("Commit: %v", err)
			switch tc.want {
			case committed:
				if err != nil {
					t.Fatalf("Commit = %v, want nil: the server committed", err)
				}
				if txn.(kv.SharedTx).CommitID() == 0 {
					t.Error("CommitID = 0 after a commit found committed")
				}
			case rolledBack:
				if err == nil || errors.Is(err, kv.ErrCommitUnknown) {
					t.Fatalf("Commit = %v, want the lost connection's error: the server rolled back", err)
				}
			case unknown:
				if !errors.Is(err, kv.ErrCommitUnknown) {
					t.Fatalf("Commit = %v, want ErrCommitUnknown", err)
				}
			}
			if errors.Is(err, kv.ErrConflict) {
				t.Errorf("Commit = %v: a lost connection is not a conflict, which callers run again", err)
			}

			r := begin(t, direct, false)
			if v := r.Bucket([]byte("b")).Get(key(7)); (v != nil) != tc.stored {
				t.Errorf("the record is stored: %v, want %v", v != nil, tc.stored)
			}
			must(t, r.Err())
			must(t, r.Rollback())
			if tc.refuse {
				return
			}
			// The store goes on, on a new connection, and the lost
			// transaction holds no lock: a writer of its bucket gets it.
			w := begin(t, s, true)
			must(t, w.Bucket([]byte("b")).Put(key(8), []byte("after")))
			commit(t, w)
		})
	}
}

// A lost transaction whose backend still waits for a lock when the store
// asks how it ended, and which the store cannot end: the answer is
// "nothing was written", and the question's marker keeps it true, since
// the transaction, let go on once the lock is free, cannot commit its own
// marker.
func TestCommitOutcomeStopsALaterCommit(t *testing.T) {
	url := pgtest.URL(t)
	direct := openURL(t, url)
	fill(t, direct, "b", 1)
	breakable, cut := openBreakable(t, url)
	// A write that caches the bucket's subtree, so that the next one
	// sends its lock with its COMMIT.
	w := begin(t, breakable, true)
	must(t, w.Bucket([]byte("b")).Put(key(2), []byte("cached")))
	commit(t, w)

	holder := begin(t, direct, true)
	if holder.Bucket([]byte("b")).Get(key(0)) == nil {
		t.Fatal("the holder read nothing")
	}
	lost := begin(t, breakable, true)
	must(t, lost.Bucket([]byte("b")).Put(key(7), []byte("new")))
	pc := lost.(*tx).conn.Conn().PgConn()
	pid := pc.PID()
	// A backend the store cannot name (behind a pooler, say), which it
	// therefore does not end: it waits on, as one whose client is gone.
	breakable.backends.Delete(pc)
	done := make(chan error, 1)
	go func() { done <- lost.Commit() }()
	admin := connect(t, url)
	waiting := func() bool {
		var n int
		must(t, admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'advisory'", int64(pid)).Scan(&n))
		return n == 1
	}
	poll(t, "the commit to wait for the holder's lock", waiting)
	cut.mu.Lock()
	cut.partitioned = true
	cut.mu.Unlock()
	cut.breakAll()
	err := <-done
	t.Logf("Commit: %v", err)
	if err == nil || errors.Is(err, kv.ErrCommitUnknown) {
		t.Fatalf("Commit = %v, want an error saying nothing was written", err)
	}
	if !waiting() {
		t.Fatal("the lost transaction's backend no longer waits: the test shows nothing")
	}
	commit(t, holder)
	poll(t, "the lost transaction's backend to end", func() bool {
		var n int
		must(t, admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int64(pid)).Scan(&n))
		return n == 0
	})
	r := begin(t, direct, false)
	if v := r.Bucket([]byte("b")).Get(key(7)); v != nil {
		t.Errorf("the record is stored (%q), yet Commit said nothing was written", v)
	}
	must(t, r.Err())
	must(t, r.Rollback())
}

// Commit markers are kept long enough to answer for a lost commit, and
// deleted after: a store prunes those older than markKeep in the
// background, at most once per pruneEvery.
func TestCommitMarkersArePruned(t *testing.T) {
	url := pgtest.URL(t)
	s := openURL(t, url)
	admin := connect(t, url)
	old := append(tokenBefore(time.Now().Add(-markKeep-time.Minute)), make([]byte, 8)...)
	recent := append(tokenBefore(time.Now().Add(-markKeep+time.Minute)), make([]byte, 8)...)
	for _, tok := range [][]byte{old, recent} {
		if _, err := admin.Exec(ctx, s.marks.probe, tok); err != nil {
			t.Fatal(err)
		}
	}
	count := func(tok []byte) int {
		var n int
		must(t, admin.QueryRow(ctx, "SELECT count(*) FROM storh_commits WHERE token = $1", tok).Scan(&n))
		return n
	}
	s.lastPrune.Store(0)
	fill(t, s, "b", 1)
	poll(t, "the old marker to be pruned", func() bool { return count(old) == 0 })
	if count(recent) != 1 {
		t.Error("a marker younger than markKeep was pruned")
	}
	var n int
	must(t, admin.QueryRow(ctx, "SELECT count(*) FROM storh_commits WHERE token > $1", recent).Scan(&n))
	if n == 0 {
		t.Error("the commit left no marker")
	}
	// The next prune waits for pruneEvery.
	pruned := s.lastPrune.Load()
	fill(t, s, "c", 1)
	if s.lastPrune.Load() != pruned {
		t.Error("a second prune started within pruneEvery")
	}
}
