package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/storhdb/storh-go/storh/internal/connstr"
	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/kv"
)

// Limits of what a bucket stores. A key is a btree entry in its table's
// primary key, whose entries PostgreSQL caps at about a third of an 8 KiB
// page (2704 bytes with their headers); a value is a bytea, capped at
// 1 GiB by PostgreSQL and lower here so a transaction's flush stays well
// within one protocol message.
const (
	MaxKeySize   = 2600
	MaxValueSize = 256 << 20
)

// schemaLock is the pg_advisory_xact_lock key held while Open creates the
// tables, so two processes opening a new database at once do not race on
// CREATE TABLE IF NOT EXISTS (which is not safe against itself).
const schemaLock = 0x73746f72685f7067 // "storh_pg"

// Store is a kv.Store in a PostgreSQL schema. It is safe for concurrent
// use; each transaction holds one pooled connection until it ends.
type Store struct {
	pool   *pgxpool.Pool
	ctx    context.Context
	schema string
	closed atomic.Bool
	origin uint64 // identifies this Store in its notices

	// Statements of the registry and of each bucket's table. Bucket ids
	// come from an identity column and are never reused, so an id's
	// statements stay right for the life of the store.
	reg    registrySQL
	marks  marksSQL
	tables sync.Map // int64 → *tableSQL

	// trees holds the registry subtree of each top-level bucket as a
	// read-only transaction last found it, so that the next read of the
	// bucket need not look it up before reading: it checks the entry in
	// the round trip of its first read (see tx.trip).
	trees     sync.Map // string → *tree
	treeCount atomic.Int64

	// rowBytes is the size of a key and value as the last cursor page
	// found them on average, to size the next page's arena.
	rowBytes atomic.Int64

	// commitCheckTime bounds the questions of a commit whose connection
	// was lost (see commitOutcome). lastPrune is when this Store last
	// deleted old commit markers (UnixNano; see pruneMarks).
	commitCheckTime time.Duration
	lastPrune       atomic.Int64
	// backends holds, per connection of the pool, its backend's start
	// (pgtype.Timestamptz by *pgconn.PgConn): with the pid, what names
	// that backend and no later one, so that a commit whose connection
	// was lost can end it (see endLost).
	backends sync.Map

	// readOnly: opened WithReadOnly, so a writable Begin fails. replaying:
	// read-only on a hot standby, whose commits no notification
	// announces (see Replaying).
	readOnly, replaying bool

	// standby is WithReadURL's pool, nil without it. A read-only
	// transaction goes there while the standby has replayed floor, the
	// primary's WAL position after everything the store knows committed
	// (its own commits, those its listener heard of); replayed is how far
	// the standby was last seen to have replayed. floorLost counts the
	// commits whose position was lost with their connection: while there
	// are any, the floor is unknown (see askFloor).
	standby   *pgxpool.Pool
	floor     atomic.Uint64
	replayed  atomic.Uint64
	floorLost atomic.Int64

	// seen holds, per sequence, the greatest number and floor this
	// store's commits saw (*atomicSeen by name), so that a commit asks
	// for a trim only when one is due (see queueSequences); trims counts
	// the trims its commits asked for.
	seen  sync.Map
	trims atomic.Int64
}

// tree is a cached registry subtree: the top-level bucket's id and
// generation, which every change to the subtree raises, and its rows.
type tree struct {
	id, gen int64
	rows    []reg
}

// reg is a registry row.
type reg struct {
	id, parent int64
	name       []byte
}

// maxTrees bounds the cached subtrees: a store with more top-level
// buckets than this looks the others up as it did before.
const maxTrees = 4096

func (s *Store) cacheTree(name string, t *tree) {
	if _, loaded := s.trees.Swap(name, t); !loaded && s.treeCount.Add(1) > maxTrees {
		s.forgetTree(name)
	}
}

func (s *Store) forgetTree(name string) {
	if _, loaded := s.trees.LoadAndDelete(name); loaded {
		s.treeCount.Add(-1)
	}
}

var _ kv.Store = (*Store)(nil)

// Open connects to the database at url (a libpq-style URL or keyword
// string, as pgx parses it) and creates the store's tables if they are
// missing. They go in the schema the connection's search_path selects
// first (set it in the URL, e.g. options=-csearch_path%3Dmyschema); that
// schema must exist. Its errors show no password of url.
//
// A server in recovery (a hot standby) takes no writes: Open of one fails
// with an error wrapping storh.ErrReadOnly, unless WithReadOnly opens the
// store there only to read it. WithReadURL sends reads to a standby.
//
// Open refuses, with an error wrapping storh.ErrUnsupported and before it
// creates anything, a server whose version() says it is CockroachDB or
// YugabyteDB: they speak the protocol, not all of the semantics storh
// needs (see docs/postgres.md).
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", maskParseError(err))
	}
	return openConfig(ctx, cfg, o)
}

