package web

import (
	"net/http"
)

// indexJSON is storh.IndexInfo as the API writes it.
type indexJSON struct {
	Name string `json:"name"`
	// Paths holds each field's path as its segments, not dotted: a key
	// may hold a dot.
	Paths    [][]string `json:"paths"`
	Unique   bool       `json:"unique"`
	Entries  int        `json:"entries"`
	Building bool       `json:"building"`
	// Built is the records indexed so far, only while Building: a built
	// index has no such count.
	Built *int `json:"built,omitempty"`
	// Layout is "blocks" or "keys"; Journaled, the changes a blocked
	// index has not folded into its blocks yet.
	Layout    string `json:"layout"`
	Journaled int    `json:"journaled"`
	// FoldError is why the index's last fold in the serving process
	// failed, when it did.
	FoldError string `json:"fold_error,omitempty"`
}

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
	out := struct {
		Indexes []indexJSON `json:"indexes"`
	}{Indexes: make([]indexJSON, 0, len(infos))}
	for _, i := range infos {
		ij := indexJSON{Name: i.Name, Paths: i.Paths, Unique: i.Unique, Entries: i.Entries, Building: i.Building,
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
