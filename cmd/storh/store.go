package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// store is what the commands that work both on a database file and over
// HTTP (--url) need of a database. Two implementations: localStore over a
// *storh.DB, and httpStore over the API of package storh/web. The commands
// call only this interface, so their checks and output are the same on
// both paths.
type store interface {
	// where names the store in messages: the database's path or the URL.
	where() string
	close() error
	// stats gives the statistics of the database and of every collection.
	stats() (storh.Stats, error)
	// get gives the record's JSON line ({"id","time","data"} and a newline).
	get(coll string, id uuidv7.UUID) ([]byte, error)
	// countMatching counts what sel selects in a Docs collection or Log.
	countMatching(ctx context.Context, coll string, sel *queryFlags, q query.Query) (int, error)
	// stream yields the records sel selects, as JSON lines, in order.
	stream(ctx context.Context, coll string, sel *queryFlags, q query.Query) iter.Seq2[recLine, error]
	// export writes what sel selects as compact JSON lines ({"id","data"}).
	export(ctx context.Context, coll string, sel *queryFlags, q query.Query, w io.Writer, prog *progress) (int64, error)
	// put stores items in coll, of kind, all or none: under ids when ids
	// is not nil, else under new ids. It returns the stored records. An
	// error about one item is a *storh.Error whose Index is the item's.
	put(coll, kind string, ids []uuidv7.UUID, items []any) ([]recLine, error)
	// importLines reads the JSON lines of in into coll, of kind (created:
	// the import makes the collection), as jsonl.Import with im's options
	// does, moving prog on. When it writes nothing, a collection (and a
	// database file) the import created is not left behind; removedFile
	// says a new database file was removed again. A bad line's error is a
	// *jsonl.LineError. On a file, rows are committed in batches; over
	// HTTP, all or nothing.
	importLines(ctx context.Context, coll, kind string, created bool, in io.Reader, im *importer, prog *progress) (rep jsonl.ImportReport, removedFile bool, err error)
	// discard takes back what a failed put created (a collection, a new
	// database file) when nothing was written.
	discard(coll string, created bool)
	// deleteIDs deletes records of a Docs collection by id, counting those
	// deleted and those that were not there.
	deleteIDs(coll string, ids []uuidv7.UUID) (deleted, missing int64, err error)
	// patch applies changes to the record id of a docs collection and
	// gives its line as it then is.
	patch(coll string, id uuidv7.UUID, changes []web.PatchChange) ([]byte, error)
	// explain runs what sel selects in a Docs collection or Log and says
	// how it ran.
	explain(ctx context.Context, coll string, sel *queryFlags, q query.Query) (storh.Plan, error)
	// aggregate groups what sel selects in a Docs collection or Log by the
	// groupBy paths and computes aggs over each group.
	aggregate(ctx context.Context, coll string, sel *queryFlags, q query.Query, groupBy []string, aggs []web.Aggregation) ([]storh.Group, error)
	// explainAggregate runs aggregate and says how it read.
	explainAggregate(ctx context.Context, coll string, sel *queryFlags, q query.Query, groupBy []string, aggs []web.Aggregation) (storh.Plan, error)
	// indexes lists the indexes of a Docs collection or Log.
	indexes(coll string) ([]storh.IndexInfo, error)
	// schema gives the JSON Schema of a Docs collection or Log, or nil.
	schema(coll string) ([]byte, error)
	// setSchema gives a Docs collection or Log a JSON Schema, after
	// checking its records; nil removes it.
	setSchema(coll string, doc []byte) error
	// queueStats counts the jobs of an existing queue by state.
	queueStats(name string) (storh.QueueStats, error)
	// last gives the last n records of a Docs collection or Log, oldest
	// of them first (tail).
	last(ctx context.Context, coll string, n int) ([]recLine, error)
	// follow prints, through p, the records written to coll after the id
	// after, flushing p as they come, until ctx ends (tail -f); it then
	// returns nil. It may be called after close: on a file it opens the
	// database for each poll (every interval), over HTTP it reads the
	// tail endpoint.
	follow(ctx context.Context, coll string, after uuidv7.UUID, interval time.Duration, p *recordPrinter) error
	// verify checks the store, or only the named collections, handing
	// each problem to report.
	verify(ctx context.Context, colls []string, report func(storh.Problem)) (storh.VerifyReport, error)
}

