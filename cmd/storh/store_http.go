package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// httpPage is the number of records the HTTP store asks for per page: the
// handler's default page size (web.WithMaxPage), which lowers a larger one.
const httpPage = 1000

// httpStore is a store over the JSON API of package storh/web, mounted in
// a running application or served by 'storh serve' (docs/web.md).
type httpStore struct {
	a      *app
	base   string // the URL, without a final slash
	token  string
	client *http.Client
}

func (a *app) newHTTPStore() *httpStore {
	token := a.token
	if !a.tokenGiven {
		token = a.getenv(envToken)
	}
	return &httpStore{a: a, base: a.url, token: strings.TrimSpace(token), client: &http.Client{}}
}

func (s *httpStore) where() string { return s.base }
func (s *httpStore) close() error  { s.client.CloseIdleConnections(); return nil }

// remoteError is an error response of the API, mapped back to the storh
// error the same failure gives on a file (err), so that the commands word
// it and exit as they do there.
type remoteError struct {
	status int
	kind   string
	msg    string
	line   int
	err    error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }

// kindErrors maps the API's error kinds to storh's sentinels.
var kindErrors = map[string]error{
	"not_found":        storh.ErrNotFound,
	"read_only":        storh.ErrReadOnly,
	"forbidden":        storh.ErrReadOnly,
	"unique_violation": storh.ErrUniqueViolation,
	"exists":           storh.ErrExists,
	"wrong_kind":       storh.ErrWrongKind,
	"append_only":      storh.ErrWrongKind,
	"locked":           storh.ErrLocked,
	"corrupt":          storh.ErrCorrupt,
	"unsupported":      storh.ErrUnsupported,
	"unavailable":      storh.ErrClosed,
	"full":             storh.ErrTooLarge,
	"timeout":          context.DeadlineExceeded,
	"bad_request":      storh.ErrInvalidData,
	"invalid_query":    storh.ErrInvalidQuery,
	"no_index":         storh.ErrNoIndex,
	"cursor_not_found": storh.ErrCursorNotFound,
	"conflict":         storh.ErrNotEmpty,
}

