package ui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/web/ui"
)

func get(t *testing.T, h http.Handler, method, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAssets(t *testing.T) {
	h := ui.Handler()
	for _, tc := range []struct {
		path, ctype, holds string
	}{
		{"/", "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"/index.html", "text/html; charset=utf-8", `<link rel="stylesheet" href="style.css">`},
		{"/app.js", "text/javascript; charset=utf-8", "window.storhIDs"},
		{"/style.css", "text/css; charset=utf-8", "@media (max-width: 700px)"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			res := get(t, h, "GET", tc.path, nil)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
			want := map[string]string{
				"Content-Type":            tc.ctype,
				"Content-Security-Policy": ui.ContentSecurityPolicy,
				"X-Content-Type-Options":  "nosniff",
				"X-Frame-Options":         "DENY",
				"Cache-Control":           "no-cache",
			}
			for k, v := range want {
				if got := res.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			etag := res.Header.Get("ETag")
			if !regexp.MustCompile(`^"[A-Za-z0-9_-]{22}"$`).MatchString(etag) {
				t.Errorf("ETag %q is not a quoted hash", etag)
			}
			if b := body(t, res); !strings.Contains(b, tc.holds) {
				t.Errorf("body lacks %q", tc.holds)
			}

			// The browser's revalidation: same ETag, no body.
			res = get(t, h, "GET", tc.path, http.Header{"If-None-Match": {etag}})
			if res.StatusCode != http.StatusNotModified || body(t, res) != "" {
				t.Errorf("If-None-Match: status %d, want 304 without a body", res.StatusCode)
			}
			res = get(t, h, "HEAD", tc.path, nil)
			if res.StatusCode != http.StatusOK || body(t, res) != "" || res.Header.Get("Content-Security-Policy") == "" {
				t.Errorf("HEAD: status %d, want 200 with headers and no body", res.StatusCode)
			}
		})
	}
}

func TestETagsDiffer(t *testing.T) {
	h := ui.Handler()
	seen := map[string]string{}
	for _, p := range []string{"/index.html", "/app.js", "/style.css"} {
		tag := get(t, h, "GET", p, nil).Header.Get("ETag")
		if other, ok := seen[tag]; ok {
			t.Errorf("%s and %s share the ETag %s", p, other, tag)
		}
		seen[tag] = p
	}
}

func TestRefusals(t *testing.T) {
	h := ui.Handler()
	for _, p := range []string{"/nope", "/api/collections", "/../ui.go", "/app.js/", "/doc.go"} {
		if res := get(t, h, "GET", p, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, res.StatusCode)
		}
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		res := get(t, h, m, "/app.js", nil)
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: status %d, Allow %q; want 405 with GET, HEAD", m, res.StatusCode, res.Header.Get("Allow"))
		}
	}
}

// TestPrefix mounts the page as an application would, under a prefix.
// Relative URLs resolve against the last slash of the page's address, so
// the page itself must end in one.
func TestPrefix(t *testing.T) {
	for _, prefix := range []string{"/debug/storh", "/debug/storh/"} {
		h := http.StripPrefix(prefix, ui.Handler())
		res := get(t, h, "GET", "/debug/storh/", nil)
		if res.StatusCode != http.StatusOK || !strings.Contains(body(t, res), "<title>storh</title>") {
			t.Errorf("StripPrefix(%q): GET /debug/storh/: status %d, want the page", prefix, res.StatusCode)
		}
		res = get(t, h, "GET", "/debug/storh/app.js", nil)
		if res.StatusCode != http.StatusOK {
			t.Errorf("StripPrefix(%q): GET /debug/storh/app.js: status %d", prefix, res.StatusCode)
		}
	}
	h := http.StripPrefix("/debug/storh", ui.Handler())
	res := get(t, h, "GET", "/debug/storh?x=1", nil)
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "./storh/?x=1" {
		t.Errorf("GET /debug/storh: status %d, Location %q; want 302 to ./storh/?x=1", res.StatusCode, res.Header.Get("Location"))
	}
}

// TestNoInlineCode checks the markup against what the CSP forbids, so a
// change that would only fail in a browser fails here too.
func TestNoInlineCode(t *testing.T) {
	page := body(t, get(t, ui.Handler(), "GET", "/", nil))
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]`),     // script text
		regexp.MustCompile(`\son[a-z]+\s*=`),               // an event handler attribute
		regexp.MustCompile(`\sstyle\s*=`),                  // an inline style
		regexp.MustCompile(`<style`),                       // a style element
		regexp.MustCompile(`(?:src|href)="(?:https?:)?//`), // another origin
	} {
		if m := bad.FindString(page); m != "" {
			t.Errorf("index.html holds %q, which the page's CSP forbids", m)
		}
	}
	for _, s := range regexp.MustCompile(`<script[^>]*>`).FindAllString(page, -1) {
		if !strings.Contains(s, `src="`) {
			t.Errorf("index.html holds an inline script %q", s)
		}
	}
}
