package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// tailWriteTimeout bounds each write of a tail: a client that stops
// reading (its TCP window full) would otherwise hold the handler in a
// Write for as long as the connection lives.
const tailWriteTimeout = 30 * time.Second

// tailEvent is what the watching goroutine hands the writing one: a
// record's id and JSON, or the error that ends the watch.
type tailEvent struct {
	id   uuidv7.UUID
	json []byte
	err  error
}

// tail serves GET api/collections/{name}/tail: the records committed to
// the collection as Server-Sent Events, from storh's Watch. Each record is
// an event whose data is the record's JSON as the records endpoint writes
// it and whose id is the record's id, so an EventSource that reconnects
// sends it back as Last-Event-ID and resumes after it. A comment every
// heartbeat keeps idle connections open through proxies.
func (h *handler) tail(w http.ResponseWriter, r *http.Request) {
	c, err := h.collection(r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	from, err := tailFrom(r)
	if err == nil && from.IsZero() {
		from, err = lastID(c)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if r.Method == "HEAD" {
		headEvents(w)
		return
	}

	h.tails.Add(1)
	defer h.tails.Add(-1)
	ctx, cancel := context.WithCancel(r.Context())
	events := make(chan tailEvent)
	var watching sync.WaitGroup
	// Deferred in this order so that they run in the other: stop the
	// watch, wait for its goroutine, then count the tail as ended.
	defer watching.Wait()
	defer cancel()
	watching.Add(1)
	go func() {
		defer watching.Done()
		for rec, err := range c.Watch(ctx, from) {
			ev := tailEvent{id: rec.ID, err: err}
			if err == nil {
				ev.json, ev.err = jsonl.AppendRecord(nil, rec.ID, rec.Raw())
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
			if ev.err != nil {
				return
			}
		}
	}()

	stream, ok := startEvents(w, "tail from "+from.String())
	if !ok {
		return
	}
	send := stream.send
	beat := time.NewTicker(h.cfg.heartbeat)
	defer beat.Stop()
	buf := make([]byte, 0, 4096)
	for {
		select {
		case <-beat.C:
			if !send([]byte(": heartbeat\n\n")) {
				return
			}
		case <-ctx.Done():
			// The watch may see it first and end without a word, if it
			// was handing over a record: the tail's limit is said here.
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				send(tailError(ctx.Err()))
			}
			return
		case ev := <-events:
			if ev.err != nil {
				if errors.Is(ev.err, context.Canceled) {
					return // the client went away: nobody to tell
				}
				send(tailError(ev.err))
				return
			}
			buf = appendEvent(buf[:0], ev.id.String(), ev.json)
			if !send(buf) {
				return
			}
		}
	}
}

// tailError is the event that ends a tail with err.
func tailError(err error) []byte {
	if errors.Is(err, context.DeadlineExceeded) {
		err = &apiError{status: http.StatusServiceUnavailable, kind: KindTimeout, err: err,
			msg: "web: the tail reached its time limit (WithTailLimit); connect again with Last-Event-ID to go on"}
	}
	_, body := errorOf(err)
	b := []byte("event: error\ndata: ")
	b, _ = appendJSON(b, body)
	return append(b, '\n')
}

// tailFrom reads where a tail starts: the Last-Event-ID header that an
// EventSource sends when it reconnects, which wins over the from parameter
// because the URL still holds the first connection's from. The zero id is
// "from now".
func tailFrom(r *http.Request) (uuidv7.UUID, error) {
	vals := r.URL.Query()
	for k, vs := range vals {
		if k != "from" {
			return uuidv7.UUID{}, badRequest(fmt.Sprintf("web: unknown parameter %q; the parameter is from", k))
		}
		if len(vs) > 1 {
			return uuidv7.UUID{}, badRequest(fmt.Sprintf("web: parameter %q is given %d times; give it once", k, len(vs)))
		}
	}
	if s := r.Header.Get("Last-Event-ID"); s != "" {
		id, err := uuidv7.Parse(s)
		if err != nil {
			return id, &apiError{status: http.StatusBadRequest, kind: KindBadRequest, err: storh.ErrInvalidID,
				msg: "web: header Last-Event-ID: " + err.Error()}
		}
		return id, nil
	}
	s := vals.Get("from")
	if s == "" {
		return uuidv7.UUID{}, nil
	}
	// An id is a cursor: the records after it. A time (RFC 3339 or
	// milliseconds, as the records endpoint's from) is the records created
	// from then on: the watch goes after the last id of the millisecond
	// before.
	if id, err := uuidv7.Parse(s); err == nil {
		return id, nil
	}
	ms, err := parseTimeMs("from", s)
	if err != nil {
		return uuidv7.UUID{}, badRequest(fmt.Sprintf("web: parameter from=%q: use a record id, RFC 3339 (2024-05-01T12:00:00Z) or Unix milliseconds", s))
	}
	if ms <= 0 {
		return uuidv7.MinForTimestampMs(0), nil
	}
	return uuidv7.MaxForTimestampMs(ms - 1), nil
}

// lastID is where a tail "from now" starts: the collection's last id, or,
// when it is empty, the smallest id there is. storh's Watch takes the zero
// id for "from now", but it subscribes only when its goroutine first runs,
// after the response has started: records written in between would be
// lost. From the last id, its catch-up delivers them.
func lastID(c storh.Collection) (uuidv7.UUID, error) {
	st, err := c.Stats()
	if err != nil {
		return uuidv7.UUID{}, err
	}
	if st.LastID.IsZero() {
		return uuidv7.MinForTimestampMs(0), nil
	}
	return st.LastID, nil
}