// apiError reads an error response.
func (s *httpStore) apiError(resp *http.Response) error {
	var body struct {
		Error struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
			Line    int    `json:"line"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(b, &body); err != nil || body.Error.Kind == "" {
		return fmt.Errorf("%s answered %s, not an error of the storh API: is --url the address where the handler is mounted?", s.base, resp.Status)
	}
	e := &remoteError{status: resp.StatusCode, kind: body.Error.Kind, msg: body.Error.Message, line: body.Error.Line, err: kindErrors[body.Error.Kind]}
	switch e.kind {
	case "forbidden":
		e.msg = fmt.Sprintf("the server at %s is read-only: writes need 'storh serve --write' (or web.WithWrites in the application)", s.base)
	case "unauthorized":
		if s.token == "" {
			e.msg = fmt.Sprintf("the server at %s needs a token: set %s (or pass --token)", s.base, envToken)
		} else {
			e.msg = fmt.Sprintf("the server at %s refused the token: check %s (or --token)", s.base, envToken)
		}
	}
	return e
}

// do sends a request and returns the response when it is a success; the
// caller closes its body.
func (s *httpStore) do(ctx context.Context, method, path string, vals url.Values, body io.Reader, ctype string) (*http.Response, error) {
	u := s.base + "/" + path
	if len(vals) > 0 {
		u += "?" + vals.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, usagef("--url %s: %v", s.base, err)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, errors.New("interrupted")
		}
		return nil, fmt.Errorf("cannot reach the server at %s: %v", s.base, unwrapURLError(err))
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, s.apiError(resp)
	}
	return resp, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// getJSON decodes the JSON answer of a GET into v.
func (s *httpStore) getJSON(path string, vals url.Values, v any) error {
	resp, err := s.do(s.a.ctx, http.MethodGet, path, vals, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("reading the answer of %s: %v", s.base, err)
	}
	return nil
}

func collPath(coll string) string { return "api/collections/" + url.PathEscape(coll) }

// apiCollection is a collection's statistics as the API writes them.
type apiCollection struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Records int    `json:"records"`
	Bytes   int64  `json:"bytes"`
	FirstID string `json:"first_id"`
	LastID  string `json:"last_id"`
}

func (s *httpStore) stats() (storh.Stats, error) {
	var out struct {
		Backend        string          `json:"backend"`
		FileSize       int64           `json:"file_size"`
		FreeBytes      int64           `json:"free_bytes"`
		Commits        int64           `json:"commits"`
		PageWrites     int64           `json:"page_writes"`
		DirectReadsOff string          `json:"direct_reads_off"`
		Collections    []apiCollection `json:"collections"`
	}
	if err := s.getJSON("api/stats", nil, &out); err != nil {
		return storh.Stats{}, err
	}
	st := storh.Stats{Path: s.base, FileSize: out.FileSize, FreeBytes: out.FreeBytes, Commits: out.Commits, PageWrites: out.PageWrites, DirectReadsOff: out.DirectReadsOff}
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
	resp, err := s.do(s.a.ctx, http.MethodGet, collPath(coll)+"/records/"+id.String(), nil, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %v", s.base, err)
	}
	return b, nil
}

func (s *httpStore) countMatching(ctx context.Context, coll string, f *queryFlags, _ query.Query) (int, error) {
	vals, err := f.apiParams()
	if err != nil {
		return 0, err
	}
	var out struct {
		Count int `json:"count"`
	}
	if err := s.getJSON(collPath(coll)+"/count", vals, &out); err != nil {
		return 0, err
	}
	return out.Count, nil
}

func (s *httpStore) stream(ctx context.Context, coll string, f *queryFlags, _ query.Query) iter.Seq2[recLine, error] {
	return func(yield func(recLine, error) bool) {
		vals, err := f.apiParams()
		if err != nil {
			yield(recLine{}, err)
			return
		}
		left := f.limit
		for {
			n := httpPage
			if left > 0 && left < n {
				n = left
			}
			vals.Set("limit", strconv.Itoa(n))
			var page struct {
				Records []json.RawMessage `json:"records"`
				Next    string            `json:"next"`
			}
			if err := s.getJSON(collPath(coll)+"/records", vals, &page); err != nil {
				yield(recLine{}, err)
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
			if f.reverse {
				vals.Set("before", page.Next)
			} else {
				vals.Set("after", page.Next)
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
	vals, err := f.apiParams()
	if err != nil {
		return 0, err
	}
	if f.limit > 0 {
		vals.Set("limit", strconv.Itoa(f.limit))
	}
	resp, err := s.do(ctx, http.MethodGet, collPath(coll)+"/export", vals, nil, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var n int64
	in := newLineReader(resp.Body)
	for {
		b, _, ok, tooLong, err := in.next()
		if !ok {
			if err == io.EOF {
				return n, nil
			}
			if ctx.Err() != nil {
				return n, errors.New("interrupted")
			}
			return n, fmt.Errorf("the export from %s broke off: %v", s.base, err)
		}
		if tooLong {
			return n, fmt.Errorf("the export from %s holds a line longer than %s", s.base, humanBytes(maxLine))
		}
		if len(b) == 0 {
			continue
		}
		row, ok := stripTime(b)
		if !ok {
			return n, fmt.Errorf("the export from %s holds a line that is not a record", s.base)
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
	vals := url.Values{"create": {kind}}
	resp, err := s.do(s.a.ctx, http.MethodPost, collPath(coll)+"/import", vals, bytes.NewReader(body), "application/x-ndjson")
	if err != nil {
		var re *remoteError
		if !one && errors.As(err, &re) && re.line > 0 {
			// The message is the handler's ("web: import into …, nothing
			// written: line 2: …"): keep what storh said of the line.
			if _, after, ok := strings.Cut(re.msg, fmt.Sprintf("line %d: ", re.line)); ok {
				re.msg = after
			}
			return nil, &storh.Error{Op: "put", Collection: coll, Index: re.line - 1, Err: re}
		}
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
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
		path := collPath(coll) + "/records/" + id.String()
		// A GET tells deleted from not there; a damaged record is there,
		// and can be deleted.
		if _, err := s.get(coll, id); errors.Is(err, storh.ErrNotFound) {
			missing++
			continue
		} else if err != nil && !errors.Is(err, storh.ErrCorrupt) {
			return deleted, missing, err
		}
		resp, err := s.do(s.a.ctx, http.MethodDelete, path, nil, nil, "")
		if err != nil {
			return deleted, missing, err
		}
		resp.Body.Close()
		deleted++
	}
	return deleted, missing, nil
}

func (s *httpStore) explain(ctx context.Context, coll string, f *queryFlags, _ query.Query) (storh.Plan, error) {
	vals, err := f.apiParams()
	if err != nil {
		return storh.Plan{}, err
	}
	if f.limit > 0 {
		vals.Set("limit", strconv.Itoa(f.limit))
	} else {
		s.a.diag("storh: over HTTP, explain runs the query with the server's page size as its limit; give --limit to choose it")
	}
	var out struct {
		Query       string   `json:"query"`
		Indexes     []string `json:"indexes"`
		Sorted      bool     `json:"sorted"`
		KeysRead    int      `json:"keys_read"`
		RecordsRead int      `json:"records_read"`
		Returned    int      `json:"returned"`
	}
	if err := s.getJSON(collPath(coll)+"/explain", vals, &out); err != nil {
		return storh.Plan{}, err
	}
	p := storh.Plan{Query: out.Query, Sorted: out.Sorted, KeysRead: out.KeysRead, RecordsRead: out.RecordsRead, Returned: out.Returned}
	if len(out.Indexes) > 0 {
		p.Indexes = out.Indexes
	}
	return p, nil
}

func (s *httpStore) indexes(coll string) ([]storh.IndexInfo, error) {
	var out struct {
		Indexes []struct {
			Name      string     `json:"name"`
			Paths     [][]string `json:"paths"`
			Unique    bool       `json:"unique"`
			Entries   int        `json:"entries"`
			Building  bool       `json:"building"`
			Built     int        `json:"built"`
			Layout    string     `json:"layout"`
			Journaled int        `json:"journaled"`
		} `json:"indexes"`
	}
	if err := s.getJSON(collPath(coll)+"/indexes", nil, &out); err != nil {
		return nil, err
	}
	var infos []storh.IndexInfo
	for _, ix := range out.Indexes {
		infos = append(infos, storh.IndexInfo{Name: ix.Name, Paths: ix.Paths, Unique: ix.Unique, Entries: ix.Entries, Building: ix.Building, Built: ix.Built,
			Layout: ix.Layout, Journaled: ix.Journaled})
	}
	return infos, nil
}

// queueStats reads the counts of api/queues/{name}, and the queue's size
// from api/stats (a queue's statistics are its collection's).
func (s *httpStore) queueStats(name string) (storh.QueueStats, error) {
	var out struct {
		Pending int `json:"pending"`
		Claimed int `json:"claimed"`
		Done    int `json:"done"`
		Dead    int `json:"dead"`
	}
	if err := s.getJSON("api/queues/"+url.PathEscape(name), nil, &out); err != nil {
		return storh.QueueStats{}, err
	}
	st, err := s.stats()
	if err != nil {
		return storh.QueueStats{}, err
	}
	qs := storh.QueueStats{Pending: out.Pending, Claimed: out.Claimed, Done: out.Done, Dead: out.Dead}
	for _, c := range st.Collections {
		if c.Name == name {
			qs.CollectionInfo = c
		}
	}
	return qs, nil
}

// verify reads the JSON lines of POST api/verify: a line per problem, then
// the report, with the error that stopped the run, if any, beside it.
func (s *httpStore) verify(ctx context.Context, colls []string, report func(storh.Problem)) (storh.VerifyReport, error) {
	vals := url.Values{}
	for _, c := range colls {
		vals.Add("collection", c)
	}
	resp, err := s.do(ctx, http.MethodPost, "api/verify", vals, nil, "")
	if err != nil {
		return storh.VerifyReport{}, err
	}
	defer resp.Body.Close()
	var rep storh.VerifyReport
	in := newLineReader(resp.Body)
	for {
		b, _, ok, tooLong, err := in.next()
		if !ok {
			if ctx.Err() != nil {
				return rep, context.Canceled
			}
			if err == io.EOF {
				err = errors.New("the stream ended without a report")
			}
			return rep, fmt.Errorf("the verify from %s broke off: %v", s.base, err)
		}
		if tooLong {
			return rep, fmt.Errorf("the verify from %s holds a line longer than %s", s.base, humanBytes(maxLine))
		}
		if len(b) == 0 {
			continue
		}
		var line struct {
			Problem *struct {
				Kind       string `json:"kind"`
				Collection string `json:"collection"`
				ID         string `json:"id"`
				Key        string `json:"key"`
				Detail     string `json:"detail"`
			} `json:"problem"`
			Error *struct {
				Kind    string `json:"kind"`
				Message string `json:"message"`
			} `json:"error"`
			Report *struct {
				Collections int `json:"collections"`
				Records     int `json:"records"`
				Problems    int `json:"problems"`
			} `json:"report"`
		}
		if err := json.Unmarshal(b, &line); err != nil {
			return rep, fmt.Errorf("the verify from %s holds a line that is not JSON: %v", s.base, err)
		}
		if p := line.Problem; p != nil {
			pr := storh.Problem{Kind: storh.ProblemKind(p.Kind), Collection: p.Collection, Detail: p.Detail}
			if p.ID != "" {
				pr.ID, _ = uuidv7.Parse(p.ID)
			}
			if p.Key != "" {
				pr.Key, _ = hex.DecodeString(p.Key)
			}
			report(pr)
			continue
		}
		if r := line.Report; r != nil {
			rep = storh.VerifyReport{Collections: r.Collections, Records: r.Records, Problems: r.Problems}
			if e := line.Error; e != nil {
				return rep, &remoteError{status: resp.StatusCode, kind: e.Kind, msg: e.Message, err: kindErrors[e.Kind]}
			}
			return rep, nil
		}
	}
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
	retrying := false
	for {
		live, err := s.tailOnce(ctx, coll, from, &last, p)
		if ferr := p.flush(); ferr != nil && ctx.Err() == nil {
			return ferr
		}
		if ctx.Err() != nil {
			return nil
		}
		var re *remoteError
		if errors.As(err, &re) && !tailResumable[re.kind] {
			return err
		}
		if live {
			retrying = false
		}
		// The server's tail limit (WithTailLimit) is routine: no note.
		routine := errors.As(err, &re) && re.kind == "timeout"
		if !routine && !retrying {
			s.a.diag("storh: the tail from %s broke off (%v); connecting again", s.base, err)
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
// It returns why the stream ended: an error event's (a *remoteError), the
// connection's, or an answer that is an error (a *remoteError too).
func (s *httpStore) tailOnce(ctx context.Context, coll, from string, last *uuidv7.UUID, p *recordPrinter) (live bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/"+collPath(coll)+"/tail?"+url.Values{"from": {from}}.Encode(), nil)
	if err != nil {
		return false, usagef("--url %s: %v", s.base, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if !last.IsZero() {
		// As an EventSource reconnecting: it wins over from.
		req.Header.Set("Last-Event-ID", last.String())
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false, fmt.Errorf("cannot reach the server at %s: %v", s.base, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return false, s.apiError(resp)
	}
	in := bufio.NewReader(resp.Body)
	var event string
	var data []byte
	for {
		line, err := in.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long record: read the rest of the line.
			rest, rerr := in.ReadBytes('\n')
			line, err = append(append([]byte(nil), line...), rest...), rerr
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return live, err
		}
		live = true
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			// The end of an event.
			ev, d := event, data
			event, data = "", data[:0]
			switch {
			case ev == "error":
				return live, s.tailError(resp, d)
			case len(d) == 0:
				continue
			}
			id, err := lineID(d)
			if err != nil {
				return live, err
			}
			if id.Compare(*last) <= 0 {
				continue
			}
			if err := p.printLine(append(d, '\n')); err != nil {
				return live, err
			}
			*last = id
			if in.Buffered() == 0 {
				if err := p.flush(); err != nil {
					return live, err
				}
			}
			continue
		}
		if line[0] == ':' {
			continue // a comment: the start, or a heartbeat
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, value...)
		}
	}
}

// tailError reads the data of a tail's error event.
func (s *httpStore) tailError(resp *http.Response, d []byte) error {
	var body struct {
		Error struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(d, &body); err != nil || body.Error.Kind == "" {
		return fmt.Errorf("the tail from %s ended with an error event that is not an error of the storh API", s.base)
	}
	return &remoteError{status: resp.StatusCode, kind: body.Error.Kind, msg: body.Error.Message, err: kindErrors[body.Error.Kind]}
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
	vals := url.Values{"create": {kind}}
	resp, err := s.do(ctx, http.MethodPost, collPath(coll)+"/import", vals, bytes.NewReader(body), "application/x-ndjson")
	if err != nil {
		var re *remoteError
		if errors.As(err, &re) && re.line > 0 {
			// The message is the handler's ("web: import into …, nothing
			// written: line 2: …"): keep what storh said of the line.
			if _, after, ok := strings.Cut(re.msg, fmt.Sprintf("line %d: ", re.line)); ok {
				re.msg = after
			}
			var lerr error = re
			if re.kind == "bad_request" {
				lerr = importHint(lineOf(body, re.line), re, false, im.src)
			}
			return rep, false, &jsonl.LineError{Line: re.line, Err: lerr}
		}
		return rep, false, err
	}
	defer resp.Body.Close()
	var out struct {
		Lines    int `json:"lines"`
		Imported int `json:"imported"`
		Inserted int `json:"inserted"`
		Replaced int `json:"replaced"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return rep, false, fmt.Errorf("reading the answer of %s: %v", s.base, err)
	}
	rep = jsonl.ImportReport{Lines: out.Lines, Imported: out.Imported, Inserted: out.Inserted, Replaced: out.Replaced}
	prog.records.Store(int64(out.Imported))
	return rep, false, nil
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
