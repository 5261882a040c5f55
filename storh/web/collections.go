package web

import (
	"fmt"
	"net/http"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
)

func collectionOf(c storh.CollectionInfo) Collection {
	out := Collection{Name: c.Name, Kind: c.Kind, Records: c.Records, Bytes: c.Bytes}
	// Times in the layout of a record's "time" (jsonl.TimeLayout), so that
	// a client compares them as they are.
	if !c.FirstID.IsZero() {
		out.FirstID, out.FirstTime = c.FirstID.String(), c.FirstTime().UTC().Format(jsonl.TimeLayout)
	}
	if !c.LastID.IsZero() {
		out.LastID, out.LastTime = c.LastID.String(), c.LastTime().UTC().Format(jsonl.TimeLayout)
	}
	return out
}

// listCollections serves GET api/collections.
func (h *handler) listCollections(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	cs, err := h.db.Collections()
	if err != nil {
		writeError(w, err)
		return
	}
	out := CollectionList{Collections: make([]Collection, 0, len(cs))}
	for _, c := range cs {
		out.Collections = append(out.Collections, collectionOf(c))
	}
	writeJSON(w, http.StatusOK, out)
}

// collectionStats serves GET api/collections/{name}. It reads the
// statistics of every collection and keeps one: storh reads one only
// through a handle of the right kind, and these are counters, not scans.
func (h *handler) collectionStats(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	name := r.PathValue("name")
	cs, err := h.db.Collections()
	if err != nil {
		writeError(w, err)
		return
	}
	for _, c := range cs {
		if c.Name == name {
			out := collectionOf(c)
			if c.Kind != "queue" {
				// Whether it has a change feed: the page follows its
				// changes, deletes included, rather than its new records.
				if err := h.feedOf(name, &out); err != nil {
					writeError(w, err)
					return
				}
			}
			writeJSON(w, http.StatusOK, out)
			return
		}
	}
	writeError(w, notFound(name))
}

// notFound is the error for a collection that does not exist.
func notFound(name string) error {
	return &apiError{status: http.StatusNotFound, kind: KindNotFound, err: storh.ErrNotFound,
		msg: fmt.Sprintf("web: collection %q does not exist", name)}
}

// noParams answers 400 and returns false when r has query parameters,
// which an endpoint without any would otherwise silently ignore.
func noParams(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery == "" {
		return true
	}
	writeError(w, badRequest("web: this endpoint takes no parameters"))
	return false
}
