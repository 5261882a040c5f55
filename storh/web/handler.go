package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/web/ui"
)

// handler serves one database.
type handler struct {
	db  *storh.DB
	cfg config
	// tokenSum is the SHA-256 of the token: comparing digests of equal
	// length keeps the comparison's time independent of the token's
	// length as well as its bytes.
	tokenSum [sha256.Size]byte
	mux      *http.ServeMux
	origin   *http.CrossOriginProtection
	// tails counts the tails running, for tests that check that a tail's
	// goroutines end with its client.
	tails atomic.Int64
	// importing holds a token while an import runs: one at a time.
	importing chan struct{}
	// importBytes counts the bytes of import bodies in memory, received or
	// being received, against importBudget.
	importBytes atomic.Int64
}

// Handler returns an http.Handler that serves db's JSON API (docs/web.md),
// read-only unless WithWrites is given. Its routes are relative ("api/…"),
// so it works mounted at the root of a server and under a prefix with
// http.StripPrefix, whether the stripped prefix keeps its final slash or
// not:
//
//	mux.Handle("/debug/storh/", http.StripPrefix("/debug/storh", web.Handler(db, web.WithToken(token))))
//
// Handler panics on an option given an unusable value (WithMaxPage(0),
// WithToken("")), as http.ServeMux panics on a bad pattern: it is a
// mistake in the program, not in a request.
func Handler(db *storh.DB, opts ...Option) http.Handler {
	if db == nil {
		panic("web: Handler(nil): pass an open *storh.DB")
	}
	h := &handler{db: db, cfg: newConfig(opts), origin: http.NewCrossOriginProtection(),
		importing: make(chan struct{}, 1)}
	if h.cfg.bad != nil {
		panic(h.cfg.bad)
	}
	if h.cfg.token != "" {
		h.tokenSum = sha256.Sum256([]byte(h.cfg.token))
	}
	h.routes()
	return h
}

// route is one path of the API, what each of its methods does, and how
// long a request may take.
type route struct {
	path    string
	methods []string
	serve   []http.HandlerFunc
	// tail marks a live tail: WithTailLimit bounds it instead of
	// WithTimeout, which would cut every tail after 30 seconds.
	tail bool
}

