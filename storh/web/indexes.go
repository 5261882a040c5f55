package web

import (
	"net/http"
)

// indexes serves GET api/collections/{name}/indexes.
func (h *handler) indexes(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	c, err := h.collection(r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	infos, err := c.Indexes()
	if err != nil {
		writeError(w, err)
		return
	}
	out := IndexList{Indexes: make([]Index, 0, len(infos))}
	for _, i := range infos {
		ij := Index{Name: i.Name, Paths: i.Paths, Unique: i.Unique, Entries: i.Entries, Building: i.Building,
			Layout: i.Layout, Journaled: i.Journaled}
		if i.FoldError != nil {
			ij.FoldError = i.FoldError.Error()
		}
		if i.Building {
			built := i.Built
			ij.Built = &built
		}
		out.Indexes = append(out.Indexes, ij)
	}
	writeJSON(w, http.StatusOK, out)
}
