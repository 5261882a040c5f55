package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/jsonv"
	"github.com/storhdb/storh-go/storh/jsonl"
)

// Change is one change of a collection's feed as the changes endpoint
// sends it: a record's JSON ({"id","time","data"}) with the change's
// place in the feed and what it did, {"seq":…,"op":"put",…}. A delete
// has no data.
type Change struct {
	Seq  uint64          `json:"seq"`
	Op   string          `json:"op"` // "put" or "delete"
	ID   string          `json:"id"`
	Time string          `json:"time"`
	Data json.RawMessage `json:"data,omitempty"`
}

// ChangesEnd is the data of the event that ends a changes stream that
// does not follow (follow=false): the Seq it read up to, where the next
// read starts.
type ChangesEnd struct {
	LastSeq uint64 `json:"last_seq"`
}

// AppendChange appends ev as the changes endpoint writes it, one JSON
// object and a newline (see Change): what `storh changes --json` prints
// for a change, on a file and over HTTP alike. On error dst comes back
// unchanged.
func AppendChange(dst []byte, ev storh.ChangeEvent) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, ev.Seq, 10)
	dst = append(dst, `,"op":"`...)
	dst = append(dst, ev.Op.String()...)
	dst = append(dst, `",`...)
	if ev.Op != storh.OpPut {
		dst = append(dst, `"id":"`...)
		dst, _ = ev.ID.AppendText(dst)
		dst = append(dst, `","time":"`...)
		dst = ev.ID.Time().UTC().AppendFormat(dst, jsonl.TimeLayout)
		return append(dst, "\"}\n"...), nil
	}
	// The record's own JSON, from its id on: {"id":…,"time":…,"data":…}.
	mark := len(dst)
	dst, err := jsonv.AppendRecord(dst, ev.ID, ev.Record.Raw())
	if err != nil {
		return dst[:start], err
	}
	return append(dst[:mark], dst[mark+1:]...), nil
}

// feeder is what the changes endpoint needs of a collection: *storh.Docs
// and *storh.Log have it.
type feeder interface {
	Feed() (storh.FeedInfo, error)
	Changes(ctx context.Context, after uint64) iter.Seq2[storh.ChangeEvent, error]
}

// changesAhead is how many changes the reading goroutine of a changes
// stream may have read ahead of the writing one.
const changesAhead = 64

// changeEvent is what the reading goroutine hands the writing one: a
// change's Seq and JSON, or the error that ends the stream.
type changeEvent struct {
	seq  uint64
	json []byte
	err  error
}

