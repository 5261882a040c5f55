package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/kv"
)

// Option configures Open; WithReadOnly and WithReadURL make them.
type Option func(*options)

type options struct {
	readOnly bool
	readURL  string
}

// WithReadOnly opens a store that exists without creating or changing
// anything: no table, no column, no lock, no write. It is how to open a
// hot standby, which takes no writes. Open fails with an error wrapping
// storh.ErrNotFound, naming what is missing, when the search_path names no
// schema that exists or the schema holds no store (or one made by a
// storh too old to read, whose registry lacks a column). Every writable
// Begin fails with an error wrapping kv.ErrTxNotWritable, which storh
// reports as ErrReadOnly; the connections also run with
// default_transaction_read_only, so nothing of the store can write.
func WithReadOnly() Option { return func(o *options) { o.readOnly = true } }

// WithReadURL sends the store's read-only transactions to the hot standby
// at url (a standby of the server Open's URL names, in the same database)
// whenever it has replayed every commit the store knows of: its own
// commits, and, for Watch, those announced to its listener and those
// before each Watch. Until then they go to the primary, so a read after a
// write through the same store sees that write. Writable transactions,
// the reads inside them, and the listener are the primary's. A read that
// cannot reach the standby goes to the primary too. Open fails when url
// does not parse, names a server that is not in recovery, or another
// database than the primary's (errors wrapping storh.ErrInvalidOption).
func WithReadURL(url string) Option { return func(o *options) { o.readURL = url } }

// standbySQL asks the standby how far it has replayed; NULL once it is no
// longer in recovery (promoted), when it follows the primary no more.
const standbySQL = "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()::text END"

// insertSQL asks the primary where its WAL ends: past every commit made
// before it, flushed or not (a commit under synchronous_commit=off may
// not be flushed yet, and a standby replays it once it is).
const insertSQL = "SELECT pg_current_wal_insert_lsn()::text"

// positionSQL is Position's: a standby's replay, or a primary's WAL end.
const positionSQL = "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text"

// initReadOnly finds the store in the first schema of the search_path
// that exists, creating nothing and taking no lock.
func (s *Store) initReadOnly(ctx context.Context) error {
	var schema *string
	var path, version string
	var recovering bool
	if err := s.pool.QueryRow(ctx, "SELECT current_schema(), current_setting('search_path'), version(), pg_is_in_recovery()").Scan(&schema, &path, &version, &recovering); err != nil {
		return fmt.Errorf("postgres: connecting: %w", err)
	}
	if err := supported(version); err != nil {
		return err
	}
	if schema == nil {
		return fmt.Errorf("postgres: no schema to read the store from: search_path %q names none that exists: %w", path, errs.ErrNotFound)
	}
	s.schema, s.replaying = *schema, recovering
	s.reg = newRegistrySQL(s.schema)
	registry := pgx.Identifier{s.schema, "storh_buckets"}.Sanitize()
	var hasRegistry, hasTop bool
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL", registry, s.table(0).name).Scan(&hasRegistry, &hasTop); err != nil {
		return fmt.Errorf("postgres: reading the tables of schema %q: %w", s.schema, err)
	}
	missing := ""
	switch {
	case !hasRegistry:
		missing = "its registry, table storh_buckets"
	case !hasTop:
		missing = "its top level, table storh_b0"
	}
	if missing == "" {
		var hasGen bool
		if err := s.pool.QueryRow(ctx, s.reg.hasGen).Scan(&hasGen); err != nil {
			return fmt.Errorf("postgres: reading the registry of schema %q: %w", s.schema, err)
		}
		if !hasGen {
			missing = "the gen column of its registry (the store was made by an earlier storh, and a writable open adds it)"
		}
	}
	if missing != "" {
		return fmt.Errorf("postgres: schema %q holds no store to read: %s is missing: %w", s.schema, missing, errs.ErrNotFound)
	}
	return nil
}

// openStandby opens WithReadURL's pool and checks that it is a standby of
// the primary's database. The floor starts where the primary's WAL ends.
func (s *Store) openStandby(ctx context.Context, url string) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("postgres: the read URL: %s: %w", fmt.Sprintf(format, args...), errs.ErrInvalidOption)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return invalid("%v", maskParseError(err))
	}
	setRuntime(cfg, true)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return invalid("%v", err)
	}
	var recovering bool
	var db, primaryDB string
	err = pool.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_database()").Scan(&recovering, &db)
	if err == nil {
		err = s.pool.QueryRow(ctx, "SELECT current_database()").Scan(&primaryDB)
	}
	switch {
	case err != nil:
		pool.Close()
		return fmt.Errorf("postgres: connecting to the standby: %w", err)
	case !recovering:
		pool.Close()
		return invalid("the server is not a hot standby (pg_is_in_recovery() is false)")
	case db != primaryDB:
		pool.Close()
		return invalid("it names database %q, the primary's URL %q", db, primaryDB)
	}
	// Reads see at least what the primary held at Open: the tables a new
	// store's Open just made, first of all.
	var pos uint64
	if err := scanLSN(s.pool.QueryRow(ctx, positionSQL), &pos); err != nil {
		pool.Close()
		return fmt.Errorf("postgres: asking the primary for its WAL position: %w", err)
	}
	raise(&s.floor, pos)
	s.standby = pool
	return nil
}

