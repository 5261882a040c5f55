package web

import (
	"encoding/json"
	"net/http"
)

// getSchema serves GET api/collections/{name}/schema: the collection's
// JSON Schema, or null.
func (h *handler) getSchema(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	name := r.PathValue("name")
	if _, err := h.collection(name); err != nil {
		writeError(w, err)
		return
	}
	doc, err := h.db.Schema(name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, SchemaDoc{Schema: rawOrNull(doc)})
}

// putSchema serves PUT api/collections/{name}/schema: the body is the new
// JSON Schema, which every record must pass first (storh.DB.SetSchema).
func (h *handler) putSchema(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) || !noParams(w, r) {
		return
	}
	body, err := readBody(w, r, h.cfg.maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	h.setSchema(w, r.PathValue("name"), body)
}

// deleteSchema serves DELETE api/collections/{name}/schema: the
// collection keeps no schema.
func (h *handler) deleteSchema(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) || !noParams(w, r) {
		return
	}
	h.setSchema(w, r.PathValue("name"), nil)
}

func (h *handler) setSchema(w http.ResponseWriter, name string, doc []byte) {
	// Through h.collection: a queue is refused as it is everywhere else
	// in the API, with wrong_kind.
	if _, err := h.collection(name); err != nil {
		writeError(w, err)
		return
	}
	if err := h.db.SetSchema(name, doc); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, SchemaDoc{Schema: rawOrNull(doc)})
}

func rawOrNull(doc []byte) json.RawMessage {
	if doc == nil {
		return json.RawMessage("null")
	}
	return doc
}