// changes serves GET api/collections/{name}/changes: the collection's
// change feed (storh's Changes) as Server-Sent Events, deletes included.
// Each change is an event whose id is its Seq and whose data is a Change,
// so an EventSource that reconnects sends the Seq back as Last-Event-ID
// and resumes after it, missing and repeating nothing. It follows the
// tail endpoint's conventions: a first comment once it is live, a comment
// every heartbeat, WithTailLimit, and an "error" event that ends it. With
// follow=false it sends the changes up to the last one at the request and
// ends with an "end" event (a ChangesEnd) instead of waiting.
func (h *handler) changes(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	after, hasAfter, follow, err := changesParams(r)
	if err != nil {
		writeError(w, err)
		return
	}
	c, err := h.collection(name)
	if err != nil {
		writeError(w, err)
		return
	}
	f, ok := c.(feeder)
	if !ok {
		writeError(w, fmt.Errorf("web: collection %q has no change feed", name))
		return
	}
	fi, err := f.Feed()
	if err != nil {
		writeError(w, err)
		return
	}
	if fi.Keep == 0 {
		writeError(w, &apiError{status: http.StatusNotFound, kind: KindNotFound, err: storh.ErrNotFound,
			msg: fmt.Sprintf("web: collection %q has no change feed; its tail (api/collections/%s/tail) follows its new records, or a program opens it with storh.WithChangeFeed", name, name)})
		return
	}
	if !hasAfter {
		after = fi.LastSeq
	}
	if after > fi.LastSeq {
		writeError(w, badRequest(fmt.Sprintf("web: changes after %d: the feed of %q has come only to %d", after, name, fi.LastSeq)))
		return
	}
	if r.Method == "HEAD" {
		headEvents(w)
		return
	}

	h.tails.Add(1)
	defer h.tails.Add(-1)
	ctx, cancel := context.WithCancel(r.Context())
	// Buffered: the reader runs ahead of the writes, and the writer
	// flushes only when it has nothing more in hand (one TCP write per
	// batch, not per change).
	events := make(chan changeEvent, changesAhead)
	var reading sync.WaitGroup
	// Deferred in this order so that they run in the other (see tail).
	defer reading.Wait()
	defer cancel()
	until := fi.LastSeq // without follow, where the stream ends
	reading.Add(1)
	go func() {
		defer reading.Done()
		if !follow && after >= until {
			return
		}
		for ev, err := range f.Changes(ctx, after) {
			ce := changeEvent{seq: ev.Seq, err: err}
			if err == nil {
				ce.json, ce.err = AppendChange(nil, ev)
			}
			select {
			case events <- ce:
			case <-ctx.Done():
				return
			}
			if ce.err != nil || (!follow && ev.Seq >= until) {
				return
			}
		}
	}()

	// Changes kept after after are there to read at once: the first of
	// them, or the error that they are gone, comes before the answer, so
	// a trimmed Seq is a 410 a client sees as such.
	var first *changeEvent
	if after < fi.LastSeq {
		select {
		case ce := <-events:
			if ce.err != nil {
				writeError(w, ce.err)
				return
			}
			first = &ce
		case <-ctx.Done():
			writeError(w, ctx.Err())
			return
		}
	}

	stream, ok := startEvents(w, "changes after "+strconv.FormatUint(after, 10))
	if !ok {
		return
	}
	write, send := stream.write, stream.send
	buf := make([]byte, 0, 4096)
	var seq [20]byte // a change's Seq in decimal
	last := after
	emit := func(ce changeEvent) bool {
		buf = appendEvent(buf[:0], strconv.AppendUint(seq[:0], ce.seq, 10), ce.json)
		last = ce.seq
		if len(events) > 0 {
			return write(buf) // the next one is here: flush after it
		}
		return send(buf)
	}
	end := func() {
		b := []byte("event: end\ndata: ")
		b, _ = appendJSON(b, ChangesEnd{LastSeq: last})
		send(append(b, '\n'))
	}
	if first != nil {
		if !emit(*first) {
			return
		}
	}
	if !follow && last >= until {
		end()
		return
	}
	beat := time.NewTicker(h.cfg.heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-beat.C:
			if !send([]byte(": heartbeat\n\n")) {
				return
			}
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				send(changesError(ctx.Err()))
			}
			return
		case ce := <-events:
			if ce.err != nil {
				if errors.Is(ce.err, context.Canceled) {
					return
				}
				send(changesError(ce.err))
				return
			}
			if !emit(ce) {
				return
			}
			if !follow && last >= until {
				end()
				return
			}
		}
	}
}

// changesError is the event that ends a changes stream with err.
func changesError(err error) []byte {
	if errors.Is(err, context.DeadlineExceeded) {
		err = &apiError{status: http.StatusServiceUnavailable, kind: KindTimeout, err: err,
			msg: "web: the changes stream reached its time limit (WithTailLimit); connect again with Last-Event-ID to go on"}
	}
	return tailError(err)
}

