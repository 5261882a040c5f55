package postgres

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/storhdb/storh-go/storh/kv"
)

// Commit markers. Every writable transaction that reaches the server
// inserts, just before its COMMIT and in the same round trip, a row of its
// own into storh_commits: a token drawn by the client, and the
// transaction's id (for its notices' readers, see CommitID). The row is in
// the store exactly when the transaction committed, on every server that
// has its WAL: the primary, its standbys, a standby promoted in its place.
// So a writer whose connection is lost with the COMMIT's answer asks for
// the token (commitOutcome), and needs nothing learnt before the COMMIT
// went: no round trip of its own for the transaction's id, and no
// transaction status functions (pg_xact_status), which the servers that
// speak PostgreSQL's protocol do not all have.
//
// The question is an INSERT of the same token. The marker's primary key
// makes it wait while the lost transaction holds the marker uncommitted,
// and then either find it (committed) or insert it. An inserted token
// answers "not committed" for good: should the lost transaction still run
// (waiting for a lock, say), its own insert of the token now fails, and
// it cannot commit.
//
// Tokens lead with the milliseconds of their making, so old markers are
// deleted by key range: each Store deletes those older than markKeep
// about once per pruneEvery, in the background (pruneMarks).
type marksSQL struct {
	create string
	mark   string // inserts marker $1 with the transaction's id, returning the id
	probe  string // inserts marker $1 unless it is there
	xid    string // the transaction id of marker $1
	prune  string // deletes the markers before token $1
}

func newMarksSQL(schema string) marksSQL {
	m := pgx.Identifier{schema, "storh_commits"}.Sanitize()
	return marksSQL{
		create: "CREATE TABLE IF NOT EXISTS " + m + " (token bytea PRIMARY KEY, xid xid8)",
		mark:   "INSERT INTO " + m + " (token, xid) VALUES ($1, pg_current_xact_id()) RETURNING xid::text",
		probe:  "INSERT INTO " + m + " (token) VALUES ($1) ON CONFLICT (token) DO NOTHING",
		xid:    "SELECT xid::text FROM " + m + " WHERE token = $1",
		prune:  "DELETE FROM " + m + " WHERE token < $1",
	}
}

const (
	// defaultCommitCheckTime is how long, at most, a commit whose
	// connection was lost asks the server how it ended: long enough to
	// ride out a brief outage, short enough for a caller that must decide.
	defaultCommitCheckTime = 5 * time.Second
	tokenSize              = 16
	// markKeep is how long a marker is kept: far longer than any
	// commitCheckTime, since the question comes within that of the loss.
	markKeep = 10 * time.Minute
	// pruneEvery is how often, at most, a Store deletes old markers.
	pruneEvery = time.Minute
)

// newToken draws a commit marker token: the milliseconds now, then random
// bytes.
func newToken() []byte {
	tok := make([]byte, tokenSize)
	binary.BigEndian.PutUint64(tok, uint64(time.Now().UnixMilli()))
	_, _ = rand.Read(tok[8:])
	return tok
}

// tokenBefore is the least token of time at, so that every token drawn
// before it sorts below.
func tokenBefore(at time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(at.UnixMilli()))
}

// scanXid reads a transaction id sent as text (xid8 has no binary form
// pgx knows) into id.
func scanXid(row pgx.Row, id *uint64) error {
	var text pgtype.Text
	if err := row.Scan(&text); err != nil {
		return err
	}
	if !text.Valid {
		*id = 0
		return nil
	}
	var err error
	*id, err = strconv.ParseUint(text.String, 10, 64)
	return err
}

// pruneMarks deletes, in the background and about once per pruneEvery
// per Store, the markers older than markKeep. A failure is left for the
// next time: markers only take room.
func (s *Store) pruneMarks() {
	now := time.Now()
	last := s.lastPrune.Load()
	if now.UnixNano()-last < int64(pruneEvery) || !s.lastPrune.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	go func() {
		_, _ = s.pool.Exec(s.ctx, s.marks.prune, tokenBefore(now.Add(-markKeep)))
	}()
}

// knowBackends makes the pool of cfg record each connection's backend
// start as it connects (one query per connection), and forget it as the
// connection closes.
func (s *Store) knowBackends(cfg *pgxpool.Config) {
	after, before := cfg.AfterConnect, cfg.BeforeClose
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, c); err != nil {
				return err
			}
		}
		var start pgtype.Timestamptz
		if err := c.QueryRow(ctx, backendStartSQL).Scan(&start); err != nil {
			return err
		}
		s.backends.Store(c.PgConn(), start)
		return nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) {
		s.backends.Delete(c.PgConn())
		if before != nil {
			before(c)
		}
	}
}

// backendID names the backend of a connection: its pid and start.
type backendID struct {
	pid   uint32
	start pgtype.Timestamptz // not Valid if the store did not learn it
}

