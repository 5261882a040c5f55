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