func (h *handler) routes() {
	h.mux = http.NewServeMux()
	for _, rt := range []route{
		{path: "/api/collections", methods: []string{"GET"}, serve: []http.HandlerFunc{h.listCollections}},
		{path: "/api/collections/{name}", methods: []string{"GET"}, serve: []http.HandlerFunc{h.collectionStats}},
		{path: "/api/collections/{name}/records", methods: []string{"GET"}, serve: []http.HandlerFunc{h.listRecords}},
		{path: "/api/collections/{name}/records/{id}", methods: []string{"GET", "PUT", "PATCH", "DELETE"}, serve: []http.HandlerFunc{h.getRecord, h.putRecord, h.patchRecord, h.deleteRecord}},
		{path: "/api/collections/{name}/explain", methods: []string{"GET"}, serve: []http.HandlerFunc{h.explain}},
		{path: "/api/collections/{name}/count", methods: []string{"GET"}, serve: []http.HandlerFunc{h.count}},
		{path: "/api/collections/{name}/aggregate", methods: []string{"GET"}, serve: []http.HandlerFunc{h.aggregate}},
		{path: "/api/collections/{name}/indexes", methods: []string{"GET"}, serve: []http.HandlerFunc{h.indexes}},
		{path: "/api/collections/{name}/schema", methods: []string{"GET", "PUT", "DELETE"}, serve: []http.HandlerFunc{h.getSchema, h.putSchema, h.deleteSchema}},
		{path: "/api/collections/{name}/tail", methods: []string{"GET"}, serve: []http.HandlerFunc{h.tail}, tail: true},
		{path: "/api/collections/{name}/changes", methods: []string{"GET"}, serve: []http.HandlerFunc{h.changes}, tail: true},
		{path: "/api/collections/{name}/export", methods: []string{"GET"}, serve: []http.HandlerFunc{h.export}},
		{path: "/api/collections/{name}/import", methods: []string{"POST"}, serve: []http.HandlerFunc{h.importRecords}},
		{path: "/api/queues/{name}", methods: []string{"GET"}, serve: []http.HandlerFunc{h.queueCounts}},
		{path: "/api/queues/{name}/jobs", methods: []string{"GET", "POST"}, serve: []http.HandlerFunc{h.listJobs, h.enqueue}},
		{path: "/api/queues/{name}/jobs/{id}", methods: []string{"GET", "DELETE"}, serve: []http.HandlerFunc{h.lookupJob, h.cancelJob}},
		{path: "/api/queues/{name}/jobs/{id}/complete", methods: []string{"POST"}, serve: []http.HandlerFunc{h.jobAction("complete")}},
		{path: "/api/queues/{name}/jobs/{id}/fail", methods: []string{"POST"}, serve: []http.HandlerFunc{h.jobAction("fail")}},
		{path: "/api/queues/{name}/jobs/{id}/extend", methods: []string{"POST"}, serve: []http.HandlerFunc{h.jobAction("extend")}},
		{path: "/api/queues/{name}/jobs/{id}/retry", methods: []string{"POST"}, serve: []http.HandlerFunc{h.jobAction("retry")}},
		{path: "/api/queues/{name}/jobs/{id}/release", methods: []string{"POST"}, serve: []http.HandlerFunc{h.jobAction("release")}},
		{path: "/api/queues/{name}/claims", methods: []string{"POST"}, serve: []http.HandlerFunc{h.claim}},
		{path: "/api/queues/{name}/batch", methods: []string{"POST"}, serve: []http.HandlerFunc{h.batchJobs}},
		{path: "/api/queues/{name}/purge", methods: []string{"POST"}, serve: []http.HandlerFunc{h.purgeJobs}},
		{path: "/api/queues/{name}/options", methods: []string{"GET", "PUT"}, serve: []http.HandlerFunc{h.getQueueOptions, h.putQueueOptions}},
		{path: "/api/verify", methods: []string{"POST"}, serve: []http.HandlerFunc{h.verify}},
		{path: "/api/stats", methods: []string{"GET"}, serve: []http.HandlerFunc{h.stats}},
	} {
		limit := h.cfg.timeout
		if rt.tail {
			limit = h.cfg.tailLimit
		}
		for i, m := range rt.methods {
			serve := rt.serve[i]
			if m == "POST" {
				serve = h.sameOrigin(serve)
			}
			h.mux.HandleFunc(m+" "+rt.path, limited(limit, serve))
		}
		// The same path without a method catches the other methods, so they
		// get a JSON 405 rather than the mux's text one.
		allow := strings.Join(rt.methods, ", ")
		if strings.Contains(allow, "GET") {
			allow = strings.Replace(allow, "GET", "GET, HEAD", 1)
		}
		h.mux.HandleFunc(rt.path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, kind: KindMethodNotAllowed,
				msg: fmt.Sprintf("web: %s is not allowed here; allowed: %s", r.Method, allow)})
		})
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, kind: KindNotFound,
			msg: fmt.Sprintf("web: no endpoint %q; the API is under api/collections, api/queues, api/stats and api/verify", r.URL.Path)})
	})
}

// limited gives the request's context a deadline d from now; 0 is none.
func limited(d time.Duration, serve http.HandlerFunc) http.HandlerFunc {
	if d == 0 {
		return serve
	}
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		serve(w, r.WithContext(ctx))
	}
}

// sameOrigin refuses a POST that a browser sends from a page of another
// origin (net/http's CrossOriginProtection reads Sec-Fetch-Site and
// Origin). Unlike PUT, PATCH and DELETE, a POST with a form's content type needs
// no CORS preflight, so without this check any web page could start an
// import or a verify on a server without a token. Clients that are not
// browsers send neither header and pass.
func (h *handler) sameOrigin(serve http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h.origin.Check(r); err != nil {
			writeError(w, &apiError{status: http.StatusForbidden, kind: KindForbidden,
				msg: "web: a POST from a page of another origin is refused: " + err.Error()})
			return
		}
		serve(w, r)
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hostAllowed(r.Host) {
		writeError(w, &apiError{status: http.StatusMisdirectedRequest, kind: KindMisdirected,
			msg: fmt.Sprintf("web: this handler does not serve host %s: it serves %s (web.WithAllowedHosts)", quoteHost(r.Host), h.servedHosts())})
		return
	}
	// The page holds no data and is where a person types the token, so it
	// is served without one; everything it shows comes from the API.
	if isPage(r.URL.Path) {
		pageHandler.ServeHTTP(w, r)
		return
	}
	hd := w.Header()
	// Responses hold the store's data: no cache keeps them, and no browser
	// reads JSON as a page.
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	if !h.authorized(r) {
		hd.Set("WWW-Authenticate", `Bearer realm="storh"`)
		writeError(w, &apiError{status: http.StatusUnauthorized, kind: KindUnauthorized,
			msg: "web: this API needs a bearer token (Authorization: Bearer <token>)"})
		return
	}
	// http.StripPrefix("/debug/storh/", …) leaves "api/…" without its
	// leading slash, which no mux pattern matches.
	if !strings.HasPrefix(r.URL.Path, "/") {
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path = "/" + u.Path
		if u.RawPath != "" {
			u.RawPath = "/" + u.RawPath
		}
		r2.URL = &u
		r = r2
	}
	h.mux.ServeHTTP(w, r)
}

