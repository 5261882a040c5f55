package storh

import (
	"fmt"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
)

// QueueOptions is a queue's stored rule for failed attempts: how many
// claims a job gets (WithMaxAttempts) and how long a failed job waits
// before its next (WithBackoff; zero: no backoff).
type QueueOptions struct {
	MaxAttempts            int
	BackoffMin, BackoffMax time.Duration
}

func queueOptionsOf(r engine.QueueRule) QueueOptions {
	return QueueOptions{MaxAttempts: r.MaxAttempts,
		BackoffMin: time.Duration(r.BackoffMin) * time.Millisecond, BackoffMax: time.Duration(r.BackoffMax) * time.Millisecond}
}

// SetQueueOptions changes the options stored with queue name, creating it
// if needed: each of WithMaxAttempts and
// WithBackoff given replaces its value (WithBackoff(0, 0) removes the
// backoff); what is not given keeps its stored value (or, on a queue that
// stores none yet, its default). Other options are ErrInvalidOption. It
// holds the queue alone while it stores: a Fail anywhere, in this process
// or on PostgreSQL in another, commits before it under the old options or
// after it under the new ones. Handles opened before keep working and
// apply the new options; a handle opened after with options that differ
// fails with ErrInvalidOption. A collection of another kind is
// ErrWrongKind.
func (db *DB) SetQueueOptions(name string, opts ...CollectionOption) error {
	const op = "set queue options"
	cfg, err := collOptions(engine.KindQueue, opts)
	if err == nil && (cfg.gen != nil || cfg.indexes != nil || cfg.mustExist) {
		err = fmt.Errorf("%w: SetQueueOptions takes WithMaxAttempts and WithBackoff only", ErrInvalidOption)
	}
	if err != nil {
		return opErr(op, name, "", -1, err)
	}
	if err := db.eng.Enter(); err != nil {
		return opErr(op, name, "", -1, err)
	}
	defer db.eng.Exit()
	if db.eng.Options().ReadOnly {
		return opErr(op, name, "", -1, ErrReadOnly)
	}
	h, err := db.eng.OpenHandle(name, engine.KindQueue, false)
	if err != nil {
		return opErr(op, name, "", -1, err)
	}
	given := cfg.queueRule()
	_, err = db.eng.SetQueueRule(h, func(r engine.QueueRule) (engine.QueueRule, error) {
		if given.MaxAttempts != 0 {
			r.MaxAttempts = given.MaxAttempts
		}
		if cfg.backoff != nil {
			r.BackoffMin, r.BackoffMax = given.BackoffMin, given.BackoffMax
		}
		return r, nil
	})
	return opErr(op, name, "", -1, err)
}

// QueueOptions returns the options stored with queue name, and false for
// a queue created by a storh from before options were stored (its
// handles' own options apply: DefaultMaxAttempts and no backoff unless
// they give others). A missing queue is ErrNotFound, a collection of
// another kind ErrWrongKind.
func (db *DB) QueueOptions(name string) (QueueOptions, bool, error) {
	const op = "queue options"
	if err := db.eng.Enter(); err != nil {
		return QueueOptions{}, false, opErr(op, name, "", -1, err)
	}
	defer db.eng.Exit()
	r, ok, err := db.eng.QueueRule(name)
	if err != nil {
		return QueueOptions{}, false, opErr(op, name, "", -1, err)
	}
	if !ok {
		return QueueOptions{MaxAttempts: DefaultMaxAttempts}, false, nil
	}
	return queueOptionsOf(r), true, nil
}
