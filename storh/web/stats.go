package web

import (
	"net/http"
	"strings"
	"time"
)

// statsJSON is storh.Stats as the API writes it. The file-only fields are
// pointers, left out on PostgreSQL, so that a client never reads a 0 there
// as a measurement. The path is never written: it names a file or a
// server, and nothing in the API needs it.
type statsJSON struct {
	Backend     string           `json:"backend"`
	FileSize    *int64           `json:"file_size,omitempty"`
	FreeBytes   *int64           `json:"free_bytes,omitempty"`
	Commits     int64            `json:"commits"`
	PageWrites  *int64           `json:"page_writes,omitempty"`
	CommitIOMs  *float64         `json:"commit_io_ms,omitempty"`
	Collections []collectionJSON `json:"collections"`
	// FoldError joins the failures of the blocked indexes' last folds in
	// the serving process, when any failed.
	FoldError string `json:"fold_error,omitempty"`
	// DirectReadsOff is storh.Stats' note: written only when the file's
	// reads go through bbolt's buckets.
	DirectReadsOff string `json:"direct_reads_off,omitempty"`
}

// stats serves GET api/stats. Like the collections endpoint, it reads
// counters and the ends of each collection, never its records.
func (h *handler) stats(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	st, err := h.db.Stats()
	if err != nil {
		writeError(w, err)
		return
	}
	out := statsJSON{Backend: "file", Commits: st.Commits, DirectReadsOff: st.DirectReadsOff, Collections: make([]collectionJSON, 0, len(st.Collections))}
	// storh names a PostgreSQL store by its URL and has no other way to
	// tell the backend.
	if strings.HasPrefix(st.Path, "postgres://") || strings.HasPrefix(st.Path, "postgresql://") {
		out.Backend = "postgresql"
	} else {
		ms := float64(st.CommitIOTime) / float64(time.Millisecond)
		out.FileSize, out.FreeBytes, out.PageWrites, out.CommitIOMs = &st.FileSize, &st.FreeBytes, &st.PageWrites, &ms
	}
	for _, c := range st.Collections {
		out.Collections = append(out.Collections, collectionOf(c))
	}
	if st.FoldError != nil {
		out.FoldError = st.FoldError.Error()
	}
	writeJSON(w, http.StatusOK, out)
}
