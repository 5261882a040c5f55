package web

import (
	"encoding/json"
)

// The types of this file are the JSON of the HTTP API (docs/web.md), as
// the handler writes it and Client reads it: declared once, so that the
// two cannot drift apart. Other programs may decode the API's answers
// into them too.

// Stats is storh.Stats as the API writes it. The file-only fields are
// pointers, left out on PostgreSQL, so that a client never reads a 0 there
// as a measurement. The path is never written: it names a file or a
// server, and nothing in the API needs it.
type Stats struct {
	Backend    string   `json:"backend"`
	FileSize   *int64   `json:"file_size,omitempty"`
	FreeBytes  *int64   `json:"free_bytes,omitempty"`
	Commits    int64    `json:"commits"`
	PageWrites *int64   `json:"page_writes,omitempty"`
	CommitIOMs *float64 `json:"commit_io_ms,omitempty"`
	// Reruns is PostgreSQL's only: write transactions run again after a
	// conflict with another process's.
	Reruns      *int64       `json:"reruns,omitempty"`
	Collections []Collection `json:"collections"`
	// FoldError joins the failures of the blocked indexes' last folds in
	// the serving process, when any failed.
	FoldError string `json:"fold_error,omitempty"`
	// DirectReadsOff is storh.Stats' note: written only when the file's
	// reads go through bbolt's buckets.
	DirectReadsOff string `json:"direct_reads_off,omitempty"`
}