// setRuntime sets what every connection of the store runs with. Every
// statement of the store is a primary-key lookup or range scan whose plan
// does not depend on its parameters (TestExplain checks the generic
// plans). Left to choose, PostgreSQL plans a range scan with a LIMIT
// parameter afresh at every execution, since its generic plan guesses a
// larger LIMIT and looks dearer: a tenth of a page read. A read-only
// store's connections refuse to write, whatever a bug might send.
func setRuntime(cfg *pgxpool.Config, readOnly bool) {
	params := cfg.ConnConfig.RuntimeParams
	if _, set := params["plan_cache_mode"]; !set {
		params["plan_cache_mode"] = "force_generic_plan"
	}
	if readOnly {
		params["default_transaction_read_only"] = "on"
	}
	// A writer's transaction sent in one batch runs at the session's
	// level (see tx.Commit); the others say theirs in their BEGIN.
	params["default_transaction_isolation"] = "read committed"
}

// readConn acquires the connection of a read-only transaction: one of the
// standby's while the standby has replayed the floor, else the primary's.
func (s *Store) readConn() (*pgxpool.Conn, error) {
	if s.standby != nil && (s.floorLost.Load() == 0 || s.askFloor()) {
		if conn := s.standbyConn(s.floor.Load()); conn != nil {
			return conn, nil
		}
	}
	return s.pool.Acquire(s.ctx)
}

// standbyConn returns a connection to the standby if the standby has
// replayed floor, else nil. It asks the standby how far it has replayed
// only when what it was last seen to have replayed is below floor, so
// reads cost nothing more while the store does not write.
func (s *Store) standbyConn(floor uint64) *pgxpool.Conn {
	conn, err := s.standby.Acquire(s.ctx)
	if err != nil {
		return nil
	}
	if floor <= s.replayed.Load() {
		return conn
	}
	var text *string
	if err := conn.QueryRow(s.ctx, standbySQL).Scan(&text); err == nil && text != nil {
		if pos, err := parseLSN(*text); err == nil {
			raise(&s.replayed, pos)
			if floor <= pos {
				return conn
			}
		}
	}
	conn.Release()
	return nil
}

// committed raises the floor to the WAL position of a commit that went
// through the store, asked in the commit's round trip (pos, from
// queueCommitPosition; nil when reads never leave the primary). A
// position lost with the connection (0: the commit was found committed by
// asking) sends reads to the primary until the primary is asked where its
// WAL ends: every commit before is behind that.
func (s *Store) committed(pos *uint64) {
	switch {
	case pos == nil:
	case *pos == 0:
		s.floorLost.Add(1)
	default:
		raise(&s.floor, *pos)
	}
}

// queueCommitPosition queues, after a COMMIT, the question of where the
// primary's WAL then ends, for a store whose reads may go to a standby,
// and returns where the answer lands: 0 until it does. It runs in the
// COMMIT's round trip, after it, outside the transaction; it cannot fail
// where the COMMIT succeeded (only a server in recovery refuses it, and
// that refused the transaction's id, asked in its first round trip).
// Without a standby it queues nothing and returns nil.
func (s *Store) queueCommitPosition(b *pgx.Batch) *uint64 {
	if s.standby == nil {
		return nil
	}
	pos := new(uint64)
	b.Queue(insertSQL).QueryRow(func(row pgx.Row) error { return scanLSN(row, pos) })
	return pos
}

// askFloor raises the floor to where the primary's WAL ends now, after
// commits whose positions were lost, and reports whether that covers them
// all: if the primary cannot say, or another position was lost meanwhile,
// reads stay on it.
func (s *Store) askFloor() bool {
	lost := s.floorLost.Load()
	var pos uint64
	if err := scanLSN(s.pool.QueryRow(s.ctx, insertSQL), &pos); err != nil {
		return false
	}
	raise(&s.floor, pos)
	return s.floorLost.CompareAndSwap(lost, 0)
}

// raiseFloorOn raises the floor to where the primary's WAL ends, asked on
// conn (the listener's), for a store whose reads may go to a standby.
func (s *Store) raiseFloorOn(ctx context.Context, conn *pgx.Conn) error {
	if s.standby == nil {
		return nil
	}
	var pos uint64
	if err := scanLSN(conn.QueryRow(ctx, insertSQL), &pos); err != nil {
		return err
	}
	raise(&s.floor, pos)
	return nil
}

// Replaying reports whether the store reads a hot standby and only it:
// it was opened WithReadOnly on a server in recovery, where LISTEN is
// refused and notifications never arrive (kv.Replica).
func (s *Store) Replaying() bool { return s.replaying }

// Position returns how far the store's server has replayed the primary's
// WAL, or, once it is not in recovery, where its own WAL ends (kv.Replica).
func (s *Store) Position() (uint64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("postgres: position: %w", kv.ErrTxClosed)
	}
	var pos uint64
	if err := scanLSN(s.pool.QueryRow(s.ctx, positionSQL), &pos); err != nil {
		return 0, dbErr("position", err)
	}
	return pos, nil
}

var _ kv.Replica = (*Store)(nil)

// raise sets a to v if v is larger.
func raise(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// scanLSN reads a pg_lsn's text into pos.
func scanLSN(row pgx.Row, pos *uint64) error {
	var text string
	if err := row.Scan(&text); err != nil {
		return err
	}
	v, err := parseLSN(text)
	if err == nil {
		*pos = v
	}
	return err
}

// parseLSN reads a pg_lsn's text form, two hexadecimal halves: 16/B374D848.
func parseLSN(text string) (uint64, error) {
	hi, lo, ok := strings.Cut(text, "/")
	h, herr := strconv.ParseUint(hi, 16, 32)
	l, lerr := strconv.ParseUint(lo, 16, 32)
	if !ok || herr != nil || lerr != nil {
		return 0, fmt.Errorf("postgres: WAL position %q is not a pg_lsn", text)
	}
	return h<<32 | l, nil
}
