package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/kv"
	_ "github.com/storhdb/storh-go/storh/postgres"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// A pgscale worker is one OS process of a cell: benchreport re-executed as
// "benchreport pgscale-worker FLAGS". It opens its own storh.DB or its own
// pgx connection on the cell's collection or table, does one operation to
// warm up, prints "ready", waits for "go" on stdin (every worker of the
// cell gets it at once), works for the duration, and prints its result as
// one line of JSON.

// workerResult is what a worker reports.
type workerResult struct {
	Ops     int64         `json:"ops"`
	Records int64         `json:"records"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Conflicts counts calls that failed with an error wrapping
	// kv.ErrConflict: on PostgreSQL, storh runs a conflicting transaction
	// again up to 30 times, and returns the conflict only after that.
	Conflicts int64 `json:"conflicts"`
	// Commits is, for storh, the rise of Stats().Commits over the window;
	// for pgx, the transactions the worker committed.
	Commits int64 `json:"commits"`
	// Err is the error that stopped the worker early, if one did.
	Err string `json:"error,omitempty"`
	// Reader is the feed reader's account (contender "reader" only).
	Reader *readerAccount `json:"reader,omitempty"`
}

// The words of the protocol between a run and its workers.
const (
	workerReady = "ready"
	workerGo    = "go"
)

// workerApp is the application_name of the workers' connections, so that
// the run can wait for their backends to end (and flush their statistics)
// before it reads the server's counters.
const workerApp = "pgscale-worker"

// pageRecords, batchRecords: the records a page reads and a PutMany writes.
const (
	pageRecords  = 100
	batchRecords = 100
)

func workerMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pgscale-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var w worker
	fs.StringVar(&w.workload, "workload", "", "put, putfeed, putmany, queue or page")
	fs.StringVar(&w.contender, "contender", "", "storh, pgx, pgx-1tx, or reader (follows a putfeed collection's Changes)")
	fs.StringVar(&w.url, "url", "", "the store's URL")
	fs.StringVar(&w.name, "name", "", "the collection (storh) or table (pgx)")
	fs.DurationVar(&w.duration, "duration", 0, "how long to work after the start signal")
	seed := fs.Uint64("seed", 0, "seeds the choice of pages")
	after := fs.Uint64("after", 0, "the reader: the Seq it follows Changes from")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	w.rng = rand.New(rand.NewPCG(*seed, 0x9e3779b97f4a7c15))
	var res workerResult
	if w.contender == "reader" {
		res = w.follow(bufio.NewReader(stdin), stdout, *after)
	} else {
		res = w.run(bufio.NewReader(stdin), stdout)
	}
	line, err := json.Marshal(res)
	if err == nil {
		_, err = fmt.Fprintf(stdout, "%s\n", line)
	}
	if err != nil {
		fmt.Fprintln(stderr, "pgscale-worker:", err)
		return 1
	}
	return 0
}

type worker struct {
	workload, contender, url, name string
	duration                       time.Duration
	rng                            *rand.Rand

	db   *storh.DB
	conn *pgx.Conn
	docs []storh.Map // the records written, cyclically
	raw  [][]byte    // their msgpack payloads, as storh encodes them
	next int
	ids  []uuidv7.UUID // the page workload's records, for its cursors
}

// run sets up, signals ready, waits for go, works and returns the result;
// a failure before the start is the result's Err.
func (w *worker) run(stdin *bufio.Reader, stdout io.Writer) workerResult {
	ctx := context.Background()
	var res workerResult
	op, err := w.setup(ctx)
	defer w.close(ctx)
	if err == nil {
		// The first operation opens connections, prepares statements and
		// fills caches; the window measures the steady state.
		_, err = op(ctx)
	}
	var commits0 int64
	if err == nil {
		commits0, err = w.commits()
	}
	if err == nil {
		_, err = fmt.Fprintln(stdout, workerReady)
	}
	if err == nil {
		var line string
		line, err = stdin.ReadString('\n')
		if err == nil && line != workerGo+"\n" {
			err = fmt.Errorf("expected %q from the run, got %q", workerGo, line)
		}
	}
	if err != nil {
		res.Err = err.Error()
		return res
	}
	start := time.Now()
	deadline := start.Add(w.duration)
	for time.Now().Before(deadline) {
		n, err := op(ctx)
		if errors.Is(err, kv.ErrConflict) {
			res.Conflicts++
			continue
		}
		if err != nil {
			res.Err = err.Error()
			break
		}
		res.Ops++
		res.Records += int64(n)
	}
	res.Elapsed = time.Since(start)
	commits1, err := w.commits()
	if err != nil && res.Err == "" {
		res.Err = err.Error()
	}
	res.Commits = commits1 - commits0
	if w.conn != nil {
		res.Commits = res.Ops * pgxCommitsPerOp(w.workload, w.contender)
	}
	return res
}

// pgxCommitsPerOp is how many transactions the hand-written code commits
// per operation: one per write, two per job of the lease worker (claim,
// complete), none per page (a read-only transaction rolls back).
func pgxCommitsPerOp(workload, contender string) int64 {
	switch {
	case workload == "page":
		return 0
	case workload == "queue" && contender == "pgx":
		return 2
	}
	return 1
}

// commits reads storh's commit counter (0 for pgx, which counts its own).
func (w *worker) commits() (int64, error) {
	if w.db == nil {
		return 0, nil
	}
	s, err := w.db.Stats()
	return s.Commits, err
}

func (w *worker) close(ctx context.Context) {
	if w.db != nil {
		w.db.Close()
	}
	if w.conn != nil {
		w.conn.Close(ctx)
	}
}

// op is one measured operation; it returns the records it wrote or read.
type op func(ctx context.Context) (int, error)

func (w *worker) setup(ctx context.Context) (op, error) {
	var err error
	if w.docs, w.raw, err = benchDocs(); err != nil {
		return nil, err
	}
	switch w.contender {
	case "storh":
		if w.db, err = storh.Open(w.url); err != nil {
			return nil, err
		}
		return w.storhOp()
	case "pgx", "pgx-1tx":
		if w.conn, err = pgx.Connect(ctx, w.url); err != nil {
			return nil, err
		}
		return w.pgxOp(ctx)
	}
	return nil, fmt.Errorf("unknown contender %q", w.contender)
}

func (w *worker) storhOp() (op, error) {
	if w.workload == "queue" {
		q, err := w.db.Queue(w.name, storh.WithoutCreate())
		if err != nil {
			return nil, err
		}
		return func(context.Context) (int, error) {
			job, err := q.Claim(time.Minute)
			if errors.Is(err, storh.ErrEmpty) {
				return 0, errQueueDry
			}
			if err != nil {
				return 0, err
			}
			return 1, q.Complete(job.ID)
		}, nil
	}
	docs, err := w.db.Docs(w.name, storh.WithoutCreate())
	if err != nil {
		return nil, err
	}
	switch w.workload {
	case "put", "putfeed":
		// putfeed's collection has its feed: the stored setting makes
		// every handle's Put record its change.
		return func(context.Context) (int, error) {
			_, err := docs.Put(w.nextDoc())
			return 1, err
		}, nil
	case "putmany":
		items := make([]any, batchRecords)
		return func(context.Context) (int, error) {
			for i := range items {
				items[i] = w.nextDoc()
			}
			_, err := docs.PutMany(items)
			return len(items), err
		}, nil
	case "page":
		err := docs.ScanRaw(query.All(), func(id uuidv7.UUID, _ []byte) error {
			w.ids = append(w.ids, id)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return func(context.Context) (int, error) {
			after, err := w.cursor()
			if err != nil {
				return 0, err
			}
			page, err := docs.Find(query.All().After(after).Limit(pageRecords))
			if err == nil && len(page) != pageRecords {
				err = fmt.Errorf("a page after %s held %d records, not %d", after, len(page), pageRecords)
			}
			return len(page), err
		}, nil
	}
	return nil, fmt.Errorf("unknown workload %q", w.workload)
}

// errQueueDry stops a queue worker that found no pending job: the run
// enqueues too few for the rate the workers reached.
var errQueueDry = errors.New("the queue ran dry: enqueue more jobs per cell (-queue-jobs)")

// pgx is hand-written code doing the same logical work: the same payload
// bytes under a fresh UUIDv7, one durable commit per operation as storh
// makes (synchronous_commit is on), statements as a user would write them.
func (w *worker) pgxOp(ctx context.Context) (op, error) {
	t := pgx.Identifier{w.name}.Sanitize()
	switch w.workload {
	case "put":
		stmt := "INSERT INTO " + t + " (id, data) VALUES ($1, $2)"
		return func(ctx context.Context) (int, error) {
			id := uuidv7.New()
			_, err := w.conn.Exec(ctx, stmt, id[:], w.nextRaw())
			return 1, err
		}, nil
	case "putmany":
		stmt := "INSERT INTO " + t + " (id, data) SELECT * FROM unnest($1::bytea[], $2::bytea[])"
		ids := make([]uuidv7.UUID, batchRecords)
		keys, values := make([][]byte, batchRecords), make([][]byte, batchRecords)
		return func(ctx context.Context) (int, error) {
			uuidv7.NewBatch(ids)
			for i := range keys {
				keys[i], values[i] = ids[i][:], w.nextRaw()
			}
			_, err := w.conn.Exec(ctx, stmt, keys, values)
			return batchRecords, err
		}, nil
	case "queue":
		if w.contender == "pgx-1tx" {
			return w.pgxQueueOneTx(t), nil
		}
		return w.pgxQueueLease(t), nil
	case "page":
		rows, _ := w.conn.Query(ctx, "SELECT id FROM "+t+" ORDER BY id")
		keys, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			id, err := uuidv7.FromBytes(k)
			if err != nil {
				return nil, err
			}
			w.ids = append(w.ids, id)
		}
		stmt := "SELECT id, data FROM " + t + " WHERE id > $1 ORDER BY id LIMIT " + fmt.Sprint(pageRecords)
		// Rows are copied out, as storh's records own their bytes; the
		// buffers are reused, which storh cannot do for the caller.
		var buf []byte
		return func(ctx context.Context) (int, error) {
			after, err := w.cursor()
			if err != nil {
				return 0, err
			}
			// As storh reads: a REPEATABLE READ READ ONLY transaction.
			tx, err := w.conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
			if err != nil {
				return 0, err
			}
			defer tx.Rollback(ctx)
			rows, _ := tx.Query(ctx, stmt, after[:])
			n := 0
			buf = buf[:0]
			for rows.Next() {
				var k, v []byte
				if err := rows.Scan(&k, &v); err != nil {
					return n, err
				}
				buf = append(append(buf, k...), v...)
				n++
			}
			if err := rows.Err(); err != nil {
				return n, err
			}
			if n != pageRecords {
				return n, fmt.Errorf("a page after %s held %d rows, not %d", after, n, pageRecords)
			}
			return n, tx.Rollback(ctx)
		}, nil
	}
	return nil, fmt.Errorf("unknown workload %q", w.workload)
}

// pgxQueueLease is the worker storh's queue is: a claim is a durable lease
// (a worker that dies leaves the job to come back when it ends), committed
// before the work, and the completion a second commit.
func (w *worker) pgxQueueLease(t string) op {
	claim := "UPDATE " + t + " SET state = 1, lease_until = now() + interval '1 minute'" +
		" WHERE id = (SELECT id FROM " + t + " WHERE state = 0 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)" +
		" RETURNING id, data"
	complete := "UPDATE " + t + " SET state = 2 WHERE id = $1 AND state = 1"
	return func(ctx context.Context) (int, error) {
		var id, data []byte
		err := w.conn.QueryRow(ctx, claim).Scan(&id, &data)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, errQueueDry
		}
		if err != nil {
			return 0, err
		}
		tag, err := w.conn.Exec(ctx, complete, id)
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("completing job %x changed %d rows", id, tag.RowsAffected())
		}
		return 1, err
	}
}

// pgxQueueOneTx is the shortest hand-written worker: one transaction
// holds the job's row lock while it works and deletes the row at the end,
// one commit per job. A worker that dies rolls back and frees the job at
// once; no lease outlives the connection.
func (w *worker) pgxQueueOneTx(t string) op {
	claim := "SELECT id, data FROM " + t + " WHERE state = 0 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
	complete := "DELETE FROM " + t + " WHERE id = $1"
	return func(ctx context.Context) (int, error) {
		err := pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error {
			var id, data []byte
			err := tx.QueryRow(ctx, claim).Scan(&id, &data)
			if errors.Is(err, pgx.ErrNoRows) {
				return errQueueDry
			}
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, complete, id)
			return err
		})
		return 1, err
	}
}

// cursor picks a random record that has a full page after it.
func (w *worker) cursor() (uuidv7.UUID, error) {
	if len(w.ids) <= pageRecords {
		return uuidv7.UUID{}, fmt.Errorf("the page workload's collection holds %d records: it needs more than %d", len(w.ids), pageRecords)
	}
	return w.ids[w.rng.IntN(len(w.ids)-pageRecords)], nil
}

func (w *worker) nextDoc() storh.Map {
	d := w.docs[w.next%len(w.docs)]
	w.next++
	return d
}

func (w *worker) nextRaw() []byte {
	r := w.raw[w.next%len(w.raw)]
	w.next++
	return r
}

// benchDocRecords is how many distinct records the workloads cycle through.
const benchDocRecords = 1024

// benchDocs returns the records every workload writes and their msgpack
// payloads as storh encodes them: ten fields, about 200 bytes, the shape
// of the records of the bench module's engine benchmarks.
func benchDocs() ([]storh.Map, [][]byte, error) {
	countries := []string{"NO", "SE", "DK", "FI", "DE", "FR", "NL", "PL"}
	docs := make([]storh.Map, benchDocRecords)
	raw := make([][]byte, benchDocRecords)
	for i := range docs {
		docs[i] = storh.Map{
			"user":    fmt.Sprintf("user-%06d", i),
			"email":   fmt.Sprintf("user%06d@example.com", i),
			"age":     18 + i%60,
			"score":   float64(i%1000) / 8,
			"active":  i%3 != 2,
			"country": countries[i%len(countries)],
			"status":  []string{"running", "pending", "stopped"}[i%3],
			"visits":  int64(1000 + i*37%9000),
			"tags":    []any{"alpha", countries[(i+3)%len(countries)]},
			"note":    "lorem ipsum dolor sit amet, consectetur adipiscing elit ok",
		}
		value, err := engine.AppendValue(nil, docs[i])
		if err != nil {
			return nil, nil, err
		}
		raw[i] = value[engine.HeaderSize:]
	}
	return docs, raw, nil
}