// pageHandler serves the web page (package ui) at the handler's root.
var pageHandler = ui.Handler()

// isPage reports whether path (as the mount point leaves it, with or
// without its leading slash) is one of the page's files.
func isPage(path string) bool {
	switch strings.TrimPrefix(path, "/") {
	case "", "index.html", "app.js", "style.css":
		return true
	}
	return false
}

// hostAllowed reports whether a request for host (a Host header) is
// served, as WithAllowedHosts says.
func (h *handler) hostAllowed(host string) bool {
	return h.cfg.hosts == nil || loopback(host) || h.cfg.hosts[hostOf(host)]
}

// servedHosts lists what WithAllowedHosts allows, for a message.
func (h *handler) servedHosts() string {
	names := slices.Sorted(maps.Keys(h.cfg.hosts))
	if len(names) == 0 {
		return "localhost and loopback addresses only"
	}
	return "localhost, loopback addresses and " + strings.Join(names, ", ")
}

// quoteHost quotes a Host header for a message, cut to the length of the
// longest DNS name: it comes from the client and may be anything.
func quoteHost(host string) string {
	if host == "" {
		return "(none: the request has no Host)"
	}
	const maxName = 253
	if len(host) > maxName {
		return strconv.Quote(host[:maxName]) + "…"
	}
	return strconv.Quote(host)
}

// authorized reports whether r shows the token, when there is one.
func (h *handler) authorized(r *http.Request) bool {
	if h.cfg.token == "" {
		return true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(sum[:], h.tokenSum[:]) == 1
}

// readBody reads r's body, at most limit bytes (413 past it), by the
// request's deadline. The request's context does not stop a read that
// waits for the client: the connection's read deadline does, so it is set
// to the context's, and a body that has not arrived by then is 408 (the
// connection is then closed, its body unread). A ResponseWriter without a
// connection (a test's recorder) reads without a deadline.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	if d, ok := r.Context().Deadline(); ok {
		_ = http.NewResponseController(w).SetReadDeadline(d)
	}
	var body bytes.Buffer
	_, err := body.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The rest of the body is still on its way: the connection cannot
		// carry another request, and the client should know.
		w.Header().Set("Connection", "close")
		return nil, &apiError{status: http.StatusRequestTimeout, kind: KindTimeout, err: err,
			msg: fmt.Sprintf("web: the request's body did not arrive within the request's time limit (%d bytes came); send it faster, or raise web.WithTimeout", body.Len())}
	case err != nil:
		return nil, fmt.Errorf("web: body: %w", err)
	}
	return body.Bytes(), nil
}

// writesOff answers 403 and returns true when writes are off.
func (h *handler) writesOff(w http.ResponseWriter) bool {
	if h.cfg.writes {
		return false
	}
	writeError(w, &apiError{status: http.StatusForbidden, kind: KindForbidden,
		msg: "web: writes are off: the handler was made without web.WithWrites"})
	return true
}

// collection opens the existing collection name with its own kind. A name
// from a request must not create a collection, hence WithoutCreate; and
// storh has no call that opens a collection whatever its kind, so it tries
// each kind of record collection in turn (an open is a lookup, not a scan).
func (h *handler) collection(name string) (storh.Collection, error) {
	d, err := h.db.Docs(name, storh.WithoutCreate())
	if err == nil {
		return d, nil
	}
	if !errors.Is(err, storh.ErrWrongKind) {
		return nil, err
	}
	l, err := h.db.Log(name, storh.WithoutCreate())
	if err == nil {
		return l, nil
	}
	if !errors.Is(err, storh.ErrWrongKind) {
		return nil, err
	}
	return nil, &apiError{status: http.StatusConflict, kind: KindWrongKind, err: storh.ErrWrongKind,
		msg: fmt.Sprintf("web: collection %q is a queue: its jobs are not records", name)}
}
