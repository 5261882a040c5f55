package web

import (
	"fmt"
	"net/http"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/jsonv"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// streamAfter is how much of a page is held before the response starts:
// a page that fails within it gets an error status; a larger one is sent
// as it is read, so that a page of big records does not sit in memory.
const streamAfter = 1 << 20

// listRecords serves GET api/collections/{name}/records: one page, and the
// cursor of the next. It reads one record more than the page holds, to
// know whether there is a next page without a second request finding an
// empty one.
func (h *handler) listRecords(w http.ResponseWriter, r *http.Request) {
	c, err := h.collection(r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	p, err := h.parsePage(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	buf := append(make([]byte, 0, 4096), `{"records":[`...)
	started := false
	n := 0
	var last, next uuidv7.UUID
	for rec, err := range c.StreamContext(r.Context(), p.q.Limit(p.limit+1)) {
		if err == nil && n == p.limit {
			next = last
			break
		}
		if err == nil {
			if n > 0 {
				buf = append(buf, ',')
			}
			// A record's JSON is its line of a JSON lines export,
			// without the newline.
			buf, err = jsonl.AppendRecord(buf, rec.ID, rec.Raw())
			if err == nil {
				buf = buf[:len(buf)-1]
			}
		}
		if err != nil {
			if started {
				// The status is sent: cut the connection, so that the
				// client sees a broken response, not a short page.
				panic(http.ErrAbortHandler)
			}
			writeError(w, err)
			return
		}
		n++
		last = rec.ID
		if len(buf) >= streamAfter {
			if !started {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				started = true
			}
			if _, err := w.Write(buf); err != nil {
				return // the client is gone
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, `],"next":"`...)
	if !next.IsZero() {
		buf = append(buf, next.String()...)
	}
	buf = append(buf, "\"}\n"...)
	if !started {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
	}
	w.Write(buf)
}

// recordID reads the {id} of a path.
func recordID(r *http.Request) (uuidv7.UUID, error) {
	id, err := uuidv7.Parse(r.PathValue("id"))
	if err != nil {
		return id, &apiError{status: http.StatusBadRequest, kind: KindBadRequest, err: storh.ErrInvalidID,
			msg: "web: record id: " + err.Error()}
	}
	return id, nil
}

// recordTarget finds the collection and record id a record's path names,
// answering with the error when it cannot.
func (h *handler) recordTarget(w http.ResponseWriter, r *http.Request) (storh.Collection, uuidv7.UUID, bool) {
	c, err := h.collection(r.PathValue("name"))
	if err == nil {
		var id uuidv7.UUID
		if id, err = recordID(r); err == nil {
			return c, id, true
		}
	}
	writeError(w, err)
	return nil, uuidv7.UUID{}, false
}

// writeRecord answers with one record, as a JSON lines export writes it.
func writeRecord(w http.ResponseWriter, status int, rec storh.Record) {
	b, err := jsonl.AppendRecord(nil, rec.ID, rec.Raw())
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// getRecord serves GET api/collections/{name}/records/{id}.
func (h *handler) getRecord(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	c, id, ok := h.recordTarget(w, r)
	if !ok {
		return
	}
	rec, err := c.Get(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeRecord(w, http.StatusOK, rec)
}

// putRecord serves PUT api/collections/{name}/records/{id}: in a Docs
// collection it stores or replaces the record; in a Log it appends one
// with a new id, and refuses an id the log has (ErrExists, 409).
func (h *handler) putRecord(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) || !noParams(w, r) {
		return
	}
	c, id, ok := h.recordTarget(w, r)
	if !ok {
		return
	}
	body, err := readBody(w, r, h.cfg.maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	// The body is the record's data, or the record as GET gives it
	// ({"id":…,"time":…,"data":{…}}): the forms of a JSON lines row.
	row, err := jsonv.DecodeRow(body)
	if err != nil {
		writeError(w, fmt.Errorf("web: body: %w", err))
		return
	}
	if !row.ID.IsZero() && row.ID != id {
		writeError(w, badRequest(fmt.Sprintf("web: body: the record's id %s is not the id of the URL, %s", row.ID, id)))
		return
	}
	if err := checkTime(row.Time, id); err != nil {
		writeError(w, err)
		return
	}
	rec, err := c.PutWithID(id, row.Data)
	if err != nil {
		writeError(w, err)
		return
	}
	writeRecord(w, http.StatusOK, rec)
}

// checkTime refuses a record's "time" that is not its id's creation time.
// The id carries the time, so a different one cannot be stored: taking the
// body would store a record whose time is not the one the client sent.
func checkTime(t any, id uuidv7.UUID) error {
	want := id.Time()
	var got time.Time
	switch t := t.(type) {
	case nil:
		return nil
	case time.Time:
		got = t
	case string:
		var err error
		if got, err = time.Parse(time.RFC3339Nano, t); err != nil {
			return badRequest(fmt.Sprintf("web: body: time %q is not an RFC 3339 time; a record's time is its id's, as GET gives it (%s), or left out",
				t, want.UTC().Format(jsonl.TimeLayout)))
		}
	default:
		return badRequest(fmt.Sprintf("web: body: time must be a string, as GET gives it (%s), or left out", want.UTC().Format(jsonl.TimeLayout)))
	}
	if !got.Equal(want) {
		return badRequest(fmt.Sprintf("web: body: time %s is not the creation time of id %s, which is %s: the id carries the time; leave time out, or put the record under an id of the time it should have",
			got.UTC().Format(time.RFC3339Nano), id, want.UTC().Format(jsonl.TimeLayout)))
	}
	return nil
}

// logRecordMethods are the methods a Log's record has: it cannot be
// deleted or patched.
const logRecordMethods = "GET, HEAD, PUT"

// docsRecord resolves the record a request names in a Docs collection;
// one in a Log is answered 405 (its records cannot be <verb>), with the
// methods it has.
func (h *handler) docsRecord(w http.ResponseWriter, r *http.Request, verb string) (*storh.Docs, uuidv7.UUID, bool) {
	c, id, ok := h.recordTarget(w, r)
	if !ok {
		return nil, id, false
	}
	d, ok := c.(*storh.Docs)
	if !ok {
		w.Header().Set("Allow", logRecordMethods)
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, kind: KindAppendOnly,
			msg: fmt.Sprintf("web: collection %q is a %s: its records are append-only and cannot be %s", c.Name(), c.Kind(), verb)})
		return nil, id, false
	}
	return d, id, true
}

// deleteRecord serves DELETE api/collections/{name}/records/{id}, of a
// Docs collection. Deleting an id that is not stored succeeds, as
// Docs.Delete does: the record is not there afterwards either way.
func (h *handler) deleteRecord(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) || !noParams(w, r) {
		return
	}
	d, id, ok := h.docsRecord(w, r, "deleted")
	if !ok {
		return
	}
	if err := d.Delete(id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
