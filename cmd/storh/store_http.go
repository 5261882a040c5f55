package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/storhdb/storh-go/internal/linereader"
	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// httpPage is the number of records the HTTP store asks for per page: the
// handler's default page size (web.WithMaxPage), which lowers a larger one.
const httpPage = 1000

// httpStore is a store over the JSON API of package storh/web, mounted in
// a running application or served by 'storh serve' (docs/web.md): an
// adapter of web.Client to the store interface, which words its errors as
// the commands word them.
type httpStore struct {
	a        *app
	client   *web.Client
	hasToken bool
	err      error // why the client could not be made, for openStore
}

func (a *app) newHTTPStore() *httpStore {
	token := a.token
	if !a.tokenGiven {
		token = a.getenv(envToken)
	}
	c, err := web.NewClient(a.url, token)
	return &httpStore{a: a, client: c, hasToken: strings.TrimSpace(token) != "", err: err}
}

func (s *httpStore) where() string { return s.client.URL() }
func (s *httpStore) close() error  { s.client.CloseIdleConnections(); return nil }

// fail words an error of the client in the commands' terms: the API's
// errors keep their storh sentinel (a *web.Error), with the advice the
// CLI can give for a refused token or write.
func (s *httpStore) fail(ctx context.Context, err error) error {
	var we *web.Error
	var ue *url.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &we):
		switch we.Kind {
		case web.KindForbidden:
			we.Message = fmt.Sprintf("the server at %s is read-only: writes need 'storh serve --write' (or web.WithWrites in the application)", s.where())
		case web.KindUnauthorized:
			if !s.hasToken {
				we.Message = fmt.Sprintf("the server at %s needs a token: set %s (or pass --token)", s.where(), envToken)
			} else {
				we.Message = fmt.Sprintf("the server at %s refused the token: check %s (or --token)", s.where(), envToken)
			}
		}
		return we
	case ctx.Err() != nil:
		return errors.New("interrupted")
	case errors.Is(err, web.ErrNotAPI):
		return fmt.Errorf("%v, not an error of the storh API: is --url the address where the handler is mounted?", strings.TrimPrefix(err.Error(), web.ErrNotAPI.Error()+": "))
	case errors.As(err, &ue):
		return fmt.Errorf("cannot reach the server at %s: %v", s.where(), ue.Err)
	case errors.Is(err, web.ErrAnswer):
		return fmt.Errorf("reading the answer of %s: %v", s.where(), err)
	}
	return err
}

// selection gives the parameters of the records, count, export and explain
// endpoints that select what the flags select. build must have run.
func (f *queryFlags) selection() web.Selection {
	sel := web.Selection{Where: f.conds, Order: f.orderPath, Desc: strings.HasPrefix(f.order, "-"),
		After: f.afterID, Before: f.beforeID, Newest: f.reverse, RequireIndex: f.requireIndex}
	if f.hasFrom {
		sel.FromMs = &f.fromMs
	}
	if f.hasUntil {
		sel.UntilMs = &f.untilMs
	}
	return sel
}

func (s *httpStore) stats() (storh.Stats, error) {
	out, err := s.client.Stats(s.a.ctx)
	if err != nil {
		return storh.Stats{}, s.fail(s.a.ctx, err)
	}
	st := storh.Stats{Path: s.where(), Commits: out.Commits, DirectReadsOff: out.DirectReadsOff}
	for _, p := range []struct {
		from *int64
		to   *int64
	}{{out.FileSize, &st.FileSize}, {out.FreeBytes, &st.FreeBytes}, {out.PageWrites, &st.PageWrites}, {out.Reruns, &st.Reruns}} {
		if p.from != nil {
			*p.to = *p.from
		}
	}
	for _, c := range out.Collections {
		ci := storh.CollectionInfo{Name: c.Name, Kind: c.Kind, Records: c.Records, Bytes: c.Bytes}
		if c.FirstID != "" {
			ci.FirstID, _ = uuidv7.Parse(c.FirstID)
		}
		if c.LastID != "" {
			ci.LastID, _ = uuidv7.Parse(c.LastID)
		}
		st.Collections = append(st.Collections, ci)
	}
	return st, nil
}

