package web

import (
	"net/http"
)

// count serves GET api/collections/{name}/count. Without parameters it
// reads the collection's counter (Count, O(1)); with any, it counts what
// the records endpoint would page through with the same parameters, all
// pages together (CountMatching, which reads an index or the records). A
// limit is not lowered to the page size: CountMatching counts up to it,
// which answers "are there at least n?" without counting them all.
func (h *handler) count(w http.ResponseWriter, r *http.Request) {
	c, err := h.collection(r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	vals := r.URL.Query()
	p, err := h.parseWhole(vals)
	if err != nil {
		writeError(w, err)
		return
	}
	var n int
	// parseWhole drops the empty parameters from vals: none left is the
	// whole collection, whose counter says it.
	if len(vals) == 0 {
		n, err = c.Count()
	} else {
		q := p.q
		if p.limit > 0 {
			q = q.Limit(p.limit)
		}
		n, err = c.CountMatchingContext(r.Context(), q)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, CountResult{Count: n})
}
