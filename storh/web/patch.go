package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
)

// patchOps are the ops of a PatchChange, and which operand each takes.
var patchOps = map[string]string{
	"set": "value", "unset": "", "inc": "by", "push": "values", "pull": "value", "addToSet": "values",
}

// Change gives the storh.Change that p describes. A change that names no
// known op, lacks its operand or carries another op's is
// storh.ErrInvalidPatch, as is an operand that is not JSON of the record
// mapping; a bad path or amount is left to storh, which reports it as
// ErrInvalidPatch when the change is applied. The message says what the
// change should have been, for the client that sent it.
func (p PatchChange) Change() (storh.Change, error) {
	operand, known := patchOps[p.Op]
	if !known {
		return storh.Change{}, fmt.Errorf(`%w: op %q is not one of "set", "unset", "inc", "push", "pull", "addToSet"`, storh.ErrInvalidPatch, p.Op)
	}
	for _, other := range []struct {
		name    string
		present bool
	}{{"value", p.Value != nil}, {"by", p.By != nil}, {"values", p.Values != nil}} {
		if other.present && other.name != operand {
			return storh.Change{}, p.invalid("has %q, which %s does not take%s", other.name, p.Op, p.takes(operand))
		}
	}
	decode := func(name string, raw json.RawMessage) (any, error) {
		v, err := jsonl.DecodeValue(raw)
		if err != nil {
			return nil, p.invalid("%s: %v", name, err)
		}
		return v, nil
	}
	switch operand {
	case "value", "by":
		raw := p.Value
		if operand == "by" {
			raw = p.By
		}
		if raw == nil {
			return storh.Change{}, p.invalid("lacks %q%s", operand, p.takes(operand))
		}
		v, err := decode(operand, raw)
		if err != nil {
			return storh.Change{}, err
		}
		switch p.Op {
		case "set":
			return storh.Set(p.Path, v), nil
		case "pull":
			return storh.Pull(p.Path, v), nil
		}
		return storh.Inc(p.Path, v), nil
	case "values":
		vs := make([]any, len(p.Values))
		for i, raw := range p.Values {
			var err error
			if vs[i], err = decode(fmt.Sprintf("values[%d]", i), raw); err != nil {
				return storh.Change{}, err
			}
		}
		if p.Op == "push" {
			return storh.Push(p.Path, vs...), nil
		}
		return storh.AddToSet(p.Path, vs...), nil
	}
	return storh.Unset(p.Path), nil
}

func (p PatchChange) invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s %q: %s", storh.ErrInvalidPatch, p.Op, p.Path, fmt.Sprintf(format, args...))
}

// takes says which operand an op takes, for a message.
func (p PatchChange) takes(operand string) string {
	switch operand {
	case "":
		return "; unset takes only a path"
	case "values":
		return fmt.Sprintf(`; %s takes "values", a list`, p.Op)
	}
	return fmt.Sprintf("; %s takes %q", p.Op, operand)
}

// decodeChanges decodes a PATCH body: a JSON list of changes, nothing
// else, no field a PatchChange does not have.
func decodeChanges(body []byte) ([]storh.Change, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var list []PatchChange
	err := dec.Decode(&list)
	if err == nil {
		if _, end := dec.Token(); end != io.EOF {
			err = errors.New("more after the list")
		}
	}
	if err == nil && list == nil {
		err = errors.New("null")
	}
	if err != nil {
		return nil, badRequest(fmt.Sprintf(`web: body: not a list of changes such as [{"op":"set","path":"a.b","value":1}]: %v`, err))
	}
	changes := make([]storh.Change, len(list))
	for i, p := range list {
		if changes[i], err = p.Change(); err != nil {
			return nil, fmt.Errorf("web: body: change %d: %w", i, err)
		}
	}
	return changes, nil
}

// patchRecord serves PATCH api/collections/{name}/records/{id}, of a Docs
// collection: it applies the body's changes in order, all or none, and
// answers with the record as it then is, as GET does.
func (h *handler) patchRecord(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) || !noParams(w, r) {
		return
	}
	d, id, ok := h.docsRecord(w, r, "patched")
	if !ok {
		return
	}
	body, err := readBody(w, r, h.cfg.maxBody)
	if err != nil {
		writeError(w, err)
		return
	}
	changes, err := decodeChanges(body)
	if err != nil {
		writeError(w, err)
		return
	}
	rec, err := d.Patch(id, changes...)
	if err != nil {
		writeError(w, err)
		return
	}
	writeRecord(w, http.StatusOK, rec)
}