// Collection is a collection's statistics as the API writes them. The
// ids and times are left out for an empty collection, which has neither.
type Collection struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Records   int    `json:"records"`
	Bytes     int64  `json:"bytes"`
	FirstID   string `json:"first_id,omitempty"`
	LastID    string `json:"last_id,omitempty"`
	FirstTime string `json:"first_time,omitempty"`
	LastTime  string `json:"last_time,omitempty"`
	// FeedKeep and LastSeq describe the collection's change feed
	// (storh.FeedInfo), in api/collections/{name} only: 0 and none
	// without one, and then api/collections/{name}/changes is 404.
	FeedKeep int    `json:"feed_keep,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
}

// Plan is storh.Plan as the API writes it, with its one-line text.
type Plan struct {
	Query       string   `json:"query"`
	Indexes     []string `json:"indexes"`
	Sorted      bool     `json:"sorted"`
	KeysRead    int      `json:"keys_read"`
	RecordsRead int      `json:"records_read"`
	Returned    int      `json:"returned"`
	Text        string   `json:"text"`
}

// Index is storh.IndexInfo as the API writes it.
type Index struct {
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

// QueueCounts is a queue's job counts.
type QueueCounts struct {
	Name    string `json:"name"`
	Pending int    `json:"pending"`
	Claimed int    `json:"claimed"`
	Done    int    `json:"done"`
	Dead    int    `json:"dead"`
	// Scheduled counts the jobs waiting that are not due yet (Pending
	// counts the due ones).
	Scheduled int `json:"scheduled"`
}

// ImportReport is what an import did.
type ImportReport struct {
	Collection string `json:"collection"`
	Kind       string `json:"kind"`
	// Lines counts the body's lines, blank ones included.
	Lines int `json:"lines"`
	// Imported counts the records written: Inserted new ones, and
	// Replaced records of a Docs collection stored under the same id.
	Imported int `json:"imported"`
	Inserted int `json:"inserted"`
	Replaced int `json:"replaced"`
}

// Problem is a storh.Problem as a line of the verify stream.
type Problem struct {
	Kind       string `json:"kind"`
	Collection string `json:"collection,omitempty"`
	ID         string `json:"id,omitempty"`
	// Key is a record key that is not a UUIDv7, in hex: it may be any
	// bytes.
	Key    string `json:"key,omitempty"`
	Detail string `json:"detail"`
	Text   string `json:"text"`
}

// VerifyReport is storh.VerifyReport, and whether the store is healthy.
type VerifyReport struct {
	Collections int  `json:"collections"`
	Records     int  `json:"records"`
	Problems    int  `json:"problems"`
	OK          bool `json:"ok"`
}

// ErrorResponse is the JSON of every error response.
type ErrorResponse struct {
	Error ErrorInfo `json:"error"`
}

// ErrorInfo is an error's kind and message: the body of an error response,
// and the error of a stream's last line or event.
type ErrorInfo struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Line is the line of an import's body at fault, 1-based.
	Line int `json:"line,omitempty"`
	// Item is the job of an enqueue's body at fault, 1-based.
	Item int `json:"item,omitempty"`
}

// CollectionList is the answer of GET api/collections.
type CollectionList struct {
	Collections []Collection `json:"collections"`
}

// IndexList is the answer of GET api/collections/{name}/indexes.
type IndexList struct {
	Indexes []Index `json:"indexes"`
}

// SchemaDoc is the answer of GET, PUT and DELETE
// api/collections/{name}/schema: the collection's JSON Schema as it was
// given, or null when it has none.
type SchemaDoc struct {
	Schema json.RawMessage `json:"schema"`
}

// CountResult is the answer of GET api/collections/{name}/count.
type CountResult struct {
	Count int `json:"count"`
}

// Page is the answer of GET api/collections/{name}/records: the records
// as the lines of a JSON lines export ({"id":…,"time":…,"data":{…}}),
// and Next, the id to pass as after (before with newest=1) for the
// following page, "" after the last page.
type Page struct {
	Records []json.RawMessage `json:"records"`
	Next    string            `json:"next"`
}

// VerifyLine is one line of the answer of POST api/verify: a Problem, or,
// last, the Report with the Error that stopped the run, if one did.
type VerifyLine struct {
	Problem *Problem      `json:"problem,omitempty"`
	Error   *ErrorInfo    `json:"error,omitempty"`
	Report  *VerifyReport `json:"report,omitempty"`
}

// PatchChange is one change of a PATCH body, a JSON list of them applied
// in order (docs/web.md): Op is "set", "unset", "inc", "push", "pull" or
// "addToSet", as storh.Set, Unset, Inc, Push, Pull and AddToSet; Path is a
// dotted path as query.Field reads it. The operands are JSON in the
// mapping of record bodies (Extended JSON wrappers for the types JSON
// lacks), and a change holds only its op's: Value for set and pull, By for
// inc, Values for push and addToSet (none, or left out, is no values).
// Value and By are raw so that a set to null is told from no value.
type PatchChange struct {
	Op     string            `json:"op"`
	Path   string            `json:"path"`
	Value  json.RawMessage   `json:"value,omitempty"`
	By     json.RawMessage   `json:"by,omitempty"`
	Values []json.RawMessage `json:"values,omitempty"`
}

// Aggregation is one aggregate of GET api/collections/{name}/aggregate
// (docs/web.md), as query.Count, Sum, Avg, Min and Max make them: Op is
// "count", "sum", "avg", "min" or "max", Name names its result in each
// group's values, and Path is the dotted path (as query.Field reads it)
// that every op but count aggregates.
type Aggregation struct {
	Op   string `json:"op"`
	Name string `json:"name"`
	Path string `json:"path,omitempty"`
}

// AggregateResult is the answer of GET api/collections/{name}/aggregate:
// the groups, sorted by key.
type AggregateResult struct {
	Groups []AggregateGroup `json:"groups"`
}

// AggregateGroup is one storh.Group: Key is a JSON list of the group-by
// values, in order (null for a missing field), and Values a JSON object of
// each aggregate's result by name, both in the mapping of record bodies
// (Extended JSON wrappers for times, ids, bytes and the numbers JSON
// lacks), so that jsonl.DecodeValue gives back the values Aggregate gave.
type AggregateGroup struct {
	Key    json.RawMessage `json:"key"`
	Values json.RawMessage `json:"values"`
}

// Job is a storh.Job as the API writes it: what a claim, a lookup or a
// list of jobs gives. The times are RFC 3339 in UTC with milliseconds
// (jsonl.TimeLayout); those a job does not have are left out. Due is
// written whenever the job has one, past or future, so that a client can
// tell a scheduled job from a due one by its own clock. Token names the
// claim while the job is claimed, as a decimal string (it is a 64-bit
// number, which a JSON number would not carry intact to every language):
// send it back to complete, fail or extend only while that claim holds.
// Data is the payload in the mapping of record bodies, present where the
// endpoint says.
type Job struct {
	ID         string          `json:"id"`
	Time       string          `json:"time"`
	State      string          `json:"state"`
	Attempts   int             `json:"attempts"`
	LeaseUntil string          `json:"lease_until,omitempty"`
	Due        string          `json:"due,omitempty"`
	Changed    string          `json:"changed,omitempty"`
	LastError  string          `json:"last_error,omitempty"`
	Token      string          `json:"token,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
}

// EnqueueRequest is the body of POST api/queues/{name}/jobs: the payloads
// of the jobs (JSON objects in the mapping of record bodies), enqueued in
// order, all or none, and At, when no claim may take them (RFC 3339 or
// Unix milliseconds; left out: at once).
type EnqueueRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
	At   string            `json:"at,omitempty"`
}