func (s *httpStore) get(coll string, id uuidv7.UUID) ([]byte, error) {
	b, err := s.client.Get(s.a.ctx, coll, id)
	if err != nil {
		return nil, s.fail(s.a.ctx, err)
	}
	return append(b, '\n'), nil
}

func (s *httpStore) countMatching(ctx context.Context, coll string, f *queryFlags, _ query.Query) (int, error) {
	n, err := s.client.Count(s.a.ctx, coll, f.selection(), 0)
	return n, s.fail(s.a.ctx, err)
}

func (s *httpStore) stream(ctx context.Context, coll string, f *queryFlags, _ query.Query) iter.Seq2[recLine, error] {
	return func(yield func(recLine, error) bool) {
		sel := f.selection()
		left := f.limit
		for {
			n := httpPage
			if left > 0 && left < n {
				n = left
			}
			page, err := s.client.Records(s.a.ctx, coll, sel, n)
			if err != nil {
				yield(recLine{}, s.fail(s.a.ctx, err))
				return
			}
			for _, raw := range page.Records {
				id, err := lineID(raw)
				line := append([]byte(raw), '\n')
				if !yield(recLine{ID: id, Line: line}, err) || err != nil {
					return
				}
			}
			if left > 0 {
				if left -= len(page.Records); left <= 0 {
					return
				}
			}
			if page.Next == "" || len(page.Records) == 0 {
				return
			}
			next, err := uuidv7.Parse(page.Next)
			if err != nil {
				yield(recLine{}, fmt.Errorf("the server answered a next page %q that is not an id", page.Next))
				return
			}
			if f.reverse {
				sel.Before = next
			} else {
				sel.After = next
			}
		}
	}
}

// lineID reads the id at the start of a record's JSON.
func lineID(b []byte) (uuidv7.UUID, error) {
	const pre = `{"id":"`
	if len(b) >= len(pre)+36 && string(b[:len(pre)]) == pre {
		if id, err := uuidv7.Parse(string(b[len(pre) : len(pre)+36])); err == nil {
			return id, nil
		}
	}
	return uuidv7.UUID{}, errors.New("the server answered a record that does not start with its id")
}

// stripTime turns a record's line {"id":…,"time":…,"data":…} into the
// compact row {"id":…,"data":…} that 'storh export' writes, in place.
func stripTime(line []byte) ([]byte, bool) {
	const pre, tm = `{"id":"`, `","time":"`
	i := len(pre) + 36
	if len(line) < i+len(tm) || string(line[:len(pre)]) != pre || string(line[i:i+len(tm)]) != tm {
		return line, false
	}
	j := i + len(tm)
	k := bytes.IndexByte(line[j:], '"')
	if k < 0 || j+k+1 >= len(line) || line[j+k+1] != ',' {
		return line, false
	}
	return append(line[:i+2], line[j+k+2:]...), true
}

func (s *httpStore) export(ctx context.Context, coll string, f *queryFlags, _ query.Query, w io.Writer, prog *progress) (int64, error) {
	body, err := s.client.Export(ctx, coll, f.selection(), f.limit)
	if err != nil {
		return 0, s.fail(ctx, err)
	}
	defer body.Close()
	var n int64
	in := linereader.New(body, jsonl.MaxLine)
	for {
		b, _, ok, tooLong, err := in.Next()
		if !ok {
			if err == io.EOF {
				return n, nil
			}
			if ctx.Err() != nil {
				return n, errors.New("interrupted")
			}
			return n, fmt.Errorf("the export from %s broke off: %v", s.where(), err)
		}
		if tooLong {
			return n, fmt.Errorf("the export from %s holds a line longer than %s", s.where(), humanBytes(jsonl.MaxLine))
		}
		if len(b) == 0 {
			continue
		}
		row, ok := stripTime(b)
		if !ok {
			return n, fmt.Errorf("the export from %s holds a line that is not a record", s.where())
		}
		row = append(row, '\n')
		if _, err := w.Write(row); err != nil {
			return n, err
		}
		n++
		prog.records.Store(n)
	}
}

