package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/kv"
)

// Commits whose answer is lost around a failover: the primary runs with a
// synchronous standby, which is promoted in its place, and the primary is
// killed. The commit marker tells the history of the server that takes
// the writes from then on: a commit succeeds only if its record is there,
// fails plainly only if it is not, and is ErrCommitUnknown when no server
// that takes writes can answer for it.
func TestCommitOutcomeAcrossFailover(t *testing.T) {
	f := pgtest.NewFailover(t)
	// The old primary through a proxy that loses a commit's answer, then
	// the standby: one store's URL.
	proxy := pgtest.NewProxy(t, f.Primary)
	viaProxy := openURL(t, pgtest.MultiHostURL([]string{socketDir(t, proxy.URL), socketDir(t, f.Standby)}, "postgres", "f"))
	viaProxy.commitCheckTime = time.Minute // rides out the promotion
	s := openURL(t, f.URL)
	s.commitCheckTime = time.Minute
	breakable, cut := openBreakable(t, f.URL)
	breakable.commitCheckTime = 300 * time.Millisecond

	primary := connect(t, f.Primary)
	// Made while the standby confirms commits: later the primary's wait.
	for _, b := range []string{"replayed", "unseen", "waits"} {
		fill(t, s, b, 1)
	}
	const (
		committed  = "committed"
		rolledBack = "rolled back"
		unknown    = "unknown"
	)
	type result struct {
		name   string
		bucket string
		want   string
		stored bool // on the promoted standby
		err    chan error
	}
	// start writes key 7 into bucket of its own (writers of one bucket
	// take turns) and commits in the background.
	start := func(name string, st *Store, bucket, want string, stored bool) *result {
		t.Helper()
		txn := begin(t, st, true)
		must(t, txn.Bucket([]byte(bucket)).Put(key(7), []byte("new")))
		r := &result{name: name, bucket: bucket, want: want, stored: stored, err: make(chan error, 1)}
		go func() { r.err <- txn.Commit() }()
		return r
	}
	var results []*result

	// Committed on the primary and on its synchronous standby, the answer
	// lost: the promoted standby holds the marker.
	proxy.Arm(pgtest.AfterCommit, true)
	results = append(results, start("the standby replayed the commit", viaProxy, "replayed", committed, true))
	poll(t, "the proxy to lose the commit's answer", func() bool { return proxy.Cuts() == 1 })

	f.Promote(t)
	// From here the old primary's commits wait for a standby that is no
	// longer there, and nothing it does reaches the promoted one.
	unseen := start("the new primary never saw the transaction", s, "unseen", rolledBack, false)
	waits := start("the primary waits for its standby", breakable, "waits", unknown, false)
	results = append(results, unseen, waits)
	poll(t, "two commits to wait for the standby", func() bool {
		var n int
		must(t, primary.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'").Scan(&n))
		return n == 2
	})

	// A connection lost while the primary waits for the standby: the
	// question ends the backend that holds the marker, which leaves the
	// commit on the primary alone, not to be acknowledged before the
	// standby has it. Its outcome is asked of the primary, before the
	// failover; the answer is kept for the checks below.
	cut.breakAll()
	waitsErr := <-waits.err
	waits.err <- waitsErr

	f.KillPrimary(t)

	check := openURL(t, f.Standby)
	for _, r := range results {
		var err error
		select {
		case err = <-r.err:
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s: Commit has not returned", r.name)
		}
		t.Logf("%s: Commit: %v", r.name, err)
		rt := begin(t, check, false)
		stored := rt.Bucket([]byte(r.bucket)).Get(key(7)) != nil
		must(t, rt.Err())
		must(t, rt.Rollback())
		if stored != r.stored {
			t.Errorf("%s: the record is on the promoted standby: %v, want %v", r.name, stored, r.stored)
		}
		switch {
		case err == nil && !stored:
			t.Errorf("%s: Commit = nil, and the record is not on the server that took over", r.name)
		case r.want == committed && err != nil:
			t.Errorf("%s: Commit = %v, want nil: the server that took over holds it", r.name, err)
		case r.want == unknown && !errors.Is(err, kv.ErrCommitUnknown):
			t.Errorf("%s: Commit = %v, want ErrCommitUnknown", r.name, err)
		case r.want == rolledBack && (err == nil || errors.Is(err, kv.ErrCommitUnknown)):
			t.Errorf("%s: Commit = %v, want an error saying nothing was written", r.name, err)
		}
	}
}

// openBreakable opens a store on url whose connections the test can
// break with the dialer it returns, the server's side left waiting as it
// was.
func openBreakable(t *testing.T, url string) (*Store, *dialer) {
	t.Helper()
	cut := &dialer{}
	cfg, err := pgxpool.ParseConfig(url)
	must(t, err)
	cfg.ConnConfig.DialFunc = cut.dial
	s, err := openConfig(ctx, cfg, options{})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	return s, cut
}

// dialer makes a store's connections and breaks them on demand: the
// client's side closes, the server's is left as it was. Partitioned, it
// also drops the cancel requests pgx sends for a connection it loses, as
// a network that cut the connection would: the server's backend then
// goes on with what it was doing.
type dialer struct {
	mu          sync.Mutex
	conns       []net.Conn
	partitioned bool
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		c = &cancelDropper{Conn: c, d: d}
		d.mu.Unlock()
	}
	return c, err
}

func (d *dialer) breakAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// cancelDropper closes, while its dialer is partitioned, a connection
// whose first message is a CancelRequest (16 bytes, code 80877102).
type cancelDropper struct {
	net.Conn
	d *dialer
}

func (c *cancelDropper) Write(p []byte) (int, error) {
	c.d.mu.Lock()
	drop := c.d.partitioned && len(p) == 16 && binary.BigEndian.Uint32(p[4:8]) == 80877102
	c.d.mu.Unlock()
	if drop {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

// socketDir is the host of a test server's URL: its socket directory.
func socketDir(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	must(t, err)
	return u.Query().Get("host")
}

// connect opens a connection of the test's own, closed when it ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, url)
	must(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// poll waits, for at most 30 seconds, until done.
func poll(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		<-tick.C
	}
}
