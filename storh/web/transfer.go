package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync/atomic"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
)

// export serves GET api/collections/{name}/export: the records that the
// parameters of a page select, every one of them (no limit unless one is
// given, and then not lowered to the page size), as JSON lines, written by
// jsonl.Export as they are read. An empty result is an empty body.
func (h *handler) export(w http.ResponseWriter, r *http.Request) {
	c, err := h.collection(r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	p, err := h.parseWhole(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	q := p.q
	if p.limit > 0 {
		q = q.Limit(p.limit)
	}
	sw := &startWriter{w: w}
	if _, err := jsonl.Export(r.Context(), sw, c, q); err != nil {
		switch {
		case !sw.started:
			writeError(w, err)
		case errors.Is(r.Context().Err(), context.Canceled):
			// The client went away: nobody reads the response.
		default:
			// The status is sent: cut the connection, so that the client
			// sees a broken response, not a short export.
			panic(http.ErrAbortHandler)
		}
		return
	}
	sw.start()
}

// startWriter sends the status and content type of a JSON lines stream
// before its first bytes, so that an export that fails before writing
// anything still answers with an error status.
type startWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startWriter) start() {
	if !s.started {
		s.w.Header().Set("Content-Type", "application/x-ndjson")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
}

func (s *startWriter) Write(b []byte) (int, error) {
	s.start()
	return s.w.Write(b)
}

// importRecords serves POST api/collections/{name}/import (WithWrites):
// the body, JSON lines as an export writes them, into the collection, all
// or nothing. jsonl.Import alone commits in batches, so a bad line after
// the first batch would leave the rows before it written; here it runs
// inside one Update, which rolls back when it fails.
//
// The body is received whole before the import waits for its turn, so that
// a slow client holds up neither a writer nor the other imports: it only
// spends its own request's time, and gets 408 when that runs out. Imports
// then run one at a time (they would wait for each other's transactions
// anyway). The bodies held in memory, received or being received, are
// bounded together by twice WithMaxImport (one imported while the next
// arrives); past that an import is refused with 503 busy.
func (h *handler) importRecords(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) {
		return
	}
	name := r.PathValue("name")
	kind, create, err := h.importKind(r, name)
	if err != nil {
		writeError(w, err)
		return
	}
	body, release, err := h.readBulkBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	select {
	case h.importing <- struct{}{}:
		defer func() { <-h.importing }()
	case <-r.Context().Done():
		writeError(w, fmt.Errorf("web: waiting for another import to end: %w", r.Context().Err()))
		return
	}
	var rep jsonl.ImportReport
	err = h.db.Update(func(tx *storh.Tx) error {
		var opts []storh.CollectionOption
		if !create {
			opts = append(opts, storh.WithoutCreate())
		}
		var c storh.Collection
		if kind == "log" {
			l, err := tx.Log(name, opts...)
			if err != nil {
				return err
			}
			c = l
		} else {
			d, err := tx.Docs(name, opts...)
			if err != nil {
				return err
			}
			c = d
		}
		var err error
		rep, err = jsonl.Import(r.Context(), bytes.NewReader(body), c)
		return err
	})
	if err != nil {
		writeError(w, fmt.Errorf("web: import into %q, nothing written: %w", name, err))
		return
	}
	writeJSON(w, http.StatusOK, ImportReport{Collection: name, Kind: kind, Lines: rep.Lines,
		Imported: rep.Imported, Inserted: rep.Inserted, Replaced: rep.Replaced})
}

// readBulkBody reads the body of a write of many records or jobs (an
// import, an enqueue), up to WithMaxImport, counting its bytes against
// the budget of such bodies in memory while they arrive and until release
// gives them back; past the budget it is 503 busy.
func (h *handler) readBulkBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err error) {
	held := &heldReader{r: r.Body, held: &h.importBytes, budget: h.importBudget()}
	r.Body = held
	body, err = readBody(w, r, h.cfg.maxImport)
	if errors.Is(err, errImportsBusy) {
		// The rest of the body is still on its way: it is not read.
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		err = &apiError{status: http.StatusServiceUnavailable, kind: KindBusy, err: err,
			msg: fmt.Sprintf("web: import and enqueue bodies in memory would pass %d bytes, the most they may hold (twice WithMaxImport): try again once the imports running end", held.budget)}
	}
	if err != nil {
		held.release()
		return nil, nil, err
	}
	return body, held.release, nil
}

// importBudget is the most bytes of import bodies held at once: twice
// WithMaxImport, so that one body can arrive while another is imported.
func (h *handler) importBudget() int64 {
	if h.cfg.maxImport > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return 2 * h.cfg.maxImport
}

// errImportsBusy is heldReader's refusal of bytes past the budget.
var errImportsBusy = errors.New("web: import bodies are over their memory budget")

// heldReader counts the bytes it reads into held, the bytes of import
// bodies in memory, as they arrive (a Content-Length is only a claim: a
// client that declares much and sends little holds little), and fails
// once held passes budget. release gives them back.
type heldReader struct {
	r      io.ReadCloser
	held   *atomic.Int64
	budget int64
	n      int64
}

func (h *heldReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.n += int64(n)
	if h.held.Add(int64(n)) > h.budget {
		return n, errImportsBusy
	}
	return n, err
}

func (h *heldReader) Close() error { return h.r.Close() }

func (h *heldReader) release() { h.held.Add(-h.n) }

// importKind reads the create parameter and says which kind of collection
// the import writes to: the collection's own, or, for one that does not
// exist, the kind create names. Without create a missing collection is
// 404, as everywhere in the API: a typo must not make one.
func (h *handler) importKind(r *http.Request, name string) (kind string, create bool, err error) {
	vals := r.URL.Query()
	for k, vs := range vals {
		if k != "create" {
			return "", false, badRequest(fmt.Sprintf("web: unknown parameter %q; the parameter is create (docs or log)", k))
		}
		if len(vs) > 1 {
			return "", false, badRequest(fmt.Sprintf("web: parameter %q is given %d times; give it once", k, len(vs)))
		}
	}
	want := vals.Get("create")
	if want != "" && want != "docs" && want != "log" {
		return "", false, badRequest(fmt.Sprintf("web: parameter create=%q: use docs or log", want))
	}
	c, err := h.collection(name)
	switch {
	case err == nil && want != "" && c.Kind() != want:
		return "", false, &apiError{status: http.StatusConflict, kind: KindWrongKind, err: storh.ErrWrongKind,
			msg: fmt.Sprintf("web: create=%s: collection %q exists, and is a %s", want, name, c.Kind())}
	case err == nil:
		return c.Kind(), false, nil
	case errors.Is(err, storh.ErrNotFound) && want != "":
		return want, true, nil
	}
	return "", false, err
}