// maskParseError returns pgx's error about a connection string it cannot
// parse with the string's passwords masked by connstr. pgx masks them in
// its message as best it can, which misses some forms (password = 'x',
// with spaces), and keeps the string whole in the error.
func maskParseError(err error) error {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return err
	}
	masked := *pe
	masked.ConnString = connstr.Redact(pe.ConnString)
	return &masked
}

// openConfig opens a store with a pool configuration (tests add a tracer).
func openConfig(ctx context.Context, cfg *pgxpool.Config, o options) (*Store, error) {
	setRuntime(cfg, o.readOnly)
	s := &Store{ctx: context.Background(), origin: rand.Uint64(), commitCheckTime: defaultCommitCheckTime, readOnly: o.readOnly}
	if !o.readOnly {
		s.knowBackends(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s.pool = pool
	// The first prune of commit markers waits as the later ones do, so that
	// a short-lived store does not delete on every open.
	s.lastPrune.Store(time.Now().UnixNano())
	if o.readOnly {
		err = s.initReadOnly(ctx)
	} else {
		err = s.init(ctx)
	}
	if err == nil && o.readURL != "" {
		err = s.openStandby(ctx, o.readURL)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// init finds the schema and creates the registry and the top level's
// table, under the advisory lock.
func (s *Store) init(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: connecting: %w", err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer tx.Rollback(ctx)
	var schema *string
	var version string
	var recovering bool
	if err := tx.QueryRow(ctx, "SELECT current_schema(), version(), pg_is_in_recovery()").Scan(&schema, &version, &recovering); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := supported(version); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLock)); err != nil {
		return fmt.Errorf("postgres: locking the schema: %w", err)
	}
	if recovering {
		return fmt.Errorf("postgres: the server is a hot standby (in recovery), which takes no writes: %w", errs.ErrReadOnly)
	}
	if schema == nil {
		var path string
		_ = tx.QueryRow(ctx, "SHOW search_path").Scan(&path)
		return fmt.Errorf("postgres: no schema to keep the store in: search_path %q names none that exists", path)
	}
	s.schema = *schema
	s.reg = newRegistrySQL(s.schema)
	s.marks = newMarksSQL(s.schema)
	root := s.table(0)
	for _, q := range []string{s.reg.create, "CREATE TABLE IF NOT EXISTS " + root.name + columns, s.marks.create} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("postgres: creating tables in schema %q: %w", s.schema, err)
		}
	}
	// A store made before the registry had generations gains the column.
	// ALTER TABLE would lock the registry against every reader even when
	// the column is there, so it runs only when it is missing.
	var hasGen bool
	if err := tx.QueryRow(ctx, s.reg.hasGen).Scan(&hasGen); err != nil {
		return fmt.Errorf("postgres: reading the registry of schema %q: %w", s.schema, err)
	}
	if !hasGen {
		if _, err := tx.Exec(ctx, s.reg.addGen); err != nil {
			return fmt.Errorf("postgres: adding generations to the registry of schema %q: %w", s.schema, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: creating tables in schema %q: %w", s.schema, err)
	}
	return nil
}

// supported returns why storh cannot keep a store on the server whose
// version() is version, or nil. Engines that speak PostgreSQL's protocol
// without its semantics would fail later, some of them silently (a
// collection's tables made outside the transaction that registers them),
// so they are refused before anything is created; docs/postgres.md says
// what each lacks.
func supported(version string) error {
	var engine, lacks string
	switch {
	case strings.Contains(version, "CockroachDB"):
		engine, lacks = "CockroachDB", "LISTEN/NOTIFY, PostgreSQL transaction ids, and CREATE TABLE inside a writing transaction"
	case strings.Contains(version, "-YB-"):
		engine, lacks = "YugabyteDB", "PostgreSQL transaction ids, ordered primary keys by default, and (without early-access flags) READ COMMITTED and CREATE TABLE inside a transaction"
	default:
		return nil
	}
	return fmt.Errorf("postgres: the server is %s, which storh does not run on (it lacks %s; docs/postgres.md lists what each engine supports): %w",
		engine, lacks, errs.ErrUnsupported)
}

// Begin starts a transaction on a connection of its own. A writable one is
// READ COMMITTED and locks each top-level bucket it uses, a read-only one
// REPEATABLE READ READ ONLY (see the package documentation). Nothing is
// sent yet: the BEGIN goes with the first read, in its round trip.
func (s *Store) Begin(writable bool) (kv.Tx, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("postgres: begin: %w", kv.ErrTxClosed)
	}
	if writable && s.readOnly {
		return nil, fmt.Errorf("postgres: begin: %w: the store was opened read-only", kv.ErrTxNotWritable)
	}
	var conn *pgxpool.Conn
	var err error
	if writable {
		conn, err = s.pool.Acquire(s.ctx)
	} else {
		conn, err = s.readConn()
	}
	if err != nil {
		if s.closed.Load() {
			return nil, fmt.Errorf("postgres: begin: %w (%w)", kv.ErrTxClosed, err)
		}
		return nil, fmt.Errorf("postgres: begin: %w", err)
	}
	t := &tx{s: s, ctx: s.ctx, conn: conn, writable: writable}
	t.root = &bucket{tx: t, id: 0, sql: s.table(0), children: map[string]*bucket{}}
	return t, nil
}

// Close closes the connection pool, waiting for connections in use to be
// returned. Transactions must have ended. Closing twice is harmless.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.pool.Close()
	if s.standby != nil {
		s.standby.Close()
	}
	return nil
}

