package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed index.html app.js style.css
var files embed.FS

// ContentSecurityPolicy is the policy every asset is served with. The page
// shows data from the store, which may hold any text: with no inline
// script, no eval and no other origin, a value that slipped into the page
// as markup still could not run. The page builds all its elements with
// textContent, so this is the second line, not the first. connect-src
// 'self' covers fetch and EventSource against the API beside the page.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; font-src 'none'; object-src 'none'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// contentTypes are written out rather than read from the system's MIME
// table, which may lack an entry or name another type (text/x-js): under
// nosniff a browser refuses a script or style sheet of the wrong type.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// assets are read once: the files are part of the binary and never change
// while it runs, so their hashes are computed once too.
var assets = func() map[string]asset {
	m := make(map[string]asset)
	for _, name := range []string{"index.html", "app.js", "style.css"} {
		b, err := files.ReadFile(name)
		if err != nil {
			// The embed directive above names the same files: this is a
			// broken build, not a runtime condition.
			panic("ui: embedded " + name + " is missing: " + err.Error())
		}
		sum := sha256.Sum256(b)
		m[name] = asset{body: b, ctype: contentTypes[path.Ext(name)],
			etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`}
	}
	return m
}()

// Handler returns the handler of the web page: index.html at the root of
// wherever it is mounted, and the app.js and style.css it loads. The page
// calls the JSON API with relative URLs ("api/collections"), so it must be
// served from the same directory as the API: at the root of the server
// with web.Handler under /api/, or both behind one prefix.
//
// Mounted with http.StripPrefix whose prefix lacks the final slash, a
// request for the prefix itself ("/debug/storh") is redirected to the
// prefix with a slash, because relative URLs resolve against the last
// slash of the page's address and would otherwise miss the API.
func Handler() http.Handler {
	return http.HandlerFunc(serve)
}

func serve(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	if name == "" {
		if r.URL.Path == "" && redirectToSlash(w, r) {
			return
		}
		name = "index.html"
	}
	a, ok := assets[name]
	if !ok {
		http.Error(w, "ui: no such file; the page is at the mount point's root", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "ui: the page is read with GET", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	// The URLs carry no version, so a browser must ask each time whether
	// its copy is still current; the ETag makes that a 304 without a body
	// until a new binary serves other bytes.
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	// ServeContent answers If-None-Match with 304, HEAD without a body,
	// and Range requests.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}

// redirectToSlash redirects a request whose original path does not end
// in a slash to the same path with one, and reports whether it did. The
// original path is in RequestURI, which http.StripPrefix leaves alone; a
// handler called without one (a test, another router) is served as is.
func redirectToSlash(w http.ResponseWriter, r *http.Request) bool {
	orig, query, _ := strings.Cut(r.RequestURI, "?")
	if orig == "" || strings.HasSuffix(orig, "/") {
		return false
	}
	// Relative to the request, so the redirect holds behind proxies that
	// add their own prefix; "./" keeps a segment with a colon from reading
	// as a URL scheme.
	target := "./" + path.Base(orig) + "/"
	if query != "" {
		target += "?" + query
	}
	// Not http.Redirect: it resolves a relative target against r.URL.Path,
	// which StripPrefix has emptied. Not permanent either: the mount point
	// is the application's to change.
	w.Header().Set("Location", target)
	w.WriteHeader(http.StatusFound)
	return true
}
