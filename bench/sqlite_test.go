package bench

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "github.com/mattn/go-sqlite3"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// SQLite as a peer (issue 16), through github.com/mattn/go-sqlite3 (cgo),
// doing the same work on the same records as the raw bbolt and bolthold
// peers, in the same run.
//
// Settings, the same for every benchmark (sqliteDSN):
//
//   - journal_mode=WAL: readers do not block the writer, and a commit
//     appends to the write-ahead log and fsyncs it once;
//   - synchronous=FULL: every commit is durable when it returns, as a
//     storh Put is (in WAL mode NORMAL would skip the commit's fsync);
//   - busy_timeout=10000: SQLite allows one writer at a time; a connection
//     that finds the write lock taken retries for up to 10 s instead of
//     failing with SQLITE_BUSY.
//
// The engine records (BenchmarkPutDurable … BenchmarkWhereEqual) live in
// `t (id BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID`: the 16-byte UUIDv7 and
// the msgpack.Marshal of the same map the raw bbolt peer writes, so that a
// read is one B-tree seek on the id, as it is in bbolt. The unindexed
// filter reads `tj`, a JSON copy of the same records in the same file,
// through json_extract. The query fixture's records (BenchmarkQueryEq,
// BenchmarkQueryRange, BenchmarkQueryCount) are JSON documents in
// `q (id BLOB PRIMARY KEY, doc TEXT) WITHOUT ROWID` with an expression
// index on json_extract of each field storh indexes (status, user, score),
// decoded with encoding/json into qRecord.
//
// Reads share one *sql.DB per fixture with database/sql's default pool.
// Fixture files live in the process's fixture directory (tempDir) and are
// built once per size, outside the timed loops; the write benchmarks open
// a fresh file in b.TempDir().

const sqliteSchema = `CREATE TABLE IF NOT EXISTS t (id BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID`

// sqliteDSN is the data source name of every SQLite benchmark.
func sqliteDSN(path string) string {
	return "file:" + path + "?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000"
}