// lockKey is the advisory lock key of the top-level bucket name: a hash of
// the schema and the name, since advisory locks are shared by every
// schema of a database. Two names with one key (a chance of 2⁻⁶⁴ per
// pair) only make their writers take turns.
func (s *Store) lockKey(name []byte) int64 {
	h := fnv.New64a()
	h.Write([]byte(s.schema))
	h.Write([]byte{0})
	h.Write(name)
	return int64(h.Sum64())
}

// registrySQL holds the statements on the registry table, storh_buckets.
// A top-level bucket's row carries a generation that every creation and
// deletion of a bucket under it raises, in its transaction: a reader that
// finds the id and generation it cached knows the subtree it cached.
type registrySQL struct {
	create  string
	hasGen  string // whether the registry has its generation column
	addGen  string // adds it, in a store made before it
	subtree string // a child of $1 named $2 and everything under it, with its generation
	check   string // id and generation of the top-level bucket $1
	assert  string // fails with staleCode unless top-level bucket $1 has id $2 and generation $3
	// A writer's holds of top-level bucket $1 (see tx.queueHold): lock
	// key $3 and the registry row, shared or alone, with the watch
	// question of key $2; checked ones fail with staleCode unless the row
	// has id $4 and generation $5.
	hold, holdShared               string
	holdChecked, holdCheckedShared string
	holdAlone                      string // turns a shared hold of $1 (lock key $2) exclusive
	bump                           string // raises the generation of top-level bucket $1
	delete                         string // registry rows of ids $1
}

func newRegistrySQL(schema string) registrySQL {
	r := pgx.Identifier{schema, "storh_buckets"}.Sanitize()
	const checked = " AND id = $4 AND gen = $5"
	return registrySQL{
		create: "CREATE TABLE IF NOT EXISTS " + r + ` (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	parent bigint NOT NULL,
	name bytea NOT NULL,
	gen bigint NOT NULL DEFAULT 0,
	UNIQUE (parent, name))`,
		hasGen: "SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = '" + strings.ReplaceAll(r, "'", "''") + "'::regclass" +
			" AND attname = 'gen' AND NOT attisdropped)",
		addGen: "ALTER TABLE " + r + " ADD COLUMN IF NOT EXISTS gen bigint NOT NULL DEFAULT 0",
		subtree: "WITH RECURSIVE s AS (SELECT id, parent, name, gen FROM " + r + " WHERE parent = $1 AND name = $2" +
			" UNION ALL SELECT c.id, c.parent, c.name, c.gen FROM " + r + " c JOIN s ON c.parent = s.id)" +
			" SELECT id, parent, name, gen FROM s",
		check:             "SELECT id, gen FROM " + r + " WHERE parent = 0 AND name = $1",
		assert:            "SELECT 1 / (SELECT count(*) FROM " + r + " WHERE parent = 0 AND name = $1 AND id = $2 AND gen = $3)",
		bump:              "UPDATE " + r + " SET gen = gen + 1 WHERE id = $1",
		hold:              holdSQL(r, "pg_advisory_xact_lock", "FOR NO KEY UPDATE", ""),
		holdShared:        holdSQL(r, "pg_advisory_xact_lock_shared", "FOR SHARE", ""),
		holdChecked:       holdSQL(r, "pg_advisory_xact_lock", "FOR NO KEY UPDATE", checked),
		holdCheckedShared: holdSQL(r, "pg_advisory_xact_lock_shared", "FOR SHARE", checked),
		holdAlone: "SELECT FROM " + r + " WHERE (SELECT pg_advisory_xact_lock($2)) IS NOT NULL" +
			" AND parent = 0 AND name = $1 FOR NO KEY UPDATE",
		delete: "DELETE FROM " + r + " WHERE id = ANY($1::bigint[])",
	}
}

