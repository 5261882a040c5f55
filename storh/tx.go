package storh

import (
	"fmt"

	"github.com/storhdb/storh-go/storh/engine"
)

// Tx is a transaction, valid only inside the Update or View callback that
// received it. Handles from tx.Docs and tx.Log read and write through it.
type Tx struct {
	db       *DB
	etx      *engine.Tx
	writable bool
	done     bool
}

func (tx *Tx) end() { tx.done = true }

var errTxEnded = fmt.Errorf("%w: the transaction has ended; use its handles only inside the Update or View callback", ErrClosed)

// Writable reports whether tx came from Update.
func (tx *Tx) Writable() bool { return tx.writable }

// Docs returns a handle on the document collection name bound to tx,
// creating the collection inside an Update if needed.
func (tx *Tx) Docs(name string, opts ...CollectionOption) (*Docs, error) {
	c, err := tx.open("docs", name, engine.KindDocs, opts)
	if err != nil {
		return nil, err
	}
	return &Docs{c}, nil
}

// Log returns a handle on the log name bound to tx, creating the log inside
// an Update if needed.
func (tx *Tx) Log(name string, opts ...CollectionOption) (*Log, error) {
	c, err := tx.open("log", name, engine.KindLog, opts)
	if err != nil {
		return nil, err
	}
	return &Log{c}, nil
}

// Queue returns a handle on the queue name bound to tx, creating the queue
// inside an Update if needed. Its operations are part of the transaction:
// a claim there is made, and a job enqueued there is pending, only if the
// transaction commits.
func (tx *Tx) Queue(name string, opts ...CollectionOption) (*Queue, error) {
	c, err := tx.open("queue", name, engine.KindQueue, opts)
	if err != nil {
		return nil, err
	}
	return newQueue(c, opts)
}

func (tx *Tx) open(op, name string, kind engine.Kind, opts []CollectionOption) (coll, error) {
	cfg, err := collOptions(kind, opts)
	if err != nil {
		return coll{}, err
	}
	if err := tx.usable(false); err != nil {
		return coll{}, opErr(op, name, "", -1, err)
	}
	h := tx.etx.Handle(name, kind)
	h.Indexes, h.Schema, h.Feed = cfg.indexes, cfg.schema, cfg.feed
	h.Rule, h.BackoffGiven = cfg.queueRule(), cfg.backoff != nil
	var found *engine.Coll
	err = tx.etx.Protect(func() error {
		// A collection not in the file yet is created by the first write
		// through the handle, in this transaction; a View cannot write, so
		// there it is not found.
		// Opening writes nothing: in an Update it holds the collection
		// beside other processes' writers (engine.HoldRows) until
		// something needs more.
		c, err := tx.etx.UseHold(h, false, engine.HoldRows)
		found = c
		if err == nil && c == nil && (!tx.writable || cfg.mustExist) {
			err = engine.NoColl(name)
		}
		if err == nil && c != nil {
			err = tx.etx.CheckHandleSchema(c, h.Schema)
		}
		if err == nil && c != nil && kind == engine.KindQueue {
			err = tx.etx.CheckQueueRule(c, h.Rule, h.BackoffGiven)
		}
		if err == nil && c != nil {
			err = tx.etx.EnsureIndexes(c, h.Indexes)
		}
		if err == nil && c != nil {
			err = tx.etx.EnsureFeed(c, h.Feed)
		}
		return err
	})
	if err != nil {
		return coll{}, opErr(op, name, "", -1, err)
	}
	c := coll{db: tx.db, tx: tx, h: h, name: name, kind: kind, gen: cfg.gen, retention: cfg.retention, ttl: cfg.ttl}
	// A retention or a time to live is the collection's rule however the
	// handle was opened: the background sweep applies it too.
	tx.db.sweep.registerIn(tx.db, c, found)
	return c, nil
}

// usable fails once the transaction has ended, and for writes in a View.
func (tx *Tx) usable(write bool) error {
	if tx.done {
		return errTxEnded
	}
	if write && !tx.writable {
		return ErrReadOnly
	}
	return nil
}
