package web

import (
	"net/http"
)

// explain serves GET api/collections/{name}/explain: it runs the query the
// same parameters give the records endpoint, with the page's limit, and
// says how it ran.
func (h *handler) explain(w http.ResponseWriter, r *http.Request) {
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
	plan, err := c.ExplainContext(r.Context(), p.q.Limit(p.limit))
	if err != nil {
		writeError(w, err)
		return
	}
	out := Plan{Query: plan.Query, Indexes: plan.Indexes, Sorted: plan.Sorted,
		KeysRead: plan.KeysRead, RecordsRead: plan.RecordsRead, Returned: plan.Returned, Text: plan.String()}
	if out.Indexes == nil {
		out.Indexes = []string{}
	}
	writeJSON(w, http.StatusOK, out)
}