// holdSQL is a hold of top-level bucket $1 (see tx.queueHold): the
// advisory lock of key $3 taken by lock, then its registry row locked in
// mode, then the watch question of key $2. The lock is a one-time filter,
// which the executor evaluates before the scan under the row lock starts.
// With a check (more conditions on the row, from $4), a row that does not
// meet it fails the statement with staleCode: 1 / 0.
func holdSQL(registry, lock, mode, check string) string {
	n := "count(*)"
	if check != "" {
		n = "1 / count(*)"
	}
	return "SELECT " + n + ", pg_try_advisory_xact_lock($2) FROM (SELECT FROM " + registry +
		" WHERE (SELECT " + lock + "($3)) IS NOT NULL AND parent = 0 AND name = $1" + check + " " + mode + ") AS h"
}

// columns are every bucket table's: a key, and a value that is NULL in
// the row of a nested bucket's name.
const columns = " (k bytea PRIMARY KEY, v bytea)"

// tableSQL holds the statements on one bucket's table.
type tableSQL struct {
	name                    string // quoted, schema-qualified
	create                  string
	get                     string
	first, last, ge, gt, lt string
	ranged                  rangedSQL // the same within bounds $1 ≤ k ≤ $2
	put1, putN, ins1, insN  string
	addN                    string
	add1                    [maxAddInts]string // add1[i]: one key's add of i+1 integers
	del1, delN              string
	lockFrom, lockRange     string
	lockKeys, tryKeys       string
	marker                  string
}

// rangedSQL are a cursor's statements within a range (see cursor.Range).
type rangedSQL struct {
	first, last, ge, gt, lt string
}

// table returns the statements of bucket id's table.
func (s *Store) table(id int64) *tableSQL {
	if t, ok := s.tables.Load(id); ok {
		return t.(*tableSQL)
	}
	n := pgx.Identifier{s.schema, "storh_b" + strconv.FormatInt(id, 10)}.Sanitize()
	reg := pgx.Identifier{s.schema, "storh_buckets"}.Sanitize()
	const sel = "SELECT k, v FROM "
	t := &tableSQL{
		name:   n,
		create: "CREATE TABLE " + n + columns,
		get:    "SELECT v FROM " + n + " WHERE k = $1",
		first:  sel + n + " ORDER BY k LIMIT $1",
		last:   sel + n + " ORDER BY k DESC LIMIT $1",
		ge:     sel + n + " WHERE k >= $1 ORDER BY k LIMIT $2",
		gt:     sel + n + " WHERE k > $1 ORDER BY k LIMIT $2",
		lt:     sel + n + " WHERE k < $1 ORDER BY k DESC LIMIT $2",
		ranged: rangedSQL{
			first: sel + n + " WHERE k >= $1 AND k <= $2 ORDER BY k LIMIT $3",
			last:  sel + n + " WHERE k >= $1 AND k <= $2 ORDER BY k DESC LIMIT $3",
			ge:    sel + n + " WHERE k >= $1 AND k <= $2 AND k >= $3 ORDER BY k LIMIT $4",
			gt:    sel + n + " WHERE k >= $1 AND k <= $2 AND k > $3 ORDER BY k LIMIT $4",
			lt:    sel + n + " WHERE k >= $1 AND k <= $2 AND k < $3 ORDER BY k DESC LIMIT $4",
		},
		put1: "INSERT INTO " + n + " (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
		putN: "INSERT INTO " + n + " (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[])" +
			" ON CONFLICT (k) DO UPDATE SET v = excluded.v",
		ins1: "INSERT INTO " + n + " (k, v) VALUES ($1, $2)",
		insN: "INSERT INTO " + n + " (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[])",
		// addN adds, 8 bytes at a time, big-endian and signed, the
		// integers of each value to the row's (see kv.Adder).
		addN: "INSERT INTO " + n + " AS o (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[])" +
			" ON CONFLICT (k) DO UPDATE SET v = CASE WHEN length(o.v) = length(excluded.v) THEN" +
			" (SELECT string_agg(int8send(" + beInt("o.v") + " + " + beInt("excluded.v") + "), ''::bytea ORDER BY i)" +
			" FROM generate_series(1, length(excluded.v), 8) AS i) ELSE excluded.v END",
		lockFrom:  sel + n + " WHERE k >= $1 ORDER BY k LIMIT $2 FOR UPDATE SKIP LOCKED",
		lockRange: sel + n + " WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3 FOR UPDATE SKIP LOCKED",
		lockKeys:  sel + n + " WHERE k = ANY($1::bytea[]) ORDER BY k FOR UPDATE",
		tryKeys:   sel + n + " WHERE k = ANY($1::bytea[]) ORDER BY k FOR UPDATE SKIP LOCKED",
		del1:      "DELETE FROM " + n + " WHERE k = $1",
		delN:      "DELETE FROM " + n + " WHERE k = ANY($1::bytea[])",
		// marker creates the nested bucket $1 with parent id $2: its
		// marker row here and its registry row, in one statement. The id
		// is NULL if the key was taken; the second column then tells a
		// bucket's key (true) from a value's (false), from the snapshot.
		marker: "WITH m AS (INSERT INTO " + n + " (k, v) VALUES ($1::bytea, NULL) ON CONFLICT (k) DO NOTHING RETURNING k)," +
			" r AS (INSERT INTO " + reg + " (parent, name) SELECT $2::bigint, k FROM m RETURNING id)" +
			" SELECT (SELECT id FROM r), (SELECT v IS NULL FROM " + n + " WHERE k = $1::bytea)",
	}
	for i := range t.add1 {
		t.add1[i] = addOneSQL(n, i+1)
	}
	if prev, loaded := s.tables.LoadOrStore(id, t); loaded {
		return prev.(*tableSQL)
	}
	return t
}

