package web

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/storhdb/storh-go/storh"
)

// verify serves POST api/verify: storh's Verify of the whole store, or of
// the collections named by collection parameters, as JSON lines, one per
// problem and a last one with the report. It changes nothing, so it needs
// no WithWrites; it is a POST because it is costly (it reads every record)
// and, on a writable file, holds bbolt's writer lock while it runs, which
// a GET that a crawler or a prefetch may send should not do.
func (h *handler) verify(w http.ResponseWriter, r *http.Request) {
	vals := r.URL.Query()
	for k := range vals {
		if k != "collection" {
			writeError(w, badRequest(fmt.Sprintf("web: unknown parameter %q; the parameter is collection, given once per collection", k)))
			return
		}
	}
	// A body would be a mistake (curl -d collection=posts): say so rather
	// than verify the whole store.
	if n, _ := io.ReadFull(r.Body, make([]byte, 1)); n > 0 {
		writeError(w, badRequest("web: verify takes no body; name collections in the URL: api/verify?collection=posts"))
		return
	}
	colls := slices.DeleteFunc(vals["collection"], func(s string) bool { return s == "" })
	started := false
	var line []byte
	writeLine := func(v any) {
		line, _ = appendJSON(line[:0], v) // the handler's own types, which always marshal
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		w.Write(line)
		// Each problem as it comes, so a client watching a long run
		// sees them then.
		http.NewResponseController(w).Flush()
	}
	// Verify hands over its problems once its transaction has ended
	// (report is user code, which must not run inside it), so they come
	// at the end of the run, in the order found.
	rep, err := h.db.VerifyContext(r.Context(), func(p storh.Problem) {
		pj := Problem{Kind: string(p.Kind), Collection: p.Collection, Detail: p.Detail, Text: p.String()}
		if !p.ID.IsZero() {
			pj.ID = p.ID.String()
		}
		if p.Key != nil {
			pj.Key = hex.EncodeToString(p.Key)
		}
		writeLine(VerifyLine{Problem: &pj})
	}, colls...)
	if err != nil && !started {
		writeError(w, err)
		return
	}
	out := VerifyLine{Report: &VerifyReport{Collections: rep.Collections, Records: rep.Records, Problems: rep.Problems, OK: err == nil && rep.Problems == 0}}
	if err != nil {
		// The status is sent: the error goes in the last line, beside
		// the report of what was checked until then.
		_, body := errorOf(err)
		out.Error = &body.Error
	}
	writeLine(out)
}
