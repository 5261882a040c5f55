// Package storh is an embedded, append-oriented record store keyed by
// UUIDv7.
//
// Every record is an id and a map of data. The id is a UUIDv7 (package
// uuidv7): its first 48 bits are the creation time in milliseconds, so ids
// sort by creation time. Records live in one bbolt file under their 16-byte
// binary ids, encoded as msgpack with a checksum. Because key order is time
// order, cursor pagination (After), creation-time windows (TimeRangeMs) and
// newest-first reads (Reverse) are all one key-range seek: their cost
// depends on the records returned, not on the size of the collection.
//
// # Basics
//
// Open a database, get a collection handle, write and read:
//
//	db, err := storh.Open("app.db")
//	if err != nil { ... }
//	defer db.Close()
//
//	pages, err := db.Docs("pages")
//	rec, err := pages.Put(storh.Map{"slug": "home", "kind": "page"})
//	got, err := pages.Get(rec.ID)
//
//	for r, err := range pages.Stream(query.All().After(lastSeen).Limit(100)) {
//		if err != nil { ... }
//		fmt.Println(r.ID, r.Data()["slug"])
//	}
//
// Collections come in kinds: Docs (upsert and delete), Log (append-only,
// immutable records) and Queue (a durable job queue: Enqueue, Claim with a
// lease, Complete, Fail to the dead letters). A name keeps the kind it was
// created with. Docs.DeleteMatching deletes what a query selects, and
// Log.DeleteBefore (or a WithRetention and ApplyRetention) trims a log by
// time. Watch follows a Docs or Log collection, yielding each record as its
// commit lands. A collection opened WithChangeFeed keeps a durable change
// feed: every put and delete, recorded in its transaction and numbered in
// commit order (ChangeEvent.Seq), which Changes reads back from any Seq,
// so a consumer that stops resumes from the last one it handled
// (docs/changes.md).
//
// The same API runs on PostgreSQL, shared by many processes: import the
// backend, which registers its URL schemes, and open a URL (docs/postgres.md):
//
//	import _ "github.com/storhdb/storh-go/storh/postgres"
//
//	db, err := storh.Open("postgres://app@db.internal/app?search_path=storh")
//
// Without the import, Open of such a URL fails with ErrUnsupported. OpenStore
// runs the engine on any store that keeps package kv's contract, opened by
// the caller; Register adds a backend for another URL scheme.
//
// # Transactions on PostgreSQL
//
// A file has one writer at a time: whatever an Update reads stays as read
// until it commits. On PostgreSQL, writers of one collection in many
// processes run at once, and an Update keeps the same promise for what it
// read, by two means (docs/postgres.md has the whole table):
//
//   - Writes and reads by id (Put, PutWithID, PutMany, Delete, appends,
//     Enqueue, and Get inside Update) hold the collection beside other
//     writers. A Get locks the record's row until the commit, so a
//     read-modify-write never loses an update; a new id or unique value
//     another process inserted first makes the transaction run again, and
//     the run after sees it (a replacement, ErrExists, ErrUniqueViolation).
//   - Queries and counts inside Update (Find, Stream, First, Count,
//     CountMatching, Aggregate, Stats) hold the collection alone from their first read
//     on, as every writer did on a file: no other process writes it until
//     the commit.
//
// Other processes may write records an Update has neither got nor queried
// while it runs, which comes to the same as writing them before or after
// it; what it read, they cannot. So read what a decision depends on:
//
//	err := db.Update(func(tx *storh.Tx) error {
//		accounts, err := tx.Docs("accounts")
//		if err != nil {
//			return err
//		}
//		rec, err := accounts.Get(id) // locked until the commit
//		if err != nil {
//			return err
//		}
//		_, err = accounts.PutWithID(id, storh.Map{"balance": rec.Data()["balance"].(int64) + 10})
//		return err
//	})
//
// An Update may run more than once there (a conflict, a deadlock: up to 30
// times), so it must keep no effects of an earlier run. Stats.Reruns counts
// the reruns.
//
// Single writes (Put, PutWithID, Delete) are durable when they return.
// Concurrent single writes from many goroutines share commits (group commit),
// so throughput grows with the number of writers. PutMany writes a batch in
// one transaction, all or nothing; PutStream ingests an unbounded sequence in
// batches. Update runs a function in one atomic transaction across
// collections; View gives a consistent snapshot.
//
// # Ids
//
// Put takes ids from uuidv7.New, or from a generator given with
// WithIDGenerator (WithDeterministicIDs for repeatable test data).
// PutWithID takes an explicit id. Ids from every path are checked: anything
// but a UUIDv7 fails with ErrInvalidID and nothing is written.
//
// # Data
//
// Data is a map[string]any (Map), another map with string keys, or a struct
// (fields named by their msgpack tag, else their json tag, else their Go
// name). Record.Data gives one Go type per kind: int64 (uint64 only above
// math.MaxInt64), float64, string, bool, nil, []byte, time.Time (UTC),
// uuidv7.UUID, objectid.ObjectID, []any and map[string]any; Record.Decode
// fills a struct of your own. Records are at most MaxRecordSize bytes encoded
// and nest at most MaxDepth levels. docs/types.md has the whole table.
//
// For records of one Go type, DocsOf[T] and LogOf[T] give collections that
// take and return T:
//
//	posts, err := storh.DocsOf[Post](db, "posts")
//	it, err := posts.Put(Post{Title: "Hello"})  // it.ID, it.Value
//	got, err := posts.Get(it.ID)                // got.Value is a Post
//
// # Cancellation
//
// Long operations have a ...Context form that stops when its context is
// done and returns an error wrapping ctx.Err(), with no transaction left
// open: StreamContext, FindContext, FirstContext, CountMatchingContext,
// ExplainContext, AggregateContext, ExplainAggregateContext,
// PutStreamContext, DeleteMatchingContext, DeleteBeforeContext,
// VerifyContext, RepairContext, BackupContext, BackupFileContext and
// CompactContext (and storh/jsonl's Export and
// Import). The plain forms use context.Background(). Watch and
// Queue.ClaimWait take a context and end with it.
//
// # Caveats
//
//   - One process at a time may open a file for writing (bbolt's file lock).
//     A second one waits for the lock timeout, then gets ErrLocked.
//   - Inside Update and View use only the Tx and handles from tx.Docs and
//     tx.Log; calls on the DB itself from the callback's goroutine fail with
//     ErrNestedTx instead of deadlocking. A goroutine the callback starts is
//     not tracked: its writes wait for the transaction to end, so the
//     callback must not wait for them.
//   - A DB-level Stream reads in chunks of short transactions: it is not one
//     snapshot. Records inserted ahead of the cursor while it runs may be
//     seen; use View for a snapshot.
//   - The file never shrinks; space freed by deletes is reused. Compact with
//     the storh CLI to reclaim it.
//   - Records fail their checksum only when the file was damaged; such a
//     record is returned as ErrCorrupt, never as data.
//   - On PostgreSQL, a DB opened WithReadURL reads from a standby: its reads
//     see its own writes, not always other processes' latest (see
//     docs/postgres.md, read replicas). A watch on a DB opened on a hot
//     standby polls, and misses what commits long after its id's time.
package storh