// changesParams reads where a changes stream starts and whether it
// follows: the Last-Event-ID header an EventSource sends when it
// reconnects wins over the after parameter, which the URL still holds
// from the first connection. Neither: from the last change, so only new
// ones come.
func changesParams(r *http.Request) (after uint64, has, follow bool, err error) {
	follow = true
	vals := r.URL.Query()
	for k, vs := range vals {
		if k != "after" && k != "follow" {
			return 0, false, false, badRequest(fmt.Sprintf("web: unknown parameter %q; the parameters are after and follow", k))
		}
		if len(vs) > 1 {
			return 0, false, false, badRequest(fmt.Sprintf("web: parameter %q is given %d times; give it once", k, len(vs)))
		}
	}
	if s := vals.Get("follow"); s != "" {
		if follow, err = strconv.ParseBool(s); err != nil {
			return 0, false, false, badRequest(fmt.Sprintf("web: parameter follow=%q: use true or false", s))
		}
	}
	if s := r.Header.Get("Last-Event-ID"); s != "" {
		after, err = strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, false, false, badRequest(fmt.Sprintf("web: header Last-Event-ID %q: a change's Seq, a whole number", s))
		}
		return after, true, follow, nil
	}
	if s := vals.Get("after"); s != "" {
		after, err = strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, false, false, badRequest(fmt.Sprintf("web: parameter after=%q: a change's Seq, a whole number (0: from the first change)", s))
		}
		return after, true, follow, nil
	}
	return 0, false, follow, nil
}

// feedOf fills in out's change feed.
func (h *handler) feedOf(name string, out *Collection) error {
	c, err := h.collection(name)
	if err != nil {
		return err
	}
	if f, ok := c.(feeder); ok {
		fi, err := f.Feed()
		if err != nil {
			return err
		}
		out.FeedKeep, out.LastSeq = fi.Keep, fi.LastSeq
	}
	return nil
}

// Changes reads the changes endpoint of coll once: the changes after the
// Seq after ("" for those to come from now on, "0" for every change from
// the first). Each goes to each as a Change and its JSON line (the
// object and a newline), with more reporting that more of the stream has
// already arrived, so a caller that flushes output can wait for the last.
// With follow, the stream goes on until ctx ends, the server's tail limit
// (an *Error of KindTimeout), an error or each's error; to resume, call
// Changes again with the Seq of the last change handled: nothing is
// missed or repeated. Without follow, Changes returns nil once it has the
// changes up to the last one at the request. A collection without a feed
// is an *Error wrapping storh.ErrNotFound, and an after whose next
// changes were trimmed one wrapping storh.ErrChangesTrimmed (status 410).
// started says whether the server accepted the stream, as Tail's does.
func (c *Client) Changes(ctx context.Context, coll, after string, follow bool, each func(ch Change, line json.RawMessage, more bool) error) (started bool, err error) {
	vals := url.Values{}
	if after != "" {
		vals.Set("after", after)
	}
	if !follow {
		vals.Set("follow", "false")
	}
	resp, err := c.do(ctx, http.MethodGet, collPath(coll)+"/changes", vals, nil, http.Header{"Accept": {"text/event-stream"}})
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	return true, c.readEvents(resp, "the changes", func(event string, data []byte, more bool) (bool, error) {
		switch {
		case event == "end":
			return true, nil
		case len(data) == 0:
			return false, nil
		}
		var ch Change
		if err := json.Unmarshal(data, &ch); err != nil || ch.Seq == 0 || (ch.Op != "put" && ch.Op != "delete") {
			return false, fmt.Errorf("%w: the changes from %s hold an event that is not a change", ErrAnswer, c.base)
		}
		line := append(append([]byte(nil), data...), '\n')
		return false, each(ch, json.RawMessage(line), more)
	})
}

// Collection reads the statistics of one collection, with its change
// feed (FeedKeep, LastSeq), which Collections leaves out: a client that
// follows the feed when there is one asks it first.
func (c *Client) Collection(ctx context.Context, name string) (Collection, error) {
	var out Collection
	err := c.getJSON(ctx, collPath(name), nil, &out)
	return out, err
}
