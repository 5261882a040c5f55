package engine

import (
	"errors"
	"sync"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// WriteOp is one single-record write submitted for group commit.
type WriteOp struct {
	Coll       string
	Kind       Kind
	ID         uuidv7.UUID
	Value      []byte // stored value; nil with Delete
	Delete     bool
	InsertOnly bool

	Existed bool // set for Delete: whether the id was stored
	err     error
	done    chan struct{}
}

var opPool = sync.Pool{New: func() any { return &WriteOp{done: make(chan struct{}, 1)} }}

// NewWriteOp returns a pooled op; pass it to Submit, then Release it.
func NewWriteOp() *WriteOp { return opPool.Get().(*WriteOp) }

// Release returns op to the pool. Do not touch op afterwards.
func (op *WriteOp) Release() {
	*op = WriteOp{done: op.done}
	opPool.Put(op)
}

// Submit hands op to the group-commit writer and waits until it is durable
// (or failed). Many goroutines' ops share one bbolt commit: the writer
// commits whatever has queued while the previous commit was syncing, with no
// timer, so a lone writer pays one commit and a crowd shares them. An op that
// fails (say ErrExists) fails only its own caller. The caller must hold Enter.
func (db *DB) Submit(op *WriteOp) error {
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	db.writes <- op
	<-op.done
	return op.err
}

func (db *DB) writer() {
	defer close(db.writerDone)
	batch := make([]*WriteOp, 0, db.opts.MaxBatch)
	for {
		select {
		case op := <-db.writes:
			batch = append(batch[:0], op)
		case <-db.stop:
			return
		}
	drain:
		for len(batch) < db.opts.MaxBatch {
			select {
			case op := <-db.writes:
				batch = append(batch, op)
			default:
				break drain
			}
		}
		db.commit(batch)
		for i, op := range batch {
			op.done <- struct{}{}
			batch[i] = nil
		}
	}
}

// errOwnFault marks failures that belong to one op and left the transaction
// untouched, so the rest of the batch can still commit.
func ownFault(err error) bool {
	return errors.Is(err, ErrExists) || errors.Is(err, ErrWrongKind) ||
		errors.Is(err, ErrInvalidName) || errors.Is(err, ErrNotFound)
}

func (db *DB) commit(batch []*WriteOp) {
	err := db.UpdateSafe(func(tx *Tx) error {
		for _, op := range batch {
			op.err = apply(tx, op)
			if op.err != nil && !ownFault(op.err) {
				return op.err
			}
		}
		return nil
	})
	if err == nil {
		return
	}
	if len(batch) == 1 {
		batch[0].err = err
		return
	}
	// Something failed the whole transaction (a bbolt error, a full disk).
	// Retry each op alone so one bad op cannot fail its neighbours.
	for _, op := range batch {
		op.err = db.UpdateSafe(func(tx *Tx) error {
			err := apply(tx, op)
			op.err = err
			return err
		})
	}
}

func apply(tx *Tx, op *WriteOp) error {
	// Handles create their collection when opened; a write never does, so a
	// handle that outlived db.Drop gets ErrNotFound instead of resurrecting it.
	c, err := tx.Coll(op.Coll, op.Kind, false)
	if err != nil {
		if op.Delete && errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	if op.Delete {
		op.Existed, err = tx.Delete(c, op.ID)
		return err
	}
	return tx.Put(c, op.ID, op.Value, op.InsertOnly)
}