// recLine is one record as the commands print it.
type recLine struct {
	ID   uuidv7.UUID
	Line []byte // {"id":…,"time":…,"data":…} and a newline
}

// Commands that take --url (or STORH_URL): the rest work on a database
// file only, and refuse --url. A subcommand is named after its group
// ("index list").
var httpCmds = map[string]bool{
	"aggregate": true, "count": true, "get": true, "put": true, "patch": true, "import": true, "delete": true, "query": true, "export": true, "stats": true,
	"explain": true, "verify": true, "index list": true, "tail": true, "changes": true,
	"queue enqueue": true, "queue claim": true, "queue complete": true, "queue fail": true, "queue retry": true,
	"queue cancel": true, "queue release": true, "queue extend": true, "queue lookup": true, "queue jobs": true,
	"queue stats": true, "queue options": true, "queue purge": true,
	"schema get": true, "schema set": true, "schema rm": true,
}

// noStoreCmds need no database at all: STORH_URL does not concern them.
var noStoreCmds = map[string]bool{
	"uuid": true, "objectid": true, "version": true, "help": true, "completion": true,
	"__complete": true, "__completeNoDesc": true,
}

const envURL = "STORH_URL"

// resolveURL decides whether the command (top, the command under storh, or
// "group sub" for a subcommand)
// runs over HTTP: --url, else $STORH_URL unless --db was given. A command
// that does not take --url refuses it; $STORH_URL does not concern it.
func (a *app) resolveURL(top string, urlGiven bool) error {
	u := a.url
	if !urlGiven {
		u = ""
		if !a.dbGiven {
			u = a.getenv(envURL)
		}
	}
	a.url = ""
	switch {
	case u == "":
		return nil
	case !httpCmds[top] && !urlGiven:
		return nil
	case noStoreCmds[strings.Fields(top)[0]]:
		return usagef("storh %s needs no database: drop --url", top)
	case !httpCmds[top]:
		return usagef("storh %s works on a database file only, not over HTTP: drop --url and pass --db PATH; the commands that take --url are %s", top, httpCmdList())
	case a.dbGiven:
		return usagef("--url and --db name two databases: give one")
	}
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		from := "--url"
		if !urlGiven {
			from = "$" + envURL
		}
		return usagef("%s %q: give the server's address as http://HOST:PORT[/PREFIX] (or https://…)", from, u)
	}
	a.url = strings.TrimRight(u, "/")
	return nil
}

func httpCmdList() string {
	return "aggregate, count, delete (by id), explain, export, get, import, index list, patch (by id), put, query, queue (every subcommand), schema get, schema set, schema rm, stats, tail, changes and verify"
}

// openStore opens the store the command works on: the server of --url, or
// the database file (read-only unless write).
func (a *app) openStore(write bool) (store, error) {
	if a.url != "" {
		s := a.newHTTPStore()
		if s.err != nil {
			return nil, usagef("--url %s: %v", a.url, s.err)
		}
		return s, nil
	}
	db, err := a.open(write)
	if err != nil {
		return nil, err
	}
	return &localStore{a: a, db: db}, nil
}