func (s *httpStore) put(coll, kind string, ids []uuidv7.UUID, items []any) ([]recLine, error) {
	one := ids != nil
	if ids == nil {
		ids = make([]uuidv7.UUID, len(items))
		uuidv7.NewBatch(ids)
	}
	var body []byte
	for i, item := range items {
		body = append(body, `{"id":"`...)
		body = append(body, ids[i].String()...)
		body = append(body, `","data":`...)
		var err error
		if body, err = jsonl.AppendValue(body, item); err != nil {
			return nil, &storh.Error{Op: "put", Collection: coll, Index: i, Err: fmt.Errorf("%w: %v", storh.ErrInvalidData, err)}
		}
		body = append(body, "}\n"...)
	}
	if _, err := s.client.Import(s.a.ctx, coll, kind, bytes.NewReader(body)); err != nil {
		var we *web.Error
		if !one && errors.As(err, &we) && we.Line > 0 {
			return nil, &storh.Error{Op: "put", Collection: coll, Index: we.Line - 1, Err: lineOnly(we)}
		}
		return nil, s.fail(s.a.ctx, err)
	}
	out := make([]recLine, len(ids))
	for i, id := range ids {
		line, err := s.get(coll, id)
		if err != nil {
			return nil, err
		}
		out[i] = recLine{ID: id, Line: line}
	}
	return out, nil
}

func (s *httpStore) discard(string, bool) {}

func (s *httpStore) deleteIDs(coll string, ids []uuidv7.UUID) (deleted, missing int64, err error) {
	for _, id := range ids {
		// A GET tells deleted from not there; a damaged record is there,
		// and can be deleted.
		if _, err := s.get(coll, id); errors.Is(err, storh.ErrNotFound) {
			missing++
			continue
		} else if err != nil && !errors.Is(err, storh.ErrCorrupt) {
			return deleted, missing, err
		}
		if err := s.client.Delete(s.a.ctx, coll, id); err != nil {
			return deleted, missing, s.fail(s.a.ctx, err)
		}
		deleted++
	}
	return deleted, missing, nil
}

func (s *httpStore) explain(ctx context.Context, coll string, f *queryFlags, _ query.Query) (storh.Plan, error) {
	if f.limit <= 0 {
		s.a.diag("storh: over HTTP, explain runs the query with the server's page size as its limit; give --limit to choose it")
	}
	out, err := s.client.Explain(s.a.ctx, coll, f.selection(), f.limit)
	if err != nil {
		return storh.Plan{}, s.fail(s.a.ctx, err)
	}
	return planOfWeb(out), nil
}

// planOfWeb is the storh.Plan of the API's Plan.
func planOfWeb(out web.Plan) storh.Plan {
	p := storh.Plan{Query: out.Query, Sorted: out.Sorted, KeysRead: out.KeysRead, RecordsRead: out.RecordsRead, Returned: out.Returned}
	if len(out.Indexes) > 0 {
		p.Indexes = out.Indexes
	}
	return p
}