// staleCode is the SQLSTATE of a writer's failed check of a cached
// subtree: division_by_zero, which no other statement of the store can
// raise.
const staleCode = "22012"

// beInt is the SQL of the 8-byte big-endian signed integer at offset i
// (from 1) of the bytea col.
func beInt(col string) string { return beIntAt(col, "i") }

func beIntAt(col, offset string) string {
	return "('x' || encode(substring(" + col + " FROM " + offset + " FOR 8), 'hex'))::bit(64)::bigint"
}

// maxAddInts is the most integers a delta may hold for an add of one key
// to go as addOneSQL's statement: the engine's counters hold one, two or
// four.
const maxAddInts = 4

// addOneSQL is the add of one key's delta of n integers to table's row,
// its integers summed one by one: without addN's aggregate over a series,
// which takes PostgreSQL about twice as long.
func addOneSQL(table string, n int) string {
	sum := ""
	for i := range n {
		if i > 0 {
			sum += " || "
		}
		at := strconv.Itoa(1 + 8*i)
		sum += "int8send(" + beIntAt("o.v", at) + " + " + beIntAt("excluded.v", at) + ")"
	}
	return "INSERT INTO " + table + " AS o (k, v) VALUES ($1, $2)" +
		" ON CONFLICT (k) DO UPDATE SET v = CASE WHEN length(o.v) = " + strconv.Itoa(8*n) + " THEN " + sum + " ELSE excluded.v END"
}

// dbErr wraps an error from PostgreSQL with op, and with the contract's
// sentinel where one applies. Connection and context errors stay in the
// chain as they are.
func dbErr(op string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return fmt.Errorf("postgres: %s: %w (%w)", op, kv.ErrConflict, err)
		case "23505": // unique_violation: a key or a bucket a concurrent transaction inserted first
			return fmt.Errorf("postgres: %s: %w (%w)", op, kv.ErrConflict, err)
		case "42P01": // undefined_table: a bucket a concurrent transaction deleted
			return fmt.Errorf("postgres: %s: %w (%w)", op, kv.ErrConflict, err)
		case staleCode: // a writer's check of a cached subtree (registrySQL.assert)
			return fmt.Errorf("postgres: %s: %w: another store made or deleted buckets in a top-level bucket this transaction used as cached (%w)", op, kv.ErrConflict, err)
		case "25006": // read_only_sql_transaction
			return fmt.Errorf("postgres: %s: %w (%w)", op, kv.ErrTxNotWritable, err)
		case "54000": // program_limit_exceeded: an index row too large
			return fmt.Errorf("postgres: %s: %w (%w)", op, kv.ErrKeyTooLarge, err)
		}
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}
