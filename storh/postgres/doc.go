// Package postgres is package kv's contract on PostgreSQL: a storh store
// whose buckets are tables, shared by every process that connects.
//
// Importing it registers the URL schemes postgres:// and postgresql:// with
// storh.Open (Driver), as a database/sql driver registers its name:
//
//	import _ "github.com/storhdb/storh-go/storh/postgres"
//
// Package storh does not import it, so a program that opens only files
// does not carry the driver (pgx). Open gives the store itself, for
// storh.OpenStore or for the store's own use.
//
// # Schema
//
// Open creates, if missing, in the first schema of the connection's
// search_path:
//
//	storh_buckets (id bigint identity primary key, parent bigint, name bytea,
//	               gen bigint, unique (parent, name))    the registry of buckets
//	storh_b<id>   (k bytea primary key, v bytea)   one table per bucket
//	storh_commits (token bytea primary key, xid xid8)   commit markers
//	storh_b<id>_q<hex key>   a sequence: the counter of key in bucket id
//	                         (kv.Sequencer), owned by that bucket's table
//
// The top level is bucket 0 (storh_b0), which has no registry row. A
// nested bucket is a registry row, its own table, and a row (name, NULL)
// in its parent's table: a cursor meets nested buckets among the keys, in
// order, with nil values, as the contract asks. bytea orders bytewise, as
// bbolt does. Keys are limited to MaxKeySize bytes (a btree entry must fit
// a third of a page) and values to MaxValueSize.
//
// # Transactions
//
// Each transaction holds a pooled connection. A writable one runs at READ
// COMMITTED and holds each top-level bucket it uses, from its first
// statement there (ahead of the statement that looks the bucket up,
// creates or deletes it): the bucket's registry row locked FOR NO KEY
// UPDATE (alone) or FOR SHARE (shared), behind a transaction-scoped
// advisory lock of the bucket's name (a hash of the schema and the name)
// in the same mode and the same statement. The row lock is the hold; the
// advisory lock is its queue, granted in the order asked, where
// PostgreSQL grants a shared row lock even while an exclusive locker
// waits. A bucket not made yet has no row to lock: a writer that makes it
// inserts the row, and a concurrent maker of the name fails on it. Alone
// by default: writers of one top-level bucket then take turns, as bbolt's single
// writer does, and each statement after the lock runs on a fresh snapshot
// that holds everything the previous holder committed; writers of
// different top-level buckets run side by side. This is strict two-phase
// locking on top-level buckets, so writers are serializable without
// SERIALIZABLE: where SERIALIZABLE fails most of a crowd of writers
// appending to one table (their reads and inserts meet on the last index
// page) and sends them round again, the lock makes them wait their turn
// once.
//
// A writer may hold a top-level bucket shared instead (kv.Locker's
// BucketShared): shared holders run side by
// side and use row-level means for what they change: they lock the rows
// they read (kv.RowLocker: SELECT ... FOR UPDATE, with SKIP LOCKED for a
// range), insert the keys they believe absent (kv.Inserter: a plain
// INSERT, which fails on a key another inserted first), and add to
// counters without reading them (kv.Adder: an INSERT ... ON CONFLICT DO
// UPDATE that sums 8-byte integers). One that holds the bucket alone waits
// for them all. HoldAlone turns a shared hold exclusive from the next
// statement on; so does creating or deleting the bucket. The engine holds
// a collection shared for writes and reads of records by id, and alone for
// the rest.
//
// A transaction that PostgreSQL cannot order fails with an error wrapping
// kv.ErrConflict, and the caller runs it again: two writers that wait for
// each other's locks deadlock (PostgreSQL fails one after
// deadlock_timeout, SQLSTATE 40P01), an insert meets a key a concurrent
// transaction inserted (23505), a statement meets a table a concurrent one
// dropped (42P01), and a writer's check of a cached subtree fails (below).
// A failure may come from a read (then Tx.Err reports it), from a write
// that reaches the server, or from Commit. Listing the top level
// (Tx.Cursor) takes no lock: it sees the buckets committed when it reads.
//
// A read-only transaction is REPEATABLE READ READ ONLY, with its snapshot
// taken by its first read (its BEGIN travels with that read): it takes no
// lock, never conflicts, and sees every transaction that committed before
// that read and none after (bbolt's is taken at Begin: a commit between
// Begin and the first read is seen here, not there).
//
// Writes are buffered in the transaction, bucket by bucket (the last write
// of a key wins, and the adds after it are summed into it), and sent with
// the next read of that bucket or with the COMMIT, so a transaction costs
// one round trip per read plus one to commit (or to roll back); reads
// that need not wait for each other's answers, of one bucket or several,
// share one, and a range locked in one bucket reads what its values point
// to in others in the same statement (kv.Pipeliner). A writer that has
// read nothing sends its locks, checks, writes and commit marker in one
// round trip, without BEGIN or COMMIT: a batch of statements without them
// is one implicit transaction, which the server commits at the batch's end
// and rolls back if a statement fails; it runs at READ COMMITTED, the
// session's level (Open sets it). A cursor reads ahead in pages that grow from
// 16 rows to 512; one told how far its walk goes (kv.ReadAhead) reads
// that many at once. Reads can fail, unlike bbolt's: the first failure ends the
// transaction (PostgreSQL refuses every later statement), reads answer nil
// from then on, Commit fails with it, and Err and Failure (kv.Failer)
// report it: the engine then fails the read that met it, rather than take
// its nil for a missing key.
//
// A writable transaction inserts, just before its COMMIT and in the same
// round trip, a commit marker: a row of storh_commits under a token the
// client drew, which is in the store exactly when the transaction
// committed. If its connection is lost once the batch with its COMMIT went
// out, Commit ends the lost transaction's backend (named by pid and start,
// which the store reads as each connection opens), which may not have
// noticed that its client is gone, and asks on another connection by
// inserting the same token: the insert waits while the lost transaction
// holds its marker uncommitted (it is still committing; a backend the
// store could not name is ended if pg_blocking_pids says the insert waits
// for it), then finds the marker (committed: Commit waits for the server's synchronous standbys to
// confirm a commit of its own made after it, and succeeds) or inserts it
// (not committed, and never to be: the lost transaction's own insert of the
// token would now fail; Commit returns the connection's error). A
// multi-host URL's standby promoted in the old primary's place answers for
// its own history, which is the store's from then on. If no server that
// takes writes answers within a few seconds, the error wraps
// kv.ErrCommitUnknown. Markers older than ten minutes are deleted by every
// store, about once a minute.
//
// Bucket lookups read the bucket's whole subtree from the registry, once
// per transaction. Creating a bucket costs two round trips; deleting one
// costs one, and drops the subtree's tables, which waits for the
// transactions using them. Creating or deleting a bucket below the top
// level also raises its top-level bucket's generation (gen), in the same
// transaction.
//
// A Store caches the subtree of each top-level bucket a transaction looked
// up, with its id and generation. The next read-only transaction to look
// the bucket up before its first round trip takes the subtree from the
// cache and sends, ahead of its first read and in the same round trip, a
// check of that id and generation: a page read then costs the round trip
// of the read and the one of the ROLLBACK, as a hand-written one does. A
// writer takes the subtree from the cache whenever it first uses the
// bucket, and sends its lock and then a check that fails the transaction
// with kv.ErrConflict if the subtree changed, ahead of its next statement:
// nothing it writes reaches a table before the check, and run again, it
// looks the subtree up afresh. If the check finds the subtree changed (another
// store made or deleted a bucket in it, or deleted it), the transaction
// looks the subtree up, moves the buckets it handed out onto it and sends
// the read again; nothing read on the stale subtree reaches the caller.
// Only when the caller had already acted on a bucket the change removed,
// made or renumbered does the transaction fail, with kv.ErrStale, having
// read nothing: run again, it looks the buckets up afresh. A transaction
// that answered from the cache but never went to the server sends the
// check from Err or Rollback.
//
// # Notices
//
// A Store is a kv.Shared: a writable transaction's Announce calls become
// pg_notify calls on the schema's channel, sent with its COMMIT (so they
// reach listeners after it, in commit order) with its xid. Listen holds a
// connection of its own with LISTEN on that channel, and a Listener's
// Watch of a topic holds, on that connection, the session-level advisory
// locks of the topic (16 keys) in shared mode. A writer that locks a
// top-level bucket, shared or alone, tries one of those keys at random
// exclusively in the same round trip (pg_try_advisory_xact_lock): when it
// gets it, nobody watches, and it drops its notices under that name; a
// Watch then waits for it to end. Writers that hold a bucket shared
// rarely try the same key, and one that finds its key taken only sends
// notices it need not. Sees asks a read-only transaction's server for pg_current_snapshot()
// the first time it is called, so that it tells from an xid whether the
// snapshot holds that commit.
//
// # Read-only stores and standbys
//
// WithReadOnly opens a store that exists and changes nothing: no table,
// column, lock or write, and connections with
// default_transaction_read_only on. A missing schema or store is an error
// wrapping storh.ErrNotFound; a writable Begin fails with
// kv.ErrTxNotWritable. It is how a hot standby is opened: Open without it
// fails there with storh.ErrReadOnly. On a standby (Replaying) Listen
// fails, as LISTEN does during recovery and no notification arrives;
// Position tells a poller how far the standby has replayed
// (pg_last_wal_replay_lsn()).
//
// WithReadURL gives a store on the primary a standby to read. Its
// read-only transactions go there while the standby has replayed the
// floor: the primary's WAL position (pg_current_wal_insert_lsn()) at Open,
// after each of the store's commits (asked in the COMMIT's round trip,
// after it), when a Watch of its listener took its lock, and when the
// listener heard of a commit. Otherwise they go to the primary. The
// standby is asked how far it has replayed (pg_last_wal_replay_lsn(),
// one round trip) only when what it last said is below the floor.
// Writable transactions and the listener are the primary's.
//
// # Not there yet
//
// The engine's file-level operations (page checks, backup, compaction,
// file statistics) have no equivalent here. Transactions use one
// background context, so a statement cannot be cancelled (nor a wait for
// a lock); a lost connection fails the transaction. There is no retry
// loop here: a conflict is returned to the caller, and the engine runs the
// transaction again.
package postgres