func (s *httpStore) indexes(coll string) ([]storh.IndexInfo, error) {
	out, err := s.client.Indexes(s.a.ctx, coll)
	if err != nil {
		return nil, s.fail(s.a.ctx, err)
	}
	var infos []storh.IndexInfo
	for _, ix := range out {
		info := storh.IndexInfo{Name: ix.Name, Paths: ix.Paths, Unique: ix.Unique, Entries: ix.Entries, Building: ix.Building,
			Layout: ix.Layout, Journaled: ix.Journaled}
		if ix.Built != nil {
			info.Built = *ix.Built
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func (s *httpStore) schema(coll string) ([]byte, error) {
	doc, err := s.client.Schema(s.a.ctx, coll)
	if err != nil {
		return nil, s.fail(s.a.ctx, err)
	}
	return doc, nil
}

func (s *httpStore) setSchema(coll string, doc []byte) error {
	return s.fail(s.a.ctx, s.client.SetSchema(s.a.ctx, coll, doc))
}

// queueStats reads the counts of api/queues/{name}, and the queue's size
// from api/stats (a queue's statistics are its collection's).
func (s *httpStore) queueStats(name string) (storh.QueueStats, error) {
	out, err := s.client.Queue(s.a.ctx, name)
	if err != nil {
		return storh.QueueStats{}, s.fail(s.a.ctx, err)
	}
	st, err := s.stats()
	if err != nil {
		return storh.QueueStats{}, err
	}
	qs := storh.QueueStats{Pending: out.Pending, Scheduled: out.Scheduled, Claimed: out.Claimed, Done: out.Done, Dead: out.Dead}
	for _, c := range st.Collections {
		if c.Name == name {
			qs.CollectionInfo = c
		}
	}
	return qs, nil
}

// verify reads the verify stream: a line per problem, then the report,
// with the error that stopped the run, if any, beside it.
func (s *httpStore) verify(ctx context.Context, colls []string, report func(storh.Problem)) (storh.VerifyReport, error) {
	out, err := s.client.Verify(ctx, colls, func(p web.Problem) {
		pr := storh.Problem{Kind: storh.ProblemKind(p.Kind), Collection: p.Collection, Detail: p.Detail}
		if p.ID != "" {
			pr.ID, _ = uuidv7.Parse(p.ID)
		}
		if p.Key != "" {
			pr.Key, _ = hex.DecodeString(p.Key)
		}
		report(pr)
	})
	rep := storh.VerifyReport{Collections: out.Collections, Records: out.Records, Problems: out.Problems}
	var we *web.Error
	switch {
	case err == nil, errors.As(err, &we):
		return rep, s.fail(ctx, err)
	case ctx.Err() != nil:
		return rep, context.Canceled
	}
	return rep, s.fail(ctx, err)
}

// last reads the last n records with newest=1, page after page, and gives
// them oldest first.
func (s *httpStore) last(ctx context.Context, coll string, n int) ([]recLine, error) {
	f := &queryFlags{reverse: true, limit: n}
	var recs []recLine
	for rec, err := range s.stream(ctx, coll, f, query.Query{}) {
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	slices.Reverse(recs)
	return recs, nil
}

// tailResumable are the kinds of a tail's last event after which the CLI
// connects again with Last-Event-ID, as an EventSource would: the rest
// (corrupt, not_found…) would only come again.
var tailResumable = map[string]bool{"lagged": true, "timeout": true, "watch_lost": true, "unavailable": true}

// follow reads the tail endpoint from after (from=0, every record, when
// the collection was empty), and connects again with Last-Event-ID when
// the stream breaks off or ends with a resumable error event, waiting
// interval first. Like the file path it prints only records with ids
// after the last one printed: a Docs record written again, or a record
// with an older id, is not shown again.
func (s *httpStore) follow(ctx context.Context, coll string, after uuidv7.UUID, interval time.Duration, p *recordPrinter) error {
	from := "0"
	if !after.IsZero() {
		from = after.String()
	}
	last := after
	return s.reconnecting(ctx, "the tail", true, interval, p.flush, func() (bool, error) {
		return s.tailOnce(ctx, coll, from, &last, p)
	})
}

// reconnecting runs once, one connection of a stream (what: "the tail",
// "the changes"), until ctx ends; when follow is set it connects again
// after interval each time the stream breaks off or ends with a resumable
// error event, as an EventSource would, and once resumes where the last
// connection stopped. flush writes out what was printed after each
// connection. It notes a break once, until a connection starts again; the
// server's tail limit (WithTailLimit) is routine, with no note.
func (s *httpStore) reconnecting(ctx context.Context, what string, follow bool, interval time.Duration, flush func() error, once func() (started bool, err error)) error {
	retrying := false
	for {
		started, err := once()
		if ferr := flush(); ferr != nil && ctx.Err() == nil {
			return ferr
		}
		if ctx.Err() != nil {
			return nil
		}
		if err == nil && !follow {
			return nil
		}
		var we *web.Error
		if !follow || (errors.As(err, &we) && !tailResumable[we.Kind]) {
			return s.fail(ctx, err)
		}
		if started {
			retrying = false
		}
		routine := errors.As(err, &we) && we.Kind == web.KindTimeout
		if !routine && !retrying {
			s.a.diag("storh: %s from %s broke off (%v); connecting again", what, s.where(), err)
			retrying = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// tailOnce reads one connection of the tail endpoint, printing the
// records after *last and moving *last on. live says the stream started.
// It returns why the stream ended: an error event's (a *web.Error), the
// connection's, or an answer that is an error (a *web.Error too).
func (s *httpStore) tailOnce(ctx context.Context, coll, from string, last *uuidv7.UUID, p *recordPrinter) (live bool, err error) {
	live, err = s.client.Tail(ctx, coll, from, *last, func(rec json.RawMessage, more bool) error {
		id, err := lineID(rec)
		if err != nil {
			return err
		}
		if id.Compare(*last) <= 0 {
			return nil
		}
		if err := p.printLine(append(rec, '\n')); err != nil {
			return err
		}
		*last = id
		if !more {
			return p.flush()
		}
		return nil
	})
	var we *web.Error
	if errors.As(err, &we) || ctx.Err() != nil {
		return live, err
	}
	return live, s.fail(ctx, err)
}

// importLines reads in whole and sends it in one POST …/import, which the
// server writes in one transaction: all or nothing. create names the kind,
// so a new collection is made as on a file; an input of blank lines only
// makes none. The flags the endpoint cannot honour are refused before
// (importOpts.overHTTP), so im's options are the endpoint's own. A bad
// line comes back as a *jsonl.LineError, with the hint the file path adds
// to a line that does not decode.
func (s *httpStore) importLines(ctx context.Context, coll, kind string, created bool, in io.Reader, im *importer, prog *progress) (rep jsonl.ImportReport, removedFile bool, err error) {
	body, err := io.ReadAll(&countingReader{r: in, prog: prog})
	if err != nil {
		if ctx.Err() != nil {
			return rep, false, ctx.Err()
		}
		return rep, false, fmt.Errorf("cannot read %s: %v", im.src, err)
	}
	first, _, _ := bytes.Cut(body, []byte("\n"))
	im.mongoLike = looksLikeMongo(first)
	if created && len(bytes.TrimSpace(body)) == 0 {
		rep.Lines = bytes.Count(body, []byte("\n"))
		if len(body) > 0 && body[len(body)-1] != '\n' {
			rep.Lines++
		}
		return rep, false, nil
	}
	out, err := s.client.Import(ctx, coll, kind, bytes.NewReader(body))
	if err != nil {
		var we *web.Error
		if errors.As(err, &we) && we.Line > 0 {
			var lerr error = lineOnly(we)
			if we.Kind == web.KindBadRequest {
				lerr = importHint(lineOf(body, we.Line), we, false, im.src)
			}
			return rep, false, &jsonl.LineError{Line: we.Line, Err: lerr}
		}
		return rep, false, s.fail(ctx, err)
	}
	rep = jsonl.ImportReport{Lines: out.Lines, Imported: out.Imported, Inserted: out.Inserted, Replaced: out.Replaced}
	prog.records.Store(int64(out.Imported))
	return rep, false, nil
}

// lineOnly cuts the message of an import's error at a line to what storh
// said of the line: the handler's is "web: import into …, nothing
// written: line 2: …".
func lineOnly(we *web.Error) *web.Error {
	if _, after, ok := strings.Cut(we.Message, fmt.Sprintf("line %d: ", we.Line)); ok {
		we.Message = after
	}
	return we
}

// lineOf gives line n (1-based) of b, without its newline.
func lineOf(b []byte, n int) []byte {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(b, '\n')
		if j < 0 {
			return nil
		}
		b = b[j+1:]
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return line
}

// countingReader moves a progress bar's bytes on as its input is read.
type countingReader struct {
	r    io.Reader
	prog *progress
	n    int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.prog.bytes.Store(c.n)
	return n, err
}
