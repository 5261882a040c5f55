package web

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/storhdb/storh-go/storh"
)

// queueCounts serves GET api/queues/{name}: the jobs in each state. It
// reads a counter per state, whatever the queue's size.
func (h *handler) queueCounts(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	name := r.PathValue("name")
	// WithoutCreate, as for every name from a request: a typo must not
	// make a queue.
	q, err := h.db.Queue(name, storh.WithoutCreate())
	if errors.Is(err, storh.ErrWrongKind) {
		err = &apiError{status: http.StatusConflict, kind: KindWrongKind, err: err,
			msg: fmt.Sprintf("web: collection %q is not a queue: its records are under api/collections", name)}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	n, err := q.Counts()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, QueueCounts{Name: name, Pending: n.Pending, Scheduled: n.Scheduled, Claimed: n.Claimed, Done: n.Done, Dead: n.Dead})
}
