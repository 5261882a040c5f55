// Package web serves a storh database over HTTP as a JSON API, for looking
// inside a running application's store: bbolt lets one process hold the
// file, so while the application runs, the storh CLI cannot open it. The
// application mounts the handler in its own server, as it would
// net/http/pprof.
//
// # Basics
//
// Handler returns an http.Handler whose routes are relative, so it works at
// the root of a server or under any prefix with http.StripPrefix:
//
//	mux.Handle("/debug/storh/", http.StripPrefix("/debug/storh",
//		web.Handler(db, web.WithToken(os.Getenv("STORH_TOKEN")))))
//
// The endpoints (docs/web.md has them all, with examples):
//
//	GET    api/collections                      every collection's kind, counts, first and last ids
//	GET    api/collections/{name}               one collection's
//	GET    api/collections/{name}/records       a page: after, before, from, until, limit, newest, q, order
//	GET    api/collections/{name}/records/{id}  one record
//	GET    api/collections/{name}/explain       how the query of the same parameters runs
//	GET    api/collections/{name}/count         {"count":n}; with a page's parameters, of what they select
//	GET    api/collections/{name}/aggregate     groups and their aggregates: group=PATH, agg=sum:total:amount
//	GET    api/collections/{name}/indexes       the indexes: paths, unique, entries, building
//	GET    api/collections/{name}/schema        the collection's JSON Schema, or null
//	GET    api/collections/{name}/tail          new records as Server-Sent Events (from, Last-Event-ID)
//	GET    api/collections/{name}/export        every record a page's parameters select, as JSON lines
//	GET    api/queues/{name}                    a queue's pending, claimed, done and dead jobs
//	GET    api/queues/{name}/jobs               a page of the jobs in one state: state, data=1, limit, after
//	GET    api/queues/{name}/jobs/{id}          one job, data included
//	GET    api/queues/{name}/options            the options stored with the queue
//	GET    api/stats                            the database's statistics and every collection's
//	POST   api/verify                           storh's Verify as JSON lines (collection=… to narrow it)
//	PUT    api/collections/{name}/records/{id}  store a record (WithWrites)
//	PATCH  api/collections/{name}/records/{id}  change fields of a Docs record: a JSON list of changes (WithWrites)
//	DELETE api/collections/{name}/records/{id}  delete a Docs record (WithWrites)
//	POST   api/collections/{name}/import        JSON lines into the collection, all or nothing (WithWrites)
//	PUT    api/collections/{name}/schema        set the collection's JSON Schema, checking its records (WithWrites)
//	DELETE api/collections/{name}/schema        remove the collection's JSON Schema (WithWrites)
//	POST   api/queues/{name}/jobs               enqueue {"jobs":[…],"at":…}, all or none (WithWrites, as below)
//	POST   api/queues/{name}/claims             claim {"n","lease","wait"}: each job with its data and token
//	POST   api/queues/{name}/jobs/{id}/ACTION   complete, fail, extend (by id, or {"token":…}), retry, release
//	DELETE api/queues/{name}/jobs/{id}          cancel a job no worker holds
//	POST   api/queues/{name}/batch              one action on many jobs {"action","ids",…}, one transaction
//	POST   api/queues/{name}/purge              a step of a purge {"state","older_than"|"before","limit"}
//	PUT    api/queues/{name}/options            set max attempts and backoff (create=1 makes the queue)
//
// A record is written as its line of a JSON lines export (package jsonl):
// {"id":…,"time":…,"data":{…}}, with the same value mapping ({"$date":…}
// for times, 5 an integer and 5.0 a float), which PUT reads back. A page
// is {"records":[…],"next":"<id>"}: pass next as after (before with
// newest=1) for the following page; it is empty after the last page. The
// condition q is a query.Cond in its JSON form when it starts with {, else
// in the text syntax of query.Parse (the CLI's --where):
//
//	{"and":[{"field":"level","op":"eq","value":"error"},{"field":"n","op":"gte","value":5}]}
//	level=error and n>=5
//
// Client calls these endpoints from another Go program (the storh CLI's
// --url uses it); the JSON of the answers is declared once, in the
// exported types both use (Stats, Page, Plan, Index…).
//
// Errors are {"error":{"kind":…,"message":…}} with a status that fits:
// 400 for a bad parameter, id, condition or body, 404 for a collection or
// record that does not exist, 409 for a unique violation, 422 for a record
// the collection's JSON Schema refuses, 413 for a body
// over the limit, 423 for a locked file, 401 and 403 for the token and
// for writes.
//
// # Security
//
//   - The handler is read-only unless WithWrites is given; then PUT,
//     PATCH, DELETE, import and the schema's PUT and DELETE work, and
//     nothing else changes data. Verify
//     changes nothing and needs no WithWrites.
//   - WithToken requires a bearer token on every request, compared in
//     constant time, before any routing: without it even a wrong path
//     says only 401. RequireToken tells a server whether its address
//     needs one (any address but loopback does).
//   - Bodies are bounded by WithMaxBody (an import's by WithMaxImport),
//     pages by WithMaxPage, the time of a request by WithTimeout and that
//     of a live tail by WithTailLimit. Conditions are bounded in size, depth
//     and count (query.MaxCondBytes, MaxCondDepth, MaxCondNodes).
//   - No part of a request names a file: the handler serves the one open
//     database, and a collection name from a URL never creates a
//     collection.
//   - Responses carry Cache-Control: no-store and X-Content-Type-Options:
//     nosniff. Writes need PUT, PATCH or DELETE, which a page of another site
//     cannot send without a CORS preflight that the handler never grants;
//     a POST (import, verify) from a page of another origin is refused
//     (net/http's CrossOriginProtection).
//
// # Caveats
//
//   - A page is held in memory up to 1 MiB; past that it is sent as it is
//     read, and an error after that point (a damaged record, the time
//     limit) cuts the connection instead of answering with an error
//     status, so a client never takes a short page for a whole one.
//   - A page is not a snapshot: like storh's Stream it reads in short
//     transactions, so records written meanwhile ahead of the cursor may
//     appear.
//   - Without a token, a server on loopback is open to every local user
//     and process, and to web pages that reach it through DNS rebinding;
//     give it a token when that matters.
//   - Queues are listed with their counts, but their jobs are not records:
//     the record endpoints answer 409 wrong_kind for a queue, whose jobs
//     are under api/queues/{name}. A claim's token, sent back with
//     complete, fail or extend, acts only while that claim holds (else 409
//     not_claimed).
//   - Verify on a writable file runs in a write transaction that it rolls
//     back: the application's writers wait while it runs. An import is
//     one write transaction too (it is all or nothing), and its body is
//     held in memory while it is imported.
package web