// openStoreExisting opens the store and looks up each named collection, so
// a misspelt name fails before any work (as openExisting). For a write over
// HTTP, nothing is created either way.
func (a *app) openStoreExisting(write bool, names ...string) (store, []storh.CollectionInfo, error) {
	if a.url == "" && write && !isURL(a.dbPath) {
		if _, err := os.Stat(a.dbPath); errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("no database at %s: pass --db PATH or set %s", a.dbPath, envDB)
		}
	}
	s, err := a.openStore(write)
	if err != nil {
		return nil, nil, err
	}
	found := make([]storh.CollectionInfo, 0, len(names))
	if len(names) > 0 {
		st, err := s.stats()
		if err != nil {
			s.close()
			return nil, nil, err
		}
		for _, name := range names {
			cs, err := a.lookupIn(st.Collections, name, s.where())
			if err != nil {
				s.close()
				return nil, nil, err
			}
			found = append(found, cs)
		}
	}
	return s, found, nil
}

// openStoreReader opens the store and an existing Docs collection or Log,
// refusing a queue as reader does.
func (a *app) openStoreReader(name string) (store, storh.CollectionInfo, error) {
	s, found, err := a.openStoreExisting(false, name)
	if err != nil {
		return nil, storh.CollectionInfo{}, err
	}
	if err := readable(found[0]); err != nil {
		s.close()
		return nil, found[0], err
	}
	return s, found[0], nil
}

// readable refuses a collection whose records a reader cannot read.
func readable(cs storh.CollectionInfo) error {
	if cs.Kind != "docs" && cs.Kind != "log" {
		return fmt.Errorf("collection %s is a %s: use 'storh queue' (storh queue stats %s)", qname(cs.Name), cs.Kind, shellQuote(cs.Name))
	}
	return nil
}

// writerKind decides the kind a put writes into, as writer does: the
// collection's own, or a new one's (docs, or log when asLog).
func writerKind(st storh.Stats, name string, asLog bool) (kind string, created bool, err error) {
	for _, c := range st.Collections {
		if c.Name == name {
			kind = c.Kind
		}
	}
	switch {
	case kind == "docs" && asLog:
		return kind, false, fmt.Errorf("collection %s is a docs collection, not a log: drop --log, or choose another name", qname(name))
	case kind == "queue":
		return kind, false, fmt.Errorf("collection %s is a queue: use 'storh queue enqueue'", qname(name))
	case kind == "":
		created, kind = true, "docs"
		if asLog {
			kind = "log"
		}
	}
	return kind, created, nil
}

// localStore is a store over a database file (or a postgres:// URL), opened
// by this process.
type localStore struct {
	a  *app
	db *storh.DB
}

func (s *localStore) where() string               { return s.a.dbPath }
func (s *localStore) close() error                { return s.db.Close() }
func (s *localStore) stats() (storh.Stats, error) { return s.db.Stats() }

func (s *localStore) reader(coll string) (reader, error) {
	r, _, err := s.a.reader(s.db, coll)
	return r, err
}

func (s *localStore) get(coll string, id uuidv7.UUID) ([]byte, error) {
	r, err := s.reader(coll)
	if err != nil {
		return nil, err
	}
	rec, err := r.Get(id)
	if err != nil {
		return nil, err
	}
	return recordLine(rec)
}

func recordLine(rec storh.Record) ([]byte, error) {
	b, err := jsonl.AppendRecord(nil, rec.ID, rec.Raw())
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", rec.ID, err)
	}
	return b, nil
}

func (s *localStore) countMatching(ctx context.Context, coll string, _ *queryFlags, q query.Query) (int, error) {
	r, err := s.reader(coll)
	if err != nil {
		return 0, err
	}
	return r.CountMatching(q)
}

func (s *localStore) stream(ctx context.Context, coll string, _ *queryFlags, q query.Query) iter.Seq2[recLine, error] {
	return func(yield func(recLine, error) bool) {
		r, err := s.reader(coll)
		if err != nil {
			yield(recLine{}, err)
			return
		}
		for rec, err := range r.Stream(q) {
			var line []byte
			if err == nil {
				line, err = recordLine(rec)
			}
			if !yield(recLine{ID: rec.ID, Line: line}, err) || err != nil {
				return
			}
		}
	}
}