// sqliteOpen opens path with sqliteDSN and creates the schema.
func sqliteOpen(path string, schema ...string) (*sql.DB, error) {
	db, err := sql.Open("sqlite3", sqliteDSN(path))
	if err != nil {
		return nil, err
	}
	for _, s := range schema {
		if _, err := db.Exec(s); err != nil {
			db.Close()
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	return db, nil
}

// openSQLiteTemp opens a fresh database with table t in a temporary
// directory, closed when the benchmark ends.
func openSQLiteTemp(tb testing.TB) *sql.DB {
	db, err := sqliteOpen(filepath.Join(tb.TempDir(), "sqlite.db"), sqliteSchema)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// sqlitePrepare prepares query on db, closed when the benchmark ends.
func sqlitePrepare(tb testing.TB, db *sql.DB, query string) *sql.Stmt {
	st, err := db.Prepare(query)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

const sqliteInsert = `INSERT INTO t (id, v) VALUES (?, ?)`

// sqlitePut is one durable write: one record, one (autocommit) transaction.
func sqlitePut(ins *sql.Stmt, id uuidv7.UUID, rec map[string]any) error {
	v, err := msgpack.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = ins.Exec(id[:], v)
	return err
}

// noCommits is the commit counter of a peer that does not report its
// commits: commits.report then reports nothing.
func noCommits() commits {
	return commits{read: func() commits { return commits{} }}
}

// sqliteLoad writes records rec(i) under id(i), i < n, perTx records per
// transaction through one prepared insert, encoding with one reused
// encoder (SQLite copies the bound bytes, so the buffer can be reused at
// once).
func sqliteLoad(db *sql.DB, n, perTx int, id func(i int) uuidv7.UUID, rec func(i int) any) error {
	var w arenaWriter
	enc := msgpack.NewEncoder(&w)
	ins, err := db.Prepare(sqliteInsert)
	if err != nil {
		return err
	}
	defer ins.Close()
	for start := 0; start < n; start += perTx {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		st := tx.Stmt(ins)
		for i := start; i < min(start+perTx, n); i++ {
			w.buf = w.buf[:0]
			if err := enc.Encode(rec(i)); err != nil {
				tx.Rollback()
				return err
			}
			k := id(i)
			if _, err := st.Exec(k[:], w.buf); err != nil {
				tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// sqliteBulk is the bulk contender: one transaction per putManyBatch (5000)
// records, as storh's PutMany calls. With noSync the file is opened with
// synchronous=OFF, as storh and bbolt load without fsync.
func sqliteBulk(n int, noSync bool) func() bulkTarget {
	return func() bulkTarget {
		var db *sql.DB
		return bulkTarget{
			open: func(path string) (err error) {
				db, err = sqliteOpen(path, sqliteSchema)
				if err == nil && noSync {
					// One connection, so that the pragma holds for the load.
					db.SetMaxOpenConns(1)
					_, err = db.Exec("PRAGMA synchronous=OFF")
				}
				return err
			},
			load: func() error {
				return sqliteLoad(db, n, putManyBatch, newUUID, func(i int) any { return record(i) })
			},
			close: func() error { return db.Close() },
		}
	}
}

// ---------------------------------------------------------------------------
// The engine fixture's records in SQLite.

// sqliteFixtures are the SQLite copies of the engine fixtures (t: msgpack,
// tj: JSON) and of the query fixtures (q), by size, built once.
var sqliteFixtures struct {
	mu     sync.Mutex
	engine map[int]*sql.DB
	query  map[int]*sql.DB
}

// registerSQLiteClose closes db before TestMain removes the fixture
// directory (it runs smallCleanup's functions).
func registerSQLiteClose(db *sql.DB) {
	smallFixtures.Lock()
	defer smallFixtures.Unlock()
	smallCleanup = append(smallCleanup, func() { db.Close() })
}

// sqliteEngine returns the SQLite copy of the engine fixture f: t holds
// record(i) under f.ids[i] as msgpack, tj the same records as JSON.
func sqliteEngine(tb testing.TB, f *fixture) *sql.DB {
	sqliteFixtures.mu.Lock()
	defer sqliteFixtures.mu.Unlock()
	if db, ok := sqliteFixtures.engine[f.n]; ok {
		return db
	}
	path := filepath.Join(tempDir(tb), fmt.Sprintf("sqlite-%d.db", f.n))
	db, err := sqliteOpen(path, sqliteSchema,
		`CREATE TABLE IF NOT EXISTS tj (id BLOB PRIMARY KEY, doc TEXT) WITHOUT ROWID`)
	if err != nil {
		tb.Fatal(err)
	}
	id := func(i int) uuidv7.UUID { return f.ids[i] }
	if err := sqliteLoad(db, f.n, rawTxRecords, id, func(i int) any { return record(i) }); err != nil {
		tb.Fatalf("building %s: %v", path, err)
	}
	if err := sqliteLoadJSON(db, "tj", f.n, id, func(i int) any { return record(i) }); err != nil {
		tb.Fatalf("building %s: %v", path, err)
	}
	if _, err := db.Exec("ANALYZE"); err != nil {
		tb.Fatal(err)
	}
	if sqliteFixtures.engine == nil {
		sqliteFixtures.engine = map[int]*sql.DB{}
	}
	sqliteFixtures.engine[f.n] = db
	registerSQLiteClose(db)
	return db
}

// sqliteLoadJSON writes json.Marshal(rec(i)) under id(i) into table,
// rawTxRecords per transaction.
func sqliteLoadJSON(db *sql.DB, table string, n int, id func(i int) uuidv7.UUID, rec func(i int) any) error {
	for start := 0; start < n; start += rawTxRecords {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		st, err := tx.Prepare("INSERT INTO " + table + " (id, doc) VALUES (?, ?)")
		if err != nil {
			tx.Rollback()
			return err
		}
		for i := start; i < min(start+rawTxRecords, n); i++ {
			doc, err := json.Marshal(rec(i))
			if err != nil {
				tx.Rollback()
				return err
			}
			k := id(i)
			if _, err := st.Exec(k[:], string(doc)); err != nil {
				tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

const (
	sqliteGetSQL    = `SELECT v FROM t WHERE id = ?`
	sqlitePageSQL   = `SELECT v FROM t WHERE id > ? ORDER BY id LIMIT ?`
	sqliteWindowSQL = `SELECT v FROM t WHERE id BETWEEN ? AND ? ORDER BY id`
	sqliteWhereSQL  = `SELECT count(*) FROM tj WHERE json_extract(doc, ?) = ?`
)

// sqliteGetData reads one record by id and decodes it into a map.
func sqliteGetData(get *sql.Stmt, id uuidv7.UUID) (map[string]any, error) {
	var v []byte
	if err := get.QueryRow(id[:]).Scan(&v); err != nil {
		return nil, err
	}
	var m map[string]any
	err := msgpack.Unmarshal(v, &m)
	return m, err
}

// sqliteDecodeRows decodes the msgpack value of every row into a map. The
// bytes are scanned as sql.RawBytes, valid until the next row, as the
// bbolt peer decodes from the mmap without copying.
func sqliteDecodeRows(rows *sql.Rows, out []map[string]any) ([]map[string]any, error) {
	defer rows.Close()
	out = out[:0]
	var v sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&v); err != nil {
			return out, err
		}
		var m map[string]any
		if err := msgpack.Unmarshal(v, &m); err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// sqlitePage decodes the limit records after id into maps.
func sqlitePage(page *sql.Stmt, after uuidv7.UUID, limit int, out []map[string]any) ([]map[string]any, error) {
	rows, err := page.Query(after[:], limit)
	if err != nil {
		return out[:0], err
	}
	return sqliteDecodeRows(rows, out)
}

// sqliteWindow decodes the records created in [fromMs, untilMs]: the ids
// between the least and the greatest UUIDv7 of those milliseconds, as
// rawWindow seeks.
func sqliteWindow(window *sql.Stmt, fromMs, untilMs int64, out []map[string]any) ([]map[string]any, error) {
	lo, hi := uuidv7.MinForTimestampMs(fromMs), uuidv7.MaxForTimestampMs(untilMs)
	rows, err := window.Query(lo[:], hi[:])
	if err != nil {
		return out[:0], err
	}
	return sqliteDecodeRows(rows, out)
}

// sqliteWhere counts the records whose field equals value, through
// json_extract on every JSON document (no index).
func sqliteWhere(where *sql.Stmt, field string, value any) (int, error) {
	var n int
	err := where.QueryRow("$."+field, value).Scan(&n)
	return n, err
}

// ---------------------------------------------------------------------------
// The query fixture's records in SQLite.

// sqliteQIndexes are expression indexes on the fields storh indexes.
var sqliteQIndexes = []string{
	`CREATE INDEX IF NOT EXISTS q_status ON q (json_extract(doc, '$.status'))`,
	`CREATE INDEX IF NOT EXISTS q_user ON q (json_extract(doc, '$.user'))`,
	`CREATE INDEX IF NOT EXISTS q_score ON q (json_extract(doc, '$.score'))`,
}

// sqliteQuery returns the SQLite copy of the query fixture f: qmap(i) as
// JSON under f.ids[i] in q, with the three expression indexes (created
// after the load, as CREATE INDEX sorts once).
func sqliteQuery(tb testing.TB, f *qFixture) *sql.DB {
	sqliteFixtures.mu.Lock()
	defer sqliteFixtures.mu.Unlock()
	if db, ok := sqliteFixtures.query[f.n]; ok {
		return db
	}
	path := filepath.Join(f.dir, fmt.Sprintf("q-sqlite-%d.db", f.n))
	db, err := sqliteOpen(path, `CREATE TABLE IF NOT EXISTS q (id BLOB PRIMARY KEY, doc TEXT) WITHOUT ROWID`)
	if err != nil {
		tb.Fatal(err)
	}
	if err := sqliteLoadJSON(db, "q", f.n, func(i int) uuidv7.UUID { return f.ids[i] },
		func(i int) any { return qmap(i) }); err != nil {
		tb.Fatalf("building %s: %v", path, err)
	}
	for _, s := range append(sqliteQIndexes, "ANALYZE") {
		if _, err := db.Exec(s); err != nil {
			tb.Fatalf("%s: %v", s, err)
		}
	}
	if sqliteFixtures.query == nil {
		sqliteFixtures.query = map[int]*sql.DB{}
	}
	sqliteFixtures.query[f.n] = db
	registerSQLiteClose(db)
	return db
}

// sqliteFind is one of the queries of query_test.go in SQL: the same
// condition, order (ties by id, as storh orders them) and limit.
type sqliteFind struct {
	query string
	args  []any
	index string // the index EXPLAIN QUERY PLAN must name
}

var (
	sqlEqStatus = sqliteFind{
		query: `SELECT id, doc FROM q WHERE json_extract(doc, '$.status') = ? ORDER BY id LIMIT ?`,
		args:  []any{qPending, qLimit}, index: "q_status",
	}
	sqlEqUser = sqliteFind{
		query: `SELECT id, doc FROM q WHERE json_extract(doc, '$.user') = ? ORDER BY id LIMIT ?`,
		args:  []any{qUserProbe, qLimit}, index: "q_user",
	}
	sqlRange = sqliteFind{
		query: `SELECT id, doc FROM q WHERE json_extract(doc, '$.score') BETWEEN ? AND ?
			ORDER BY json_extract(doc, '$.score'), id LIMIT ?`,
		args: []any{int64(scoreLo), int64(scoreHi), qLimit}, index: "q_score",
	}
	sqlCountFlagged = sqliteFind{
		query: `SELECT count(*) FROM q WHERE json_extract(doc, '$.status') = ?`,
		args:  []any{qFlagged}, index: "q_status",
	}
)

// checkSQLitePlan fails unless SQLite answers q through its index without
// sorting in a temporary B-tree.
func checkSQLitePlan(tb testing.TB, db *sql.DB, q sqliteFind) {
	tb.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q.query, q.args...)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			tb.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	p := strings.Join(plan, "; ")
	if !strings.Contains(p, "INDEX "+q.index) || strings.Contains(p, "TEMP B-TREE") {
		tb.Fatalf("%s: plan %q, want index %s and no sort", q.query, p, q.index)
	}
}

// sqliteFindRecords runs q and decodes every document into out with
// encoding/json, its ID set from the id column (as bolthold's Find sets it
// from the key).
func sqliteFindRecords(st *sql.Stmt, args []any, out []qRecord) ([]qRecord, error) {
	out = out[:0]
	rows, err := st.Query(args...)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	var doc sql.RawBytes
	for rows.Next() {
		var r qRecord
		if err := rows.Scan(&r.ID, &doc); err != nil {
			return out, err
		}
		if err := json.Unmarshal(doc, &r); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
