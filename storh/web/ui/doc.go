// Package ui serves storh's web page: a page for people to look inside a
// running store through the JSON API of package storh/web. It is three
// embedded files (index.html, app.js, style.css) with no build step and
// nothing loaded from another origin.
//
// The page lists the collections with their kind, count and time span;
// pages through a collection's records by cursor in both directions and
// by a creation-time window; runs a condition (the API's q parameter) and
// an order; shows a record whole with its id's creation time, the explain
// output of a query, a collection's groups and their aggregates (counts,
// sums…) as a table, a queue's job counts and a live tail. Its id tools
// generate, validate and decode MongoDB ObjectIDs and UUIDv7s in the
// browser, as packages storh/objectid and storh/uuidv7 do; the tests
// compare the two on the same inputs.
//
// # Mounting
//
// The page calls the API with relative URLs ("api/collections"), so it
// must be served from the directory the API's routes hang from:
//
//	mux.Handle("/api/", web.Handler(db))
//	mux.Handle("/", ui.Handler())
//
// or both under one prefix, each behind http.StripPrefix. The page holds
// no data, so it may be served without the API's token; the API then asks
// for the token, which the page sends as Authorization: Bearer.
//
// # Security
//
// Every asset is served with a Content-Security-Policy that allows only
// the page's own script, style sheet and API (ContentSecurityPolicy), with
// X-Content-Type-Options: nosniff, and is never framed. The script puts
// store data on the page as text, never as markup. A token typed into the
// page lives in the tab's sessionStorage, which ends with the tab.
//
// The API takes the token only from the Authorization header, which an
// EventSource cannot send. Without a token the live tail uses an
// EventSource; with one, the page reads the same event stream with fetch,
// which sends the header, and resumes after a dropped connection with
// Last-Event-ID as an EventSource would.
package ui
