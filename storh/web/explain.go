package web

import (
	"net/http"

	"github.com/storhdb/storh-go/storh"
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
	writeJSON(w, http.StatusOK, planOf(plan))
}

// planOf is p as the API writes it.
func planOf(p storh.Plan) Plan {
	out := Plan{Query: p.Query, Indexes: p.Indexes, Sorted: p.Sorted,
		KeysRead: p.KeysRead, RecordsRead: p.RecordsRead, Returned: p.Returned, Text: p.String()}
	if out.Indexes == nil {
		out.Indexes = []string{}
	}
	return out
}