func (s *localStore) export(ctx context.Context, coll string, _ *queryFlags, q query.Query, w io.Writer, prog *progress) (int64, error) {
	r, err := s.reader(coll)
	if err != nil {
		return 0, err
	}
	return exportRows(ctx, r, q, w, prog)
}

func (s *localStore) put(coll, kind string, ids []uuidv7.UUID, items []any) ([]recLine, error) {
	var w writer
	var err error
	if kind == "log" {
		w, err = s.db.Log(coll)
	} else {
		w, err = s.db.Docs(coll)
	}
	if err != nil {
		return nil, err
	}
	var recs []storh.Record
	if ids != nil {
		// --id: one record.
		var rec storh.Record
		rec, err = w.PutWithID(ids[0], items[0])
		recs = []storh.Record{rec}
	} else {
		recs, err = w.PutMany(items)
	}
	if err != nil {
		return nil, err
	}
	out := make([]recLine, len(recs))
	for i, rec := range recs {
		line, err := recordLine(rec)
		if err != nil {
			return nil, err
		}
		out[i] = recLine{ID: rec.ID, Line: line}
	}
	return out, nil
}

func (s *localStore) importLines(ctx context.Context, coll, kind string, created bool, in io.Reader, im *importer, prog *progress) (rep jsonl.ImportReport, removedFile bool, err error) {
	var w writer
	if kind == "log" {
		w, err = s.db.Log(coll)
	} else {
		w, err = s.db.Docs(coll)
	}
	if err == nil {
		rep, err = jsonl.Import(ctx, in, w, im.options(prog)...)
	}
	if err != nil || rep.Imported == 0 {
		// Nothing valid, or a failure: keep no empty collection, nor an
		// empty new file.
		dropIfEmpty(s.db, coll, created)
		removedFile = s.a.removeIfNew(s.db)
	}
	return rep, removedFile, err
}

func (s *localStore) discard(coll string, created bool) {
	dropIfEmpty(s.db, coll, created)
	s.a.removeIfNew(s.db)
}

func (s *localStore) deleteIDs(coll string, ids []uuidv7.UUID) (deleted, missing int64, err error) {
	err = s.db.Update(func(tx *storh.Tx) error {
		deleted, missing = 0, 0
		d, err := tx.Docs(coll)
		if err != nil {
			return err
		}
		for _, id := range ids {
			// Get tells deleted from not there; a damaged record
			// is there, and can be deleted.
			if _, err := d.Get(id); errors.Is(err, storh.ErrNotFound) {
				missing++
				continue
			} else if err != nil && !errors.Is(err, storh.ErrCorrupt) {
				return err
			}
			if err := d.Delete(id); err != nil {
				return err
			}
			deleted++
		}
		return nil
	})
	return deleted, missing, err
}

func (s *localStore) explain(ctx context.Context, coll string, _ *queryFlags, q query.Query) (storh.Plan, error) {
	r, err := s.reader(coll)
	if err != nil {
		return storh.Plan{}, err
	}
	return r.Explain(q)
}

func (s *localStore) indexes(coll string) ([]storh.IndexInfo, error) {
	r, err := s.reader(coll)
	if err != nil {
		return nil, err
	}
	return r.Indexes()
}

func (s *localStore) schema(coll string) ([]byte, error) { return s.db.Schema(coll) }

func (s *localStore) setSchema(coll string, doc []byte) error { return s.db.SetSchema(coll, doc) }

func (s *localStore) queueStats(name string) (storh.QueueStats, error) {
	q, err := s.db.Queue(name, storh.WithoutCreate())
	if err != nil {
		return storh.QueueStats{}, err
	}
	return q.Stats()
}

func (s *localStore) verify(ctx context.Context, colls []string, report func(storh.Problem)) (storh.VerifyReport, error) {
	return s.db.VerifyContext(ctx, report, colls...)
}