// Enqueued is the answer of POST api/queues/{name}/jobs: the new jobs'
// ids, in the order of their payloads.
type Enqueued struct {
	IDs []string `json:"ids"`
}

// ClaimRequest is the body of POST api/queues/{name}/claims. N is how
// many jobs to claim at most (default 1; above the handler's page size,
// WithMaxPage, it is lowered to it), Lease how long the claims hold
// (a Go duration, "30s", "5m"; default 5m), and Wait how long to wait for
// a job when none is due (default 0, no wait; a longer wait than half the
// handler's request time limit, WithTimeout, is lowered to it: a client
// that wants to wait longer claims again).
type ClaimRequest struct {
	N     int    `json:"n,omitempty"`
	Lease string `json:"lease,omitempty"`
	Wait  string `json:"wait,omitempty"`
}

// Claimed is the answer of POST api/queues/{name}/claims: the jobs
// claimed, with their data and tokens; none when no job was due.
type Claimed struct {
	Jobs []Job `json:"jobs"`
}

// JobAction is the body of the actions on one job, POST
// api/queues/{name}/jobs/{id}/complete, fail and extend (retry and
// release take none): Token, the claim's token as the claim gave it, acts
// only while that claim holds (else 409 not_claimed); without one the
// action applies to whatever claim the job has. Reason is a failure's
// last error, Lease an extension's new lease from now (a Go duration,
// default 5m).
type JobAction struct {
	Token  string `json:"token,omitempty"`
	Reason string `json:"reason,omitempty"`
	Lease  string `json:"lease,omitempty"`
}

// BatchRequest is the body of POST api/queues/{name}/batch: one Action
// (complete, fail, extend, retry, release or cancel) on each job of IDs,
// in one transaction, all or none. Tokens, when given, holds a claim's
// token for each id, in the same order ("" for none), and complete, fail
// and extend then act only while those claims hold; Reason and Lease are
// as in JobAction, for every job of the batch.
type BatchRequest struct {
	Action string   `json:"action"`
	IDs    []string `json:"ids"`
	Tokens []string `json:"tokens,omitempty"`
	Reason string   `json:"reason,omitempty"`
	Lease  string   `json:"lease,omitempty"`
}

// Batched is the answer of POST api/queues/{name}/batch: each job of the
// batch as it is right after it, in the order of the ids, without its
// data (a cancelled job by its id alone).
type Batched struct {
	Jobs []Job `json:"jobs"`
}

// JobsPage is the answer of GET api/queues/{name}/jobs: a page of jobs,
// and the cursor of the next page ("" after the last), which the after
// parameter takes.
type JobsPage struct {
	Jobs []Job  `json:"jobs"`
	Next string `json:"next"`
}

// PurgeRequest is the body of POST api/queues/{name}/purge: State is
// "done" (the default) or "dead", OlderThan how long ago the jobs got
// there at least (a Go duration; default 0, all of them). One request
// purges a bounded step (at most Limit jobs, lowered to the handler's
// bound; default that bound) and answers whether more remain: the next
// request passes Before, the cutoff the first answer gave, instead of
// OlderThan, so that every step purges by the same time.
type PurgeRequest struct {
	State     string `json:"state,omitempty"`
	OlderThan string `json:"older_than,omitempty"`
	Before    string `json:"before,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// Purged is the answer of POST api/queues/{name}/purge: how many jobs the
// step purged, whether more jobs older than the cutoff remain, and the
// cutoff, for the next step's Before.
type Purged struct {
	Purged int    `json:"purged"`
	More   bool   `json:"more"`
	Before string `json:"before"`
}

// QueueOptions is the answer of GET and PUT api/queues/{name}/options:
// storh.QueueOptions, the backoff as Go durations ("0s" for none), and
// Stored, false for a queue from a storh from before options were stored.
type QueueOptions struct {
	Name        string `json:"name"`
	MaxAttempts int    `json:"max_attempts"`
	BackoffMin  string `json:"backoff_min"`
	BackoffMax  string `json:"backoff_max"`
	Stored      bool   `json:"stored"`
}

// QueueOptionsChange is the body of PUT api/queues/{name}/options: each
// field given replaces its value, what is left out keeps it, as
// storh.DB.SetQueueOptions. The backoff is given whole, its MIN and MAX
// as Go durations; "0s" and "0s" remove it.
type QueueOptionsChange struct {
	MaxAttempts *int    `json:"max_attempts,omitempty"`
	BackoffMin  *string `json:"backoff_min,omitempty"`
	BackoffMax  *string `json:"backoff_max,omitempty"`
}
