package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/storhdb/storh-go/internal/linereader"
	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Client calls the HTTP API of a Handler from another Go program, as the
// storh CLI's --url does. Each call takes a context, and an error the API
// answers is an *Error that wraps the storh sentinel of the same failure,
// so errors.Is(err, storh.ErrNotFound) holds through the client as it does
// on the database. A Client is safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
	// purgeStep is the limit a purge asks of each step (0: the server's);
	// tests lower it to cross steps with few jobs.
	purgeStep int
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithHTTPClient makes the client send its requests with hc (its transport,
// TLS settings, proxy) rather than a client of its own. hc's Timeout, if
// any, also bounds the streams (export, verify, tail).
func WithHTTPClient(hc *http.Client) ClientOption {
	return func(c *Client) { c.http = hc }
}

// NewClient returns a client of the handler mounted at base, an http or
// https URL ("http://127.0.0.1:7070", "https://app.example/debug/storh"),
// sending token as a bearer token when it is not empty.
func NewClient(base, token string, opts ...ClientOption) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("web: client URL %q: %v", base, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("web: client URL %q: use an http:// or https:// address, like http://127.0.0.1:7070", base)
	}
	c := &Client{base: strings.TrimSuffix(base, "/"), token: strings.TrimSpace(token), http: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// URL is the address the client calls, without a final slash.
func (c *Client) URL() string { return c.base }

// CloseIdleConnections closes the connections the client keeps open
// between calls.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Error is an error the API answered: its kind (the Kind constants), its
// message, the line of an import's body (or the job of an enqueue's) at
// fault, and, in Err, the storh
// sentinel the kind stands for (nil for a kind that has none, such as
// unauthorized).
type Error struct {
	Status  int
	Kind    string
	Message string
	Line    int
	// Item is the job of an enqueue at fault, 1-based (0: none).
	Item int
	Err  error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// kindErrors maps the kinds back to storh's sentinels: the inverse of
// classify, where one kind stands for several errors the first of them.
var kindErrors = map[string]error{
	KindNotFound:        storh.ErrNotFound,
	KindReadOnly:        storh.ErrReadOnly,
	KindForbidden:       storh.ErrReadOnly,
	KindUniqueViolation: storh.ErrUniqueViolation,
	KindExists:          storh.ErrExists,
	KindWrongKind:       storh.ErrWrongKind,
	KindAppendOnly:      storh.ErrWrongKind,
	KindLocked:          storh.ErrLocked,
	KindCorrupt:         storh.ErrCorrupt,
	KindUnsupported:     storh.ErrUnsupported,
	KindUnavailable:     storh.ErrClosed,
	KindFull:            storh.ErrTooLarge,
	KindTimeout:         context.DeadlineExceeded,
	KindBadRequest:      storh.ErrInvalidData,
	KindInvalidQuery:    storh.ErrInvalidQuery,
	KindInvalidPatch:    storh.ErrInvalidPatch,
	KindNoIndex:         storh.ErrNoIndex,
	KindCursorNotFound:  storh.ErrCursorNotFound,
	KindConflict:        storh.ErrNotEmpty,
	KindNotClaimed:      storh.ErrNotClaimed,
	KindClaimed:         storh.ErrClaimed,
	KindNotDead:         storh.ErrNotDead,
	KindInvalidOption:   storh.ErrInvalidOption,
	KindSchema:          storh.ErrSchema,
	KindInvalidSchema:   storh.ErrInvalidOption,
	KindChangesTrimmed:  storh.ErrChangesTrimmed,
}

// ErrNotAPI is wrapped by the error for an answer that is not one of the
// API's: the URL is most likely not where a Handler is mounted.
var ErrNotAPI = errors.New("web: not an answer of the storh API")

// errorOfInfo makes the *Error of an error the API sent.
func errorOfInfo(status int, info ErrorInfo) *Error {
	return &Error{Status: status, Kind: info.Kind, Message: info.Message, Line: info.Line, Item: info.Item, Err: kindErrors[info.Kind]}
}

// answerError reads an error answer.
func (c *Client) answerError(resp *http.Response) error {
	var body ErrorResponse
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(b, &body); err != nil || body.Error.Kind == "" {
		return fmt.Errorf("%w: %s answered %s", ErrNotAPI, c.base, resp.Status)
	}
	return errorOfInfo(resp.StatusCode, body.Error)
}

// do sends a request and returns the response when it is a success; the
// caller closes its body. A failure to reach the server is the
// *url.Error of net/http.
func (c *Client) do(ctx context.Context, method, path string, vals url.Values, body io.Reader, header http.Header) (*http.Response, error) {
	u := c.base + "/" + path
	if len(vals) > 0 {
		u += "?" + vals.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("web: client: %v", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, c.answerError(resp)
	}
	return resp, nil
}

// ErrAnswer is wrapped by the error for a success answer that does not
// decode as the API writes it, or that holds a line longer than any the
// API writes (jsonl.MaxLine), which the client does not read on.
var ErrAnswer = errors.New("web: cannot read the answer")

// getJSON decodes the JSON answer of a GET into v.
func (c *Client) getJSON(ctx context.Context, path string, vals url.Values, v any) error {
	resp, err := c.do(ctx, http.MethodGet, path, vals, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%w of %s: %v", ErrAnswer, c.base, err)
	}
	return nil
}

func collPath(coll string) string { return "api/collections/" + url.PathEscape(coll) }

// Selection is what the records, count, export and explain endpoints
// select: their parameters (docs/web.md). The zero Selection is every
// record in id order.
type Selection struct {
	// Where are conditions that must all hold, sent as one condition q
	// in its JSON form.
	Where []query.Cond
	// Order is the path of the field to sort by, as its segments; nil
	// for id order. Desc sorts descending.
	Order []string
	Desc  bool
	// After and Before are cursors (zero for none): ids in id order,
	// records' places with Order.
	After, Before uuidv7.UUID
	// FromMs and UntilMs bound the creation time, in Unix milliseconds,
	// both inclusive; nil for an open end.
	FromMs, UntilMs *int64
	// Newest reads last first.
	Newest bool
	// RequireIndex fails with storh.ErrNoIndex rather than read the
	// whole collection.
	RequireIndex bool
}

// values gives the parameters of s, and of limit when it is above 0.
func (s Selection) values(limit int) (url.Values, error) {
	vals := url.Values{}
	if !s.After.IsZero() {
		vals.Set("after", s.After.String())
	}
	if !s.Before.IsZero() {
		vals.Set("before", s.Before.String())
	}
	if s.FromMs != nil {
		vals.Set("from", strconv.FormatInt(*s.FromMs, 10))
	}
	if s.UntilMs != nil {
		vals.Set("until", strconv.FormatInt(*s.UntilMs, 10))
	}
	if len(s.Where) > 0 {
		q, err := json.Marshal(query.And(s.Where...))
		if err != nil {
			return nil, err
		}
		vals.Set("q", string(q))
	}
	if s.Order != nil {
		// Literal segments, so that a key holding a dot stays one key.
		o, err := json.Marshal(s.Order)
		if err != nil {
			return nil, err
		}
		if s.Desc {
			o = append([]byte{'-'}, o...)
		}
		vals.Set("order", string(o))
	}
	if s.Newest {
		vals.Set("newest", "1")
	}
	if s.RequireIndex {
		vals.Set("require_index", "1")
	}
	if limit > 0 {
		vals.Set("limit", strconv.Itoa(limit))
	}
	return vals, nil
}

// Stats gives the statistics of the database and of every collection.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	err := c.getJSON(ctx, "api/stats", nil, &out)
	return out, err
}

// Collections lists the collections with their statistics.
func (c *Client) Collections(ctx context.Context) ([]Collection, error) {
	var out CollectionList
	err := c.getJSON(ctx, "api/collections", nil, &out)
	return out.Collections, err
}

// Get gives a record as its line of a JSON lines export
// ({"id":…,"time":…,"data":{…}}), without the newline.
func (c *Client) Get(ctx context.Context, coll string, id uuidv7.UUID) (json.RawMessage, error) {
	return c.record(c.do(ctx, http.MethodGet, collPath(coll)+"/records/"+id.String(), nil, nil, nil))
}

// Patch applies changes, in order and all or none, to a record of a Docs
// collection and gives the record as it then is, as Get gives it. A change
// that cannot apply is an *Error that wraps storh.ErrInvalidPatch; a
// record that is not there, storh.ErrNotFound.
func (c *Client) Patch(ctx context.Context, coll string, id uuidv7.UUID, changes []PatchChange) (json.RawMessage, error) {
	if changes == nil {
		// The API wants a list: nil would be sent as null.
		changes = []PatchChange{}
	}
	body, err := json.Marshal(changes)
	if err != nil {
		return nil, fmt.Errorf("web: client: patch: %w: %v", storh.ErrInvalidPatch, err)
	}
	return c.record(c.do(ctx, http.MethodPatch, collPath(coll)+"/records/"+id.String(), nil, bytes.NewReader(body),
		http.Header{"Content-Type": {"application/json"}}))
}

// record reads an answer that is one record.
func (c *Client) record(resp *http.Response, err error) (json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%w of %s: %v", ErrAnswer, c.base, err)
	}
	return bytes.TrimSuffix(b, []byte("\n")), nil
}

// Records reads one page of what sel selects, of at most limit records
// (the server lowers a larger limit to its page size; 0 asks for that
// size). Page.Next continues it: as sel.After, or sel.Before with Newest.
func (c *Client) Records(ctx context.Context, coll string, sel Selection, limit int) (Page, error) {
	var out Page
	vals, err := sel.values(limit)
	if err == nil {
		err = c.getJSON(ctx, collPath(coll)+"/records", vals, &out)
	}
	return out, err
}

// Count counts what sel selects, up to limit when it is above 0.
func (c *Client) Count(ctx context.Context, coll string, sel Selection, limit int) (int, error) {
	var out CountResult
	vals, err := sel.values(limit)
	if err == nil {
		err = c.getJSON(ctx, collPath(coll)+"/count", vals, &out)
	}
	return out.Count, err
}

// Explain runs what sel selects, limit records of it (the server's page
// size when 0), and says how it ran.
func (c *Client) Explain(ctx context.Context, coll string, sel Selection, limit int) (Plan, error) {
	var out Plan
	vals, err := sel.values(limit)
	if err == nil {
		err = c.getJSON(ctx, collPath(coll)+"/explain", vals, &out)
	}
	return out, err
}

// Aggregate groups what sel selects by the groupBy paths and computes
// aggs over each group, as storh's Aggregate does on the server, and gives
// the groups with their values decoded as jsonl.DecodeValue decodes a
// record's (int64, float64, time.Time, uuidv7.UUID…): what Aggregate gave
// there. sel's Order, Newest and RequireIndex are not for aggregates: the
// server refuses them.
func (c *Client) Aggregate(ctx context.Context, coll string, sel Selection, groupBy []string, aggs []Aggregation) ([]storh.Group, error) {
	var out AggregateResult
	vals, err := sel.aggregateValues(groupBy, aggs)
	if err == nil {
		err = c.getJSON(ctx, collPath(coll)+"/aggregate", vals, &out)
	}
	if err != nil {
		return nil, err
	}
	groups := make([]storh.Group, len(out.Groups))
	for i, g := range out.Groups {
		key, err := jsonl.DecodeValue(g.Key)
		if err == nil {
			groups[i].Key, _ = key.([]any)
			var values any
			values, err = jsonl.DecodeValue(g.Values)
			groups[i].Values, _ = values.(map[string]any)
		}
		if err != nil || groups[i].Key == nil || groups[i].Values == nil {
			return nil, fmt.Errorf("%w of %s: group %d is not a key list and a values object: %v", ErrAnswer, c.base, i, err)
		}
	}
	return groups, nil
}

// ExplainAggregate runs Aggregate with the same arguments on the server
// and says how it read.
func (c *Client) ExplainAggregate(ctx context.Context, coll string, sel Selection, groupBy []string, aggs []Aggregation) (Plan, error) {
	var out Plan
	vals, err := sel.aggregateValues(groupBy, aggs)
	if err == nil {
		vals.Set("explain", "1")
		err = c.getJSON(ctx, collPath(coll)+"/aggregate", vals, &out)
	}
	return out, err
}

// aggregateValues gives the parameters of an aggregate of s.
func (s Selection) aggregateValues(groupBy []string, aggs []Aggregation) (url.Values, error) {
	vals, err := s.values(0)
	if err != nil {
		return nil, err
	}
	vals["group"] = groupBy
	for _, a := range aggs {
		vals.Add("agg", a.param())
	}
	return vals, nil
}

// Export streams what sel selects, up to limit records when it is above
// 0, as JSON lines ({"id":…,"time":…,"data":{…}} each). The caller closes
// the reader; a stream that breaks off ends in an error other than io.EOF.
func (c *Client) Export(ctx context.Context, coll string, sel Selection, limit int) (io.ReadCloser, error) {
	vals, err := sel.values(limit)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, http.MethodGet, collPath(coll)+"/export", vals, nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Import writes the JSON lines of body (as Export gives them) into coll,
// all or nothing, creating it of the kind create ("docs" or "log") when it
// does not exist; create "" imports only into an existing collection. A
// bad line's *Error has its Line.
func (c *Client) Import(ctx context.Context, coll, create string, body io.Reader) (ImportReport, error) {
	var vals url.Values
	if create != "" {
		vals = url.Values{"create": {create}}
	}
	resp, err := c.do(ctx, http.MethodPost, collPath(coll)+"/import", vals, body, http.Header{"Content-Type": {"application/x-ndjson"}})
	if err != nil {
		return ImportReport{}, err
	}
	defer resp.Body.Close()
	var out ImportReport
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("%w of %s: %v", ErrAnswer, c.base, err)
	}
	return out, nil
}

// Delete deletes a record of a Docs collection; an id that is not there
// is not an error.
func (c *Client) Delete(ctx context.Context, coll string, id uuidv7.UUID) error {
	resp, err := c.do(ctx, http.MethodDelete, collPath(coll)+"/records/"+id.String(), nil, nil, nil)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// Indexes lists the indexes of a Docs collection or Log.
func (c *Client) Indexes(ctx context.Context, coll string) ([]Index, error) {
	var out IndexList
	err := c.getJSON(ctx, collPath(coll)+"/indexes", nil, &out)
	return out.Indexes, err
}

// Schema gives the JSON Schema of a collection, or nil when it has none.
func (c *Client) Schema(ctx context.Context, coll string) (json.RawMessage, error) {
	var out SchemaDoc
	err := c.getJSON(ctx, collPath(coll)+"/schema", nil, &out)
	return schemaOf(out), err
}

// SetSchema gives a collection a JSON Schema, as storh.DB.SetSchema does;
// nil removes its schema. Records that fail the new schema are an *Error
// wrapping storh.ErrSchema, a document that is not a schema one wrapping
// storh.ErrInvalidOption.
func (c *Client) SetSchema(ctx context.Context, coll string, schema []byte) error {
	method, body := http.MethodPut, io.Reader(bytes.NewReader(schema))
	if schema == nil {
		method, body = http.MethodDelete, nil
	}
	resp, err := c.do(ctx, method, collPath(coll)+"/schema", nil, body, http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// schemaOf is the schema of an answer: nil for JSON's null.
func schemaOf(d SchemaDoc) json.RawMessage {
	if len(d.Schema) == 0 || bytes.Equal(d.Schema, []byte("null")) {
		return nil
	}
	return d.Schema
}

// Queue counts the jobs of a queue by state.
func (c *Client) Queue(ctx context.Context, name string) (QueueCounts, error) {
	var out QueueCounts
	err := c.getJSON(ctx, "api/queues/"+url.PathEscape(name), nil, &out)
	return out, err
}

// Verify checks the store, or only the named collections, handing each
// problem to problem as its line comes, and gives the report. An error
// that stopped the run comes with the report of what was checked.
func (c *Client) Verify(ctx context.Context, colls []string, problem func(Problem)) (VerifyReport, error) {
	vals := url.Values{}
	for _, name := range colls {
		vals.Add("collection", name)
	}
	resp, err := c.do(ctx, http.MethodPost, "api/verify", vals, nil, nil)
	if err != nil {
		return VerifyReport{}, err
	}
	defer resp.Body.Close()
	in := linereader.New(resp.Body, jsonl.MaxLine)
	for {
		b, _, ok, tooLong, err := in.Next()
		if tooLong {
			return VerifyReport{}, fmt.Errorf("%w: the verify from %s holds a line longer than %d bytes", ErrAnswer, c.base, jsonl.MaxLine)
		}
		if ok && len(bytes.TrimSpace(b)) > 0 {
			var line VerifyLine
			if jerr := json.Unmarshal(b, &line); jerr != nil {
				return VerifyReport{}, fmt.Errorf("%w: the verify from %s holds a line that is not JSON: %v", ErrAnswer, c.base, jerr)
			}
			switch {
			case line.Problem != nil:
				problem(*line.Problem)
				continue
			case line.Report != nil && line.Error != nil:
				return *line.Report, errorOfInfo(resp.StatusCode, *line.Error)
			case line.Report != nil:
				return *line.Report, nil
			}
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return VerifyReport{}, fmt.Errorf("the verify from %s broke off without a report: %w", c.base, err)
		}
	}
}

// Tail reads the tail endpoint of coll once: the records written after
// from (an id, a time as the records endpoint's from takes it, "0" for
// every record, "" for those written from now on), or after lastEventID
// when it is not zero, as an EventSource resuming. Each record's JSON (a
// Page's record) goes to each, with more reporting that more of the stream
// has already arrived, so a caller that flushes output can wait for the
// last. Tail returns why the stream ended: the *Error of an error event
// (KindTimeout at the server's tail limit), the connection's error, or
// each's; started says whether the server accepted the stream, so a
// caller that connects again can tell a stream that broke off from one
// that was refused.
func (c *Client) Tail(ctx context.Context, coll, from string, lastEventID uuidv7.UUID, each func(rec json.RawMessage, more bool) error) (started bool, err error) {
	header := http.Header{"Accept": {"text/event-stream"}}
	if !lastEventID.IsZero() {
		header.Set("Last-Event-ID", lastEventID.String())
	}
	var vals url.Values
	if from != "" {
		vals = url.Values{"from": {from}}
	}
	resp, err := c.do(ctx, http.MethodGet, collPath(coll)+"/tail", vals, nil, header)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	return true, c.readEvents(resp, "the tail", func(event string, data []byte, more bool) (bool, error) {
		if len(data) == 0 {
			return false, nil
		}
		return false, each(json.RawMessage(data), more)
	})
}

// readEvents reads the Server-Sent Events of a stream (a tail, a change
// feed) and hands each event's name and data to each, with whether more
// of the stream is buffered, until each says it is done, the stream ends
// or an "error" event says why the server ended it. An event's data is
// one record's JSON, which fits a JSON line of an export: a longer line is
// not the server's, and is not kept. what names the stream in errors.
func (c *Client) readEvents(resp *http.Response, what string, each func(event string, data []byte, more bool) (done bool, err error)) error {
	in := linereader.New(resp.Body, jsonl.MaxLine)
	var event string
	var data []byte
	for {
		line, _, ok, tooLong, err := in.Next()
		if tooLong {
			return fmt.Errorf("%w: %s from %s holds a line longer than %d bytes", ErrAnswer, what, c.base, jsonl.MaxLine)
		}
		if !ok {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if len(data)+len(line) > jsonl.MaxLine {
			return fmt.Errorf("%w: %s from %s holds an event longer than %d bytes", ErrAnswer, what, c.base, jsonl.MaxLine)
		}
		if len(line) == 0 {
			// The end of an event.
			ev, d := event, data
			event, data = "", data[:0]
			if ev == "error" {
				var body ErrorResponse
				if err := json.Unmarshal(d, &body); err != nil || body.Error.Kind == "" {
					return fmt.Errorf("%w: %s from %s ended with an error event that is not an error of the API", ErrNotAPI, what, c.base)
				}
				return errorOfInfo(resp.StatusCode, body.Error)
			}
			if done, err := each(ev, d, in.Buffered()); done || err != nil {
				return err
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
