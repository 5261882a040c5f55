package web

import (
	"net/http"
	"strings"
	"time"
)

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
	out := Stats{Backend: "file", Commits: st.Commits, DirectReadsOff: st.DirectReadsOff, Collections: make([]Collection, 0, len(st.Collections))}
	// storh names a PostgreSQL store by its URL and has no other way to
	// tell the backend.
	if strings.HasPrefix(st.Path, "postgres://") || strings.HasPrefix(st.Path, "postgresql://") {
		out.Backend, out.Reruns = "postgresql", &st.Reruns
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