// backendOf returns the backend of pc.
func (s *Store) backendOf(pc *pgconn.PgConn) backendID {
	b := backendID{pid: pc.PID()}
	if v, ok := s.backends.Load(pc); ok {
		b.start = v.(pgtype.Timestamptz)
	}
	return b
}

// commitOutcome finds out how the transaction with commit marker token
// ended, whose connection (to backend pid) was lost, with lost, after its
// COMMIT was sent. It asks on another connection (see probeMark):
// committed, and confirmed by the server's synchronous standbys if it has
// any, it returns the transaction's id and nil, as the commit would have;
// not committed, an ordinary error (nothing was written, and nothing of it
// will be). The connection may reach another server than the one that ran
// the transaction (a multi-host URL reaches a standby promoted in its
// place): the marker tells that server's history, which is the store's
// from then on.
//
// If the server cannot be asked within commitCheckTime (it is down, or
// only a standby answers, or the standbys do not confirm), the error
// wraps kv.ErrCommitUnknown.
func (s *Store) commitOutcome(token []byte, lostOn backendID, lost error) (uint64, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.commitCheckTime)
	defer cancel()
	pause := time.Millisecond
	for {
		committed, id, err := s.probeMark(ctx, token, lostOn)
		switch {
		case err != nil:
		case committed:
			return id, nil
		default:
			return 0, fmt.Errorf("postgres: commit: the connection was lost (%w), and the server that takes the writes does not hold the transaction: nothing of it was written", lost)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("postgres: commit: %w: the connection was lost after the COMMIT was sent (%w), and the server could not say how the transaction ended: %v",
				kv.ErrCommitUnknown, lost, err)
		case <-time.After(pause):
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// Statements of probeMark.
//
// A server with synchronous standbys makes a commit visible only once
// they confirm it, and a wait for them that is interrupted (pgx cancels
// the statement of a connection it loses, and endBlockerSQL ends the
// backend) leaves the commit on that server alone, visible from then on.
// syncSQL makes a commit of its own, later in the WAL, which waits for the
// standbys as the store's commits do: once it returns, the standbys hold
// the transaction too, as they would if the COMMIT had answered. (A commit
// that wrote no WAL of its own does not wait, so it writes a logical
// decoding message, which any role may, at any wal_level.)
const (
	recoverySQL     = "SELECT pg_is_in_recovery()"
	backendStartSQL = "SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
	endBackendSQL   = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1::int AND backend_start = $2"
	endBlockerSQL   = "SELECT pg_terminate_backend(p) FROM unnest(pg_blocking_pids($1::int)) AS p WHERE p = $2::int"
	syncSQL         = "SELECT pg_logical_emit_message(true, 'storh: commit outcome', '')"
)

// probeInterval is how often probeMark looks whether its question waits
// for the lost transaction's backend.
const probeInterval = 20 * time.Millisecond

// probeMark asks whether the transaction with marker token committed, by
// inserting the token (see marksSQL).
//
// The lost transaction's backend may not have noticed that its client is
// gone: it waits for the rest of its batch, or for a lock, or for the
// synchronous standbys, and holds its locks meanwhile. probeMark ends it
// first (a role may end its own connections), named by pid and start so
// that no connection given the pid since is touched. One the store could
// not name so is ended if the insert waits for it (pg_blocking_pids names
// the very backend that holds the marker); if it only waits for a lock,
// the insert goes in without it, and the marker keeps it from committing
// once it goes on. A standby is not asked: it takes no insert, and its
// history may be behind.
func (s *Store) probeMark(ctx context.Context, token []byte, lostOn backendID) (committed bool, id uint64, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, 0, err
	}
	defer conn.Release()
	var standby bool
	if err := conn.QueryRow(ctx, recoverySQL).Scan(&standby); err != nil {
		return false, 0, err
	}
	if standby {
		return false, 0, errors.New("the server that answers is a standby")
	}
	if lostOn.start.Valid {
		if _, err := conn.Exec(ctx, endBackendSQL, int64(lostOn.pid), lostOn.start); err != nil {
			return false, 0, err
		}
	}
	asking := int64(conn.Conn().PgConn().PID())
	type answer struct {
		tag pgconn.CommandTag
		err error
	}
	done := make(chan answer, 1)
	go func() {
		tag, err := conn.Exec(ctx, s.marks.probe, token)
		done <- answer{tag, err}
	}()
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	var a answer
wait:
	for {
		select {
		case a = <-done:
			break wait
		case <-tick.C:
			_, _ = s.pool.Exec(ctx, endBlockerSQL, asking, int64(lostOn.pid))
		}
	}
	if a.err != nil {
		return false, 0, a.err
	}
	if a.tag.RowsAffected() == 1 {
		return false, 0, nil
	}
	if err := scanXid(conn.QueryRow(ctx, s.marks.xid, token), &id); err != nil {
		return false, 0, err
	}
	if _, err := conn.Exec(ctx, syncSQL); err != nil {
		return false, 0, fmt.Errorf("committed, and waiting for the synchronous standbys to confirm it: %w", err)
	}
	return true, id, nil
}
