package engine

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// groupCommit is how the DB's writes take turns: the writer goroutine that
// batches single writes into one commit (Submit), and the turns of write
// transactions on a backend that would run them side by side.
type groupCommit struct {
	// writes queues the ops for the writer; stop ends it (Close), and
	// writerDone is closed when it has returned. All nil on a read-only DB.
	writes     chan *WriteOp
	stop       chan struct{}
	writerDone chan struct{}

	// writeMu makes this DB's write transactions take turns on a backend
	// that would run them side by side (bbolt has its own writer lock):
	// group commit then batches this process's writers, each holding one
	// connection, and Subscribe can wait for the writer in flight. Across
	// processes the backend orders writers itself (PostgreSQL: a lock per
	// collection).
	writeMu sync.Mutex

	commits atomic.Int64 // write transactions committed (other backends; Stats)
	reruns  atomic.Int64 // write transactions run again after a conflict (Stats)
}

// WriteOp is one single-record write submitted for group commit.
type WriteOp struct {
	Coll       Handle
	ID         uuidv7.UUID
	Value      []byte // stored value; nil with Delete
	Delete     bool
	InsertOnly bool
	// Fn, when set, is the op instead of a put or delete: it runs on the
	// collection inside the group's transaction, and may run again if
	// another op of the group fails, so it must set its results afresh
	// each time. An error it returns must be one ownFault accepts, or it
	// must have changed nothing (the group is then redone without it).
	Fn func(*Tx, *Coll) error
	// Create lets Fn's op create the collection when it is missing; without
	// it Fn gets a nil Coll there, so an op that fails changes nothing.
	Create bool
	// Hold is how Fn's op holds the collection (Tx.UseHold). A put or a
	// delete holds it HoldRows.
	Hold Hold
	// Pre is what validating Value before the transaction found
	// (DB.PrecheckValue); a put trusts it when its schema is still the
	// collection's.
	Pre Prechecked

	err  error
	done chan struct{}
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
		return errs.ErrReadOnly
	}
	db.group.writes <- op
	select {
	case <-op.done:
	case <-db.group.writerDone:
		// The writer has stopped: the Close of a file that failed while
		// open stops it without waiting for the calls under way.
		select {
		case <-op.done:
		default:
			if err := db.fileFailed(); err != nil {
				return err
			}
			return errs.ErrClosed
		}
	}
	return op.err
}

func (db *DB) writer() {
	defer close(db.group.writerDone)
	batch := make([]*WriteOp, 0, db.opts.MaxBatch)
	crowd := 0             // the writers seen lately: the largest recent batch, fading
	var last time.Duration // what the previous commit took
	for {
		select {
		case op := <-db.group.writes:
			batch = append(batch[:0], op)
		case <-db.group.stop:
			return
		}
		batch = db.drain(batch, crowd, last/8)
		crowd = max(crowd-crowd/8, len(batch))
		start := time.Now()
		db.commit(batch)
		last = time.Since(start)
		for i, op := range batch {
			op.done <- struct{}{}
			batch[i] = nil
		}
	}
}

// drain adds whatever else is queued to batch. The callers of the previous
// batch were woken an instant ago and most are about to submit again (they
// encode their record first); when fewer than the crowd seen lately are
// queued, the writer yields the processor and takes what arrived, for as
// long as writes keep arriving and at most wait: an eighth of the last
// commit's time. Waiting that long for a full batch costs less than the
// extra commit the rest would need. A lone writer's crowd is one, so it
// never waits; nor does the writer once a yield brings nothing new.
func (db *DB) drain(batch []*WriteOp, crowd int, wait time.Duration) []*WriteOp {
	var deadline time.Time
	for yields := 0; ; yields++ {
		before := len(batch)
	take:
		for len(batch) < db.opts.MaxBatch {
			select {
			case op := <-db.group.writes:
				batch = append(batch, op)
			default:
				break take
			}
		}
		if len(batch) >= crowd || len(batch) >= db.opts.MaxBatch {
			return batch
		}
		if yields == 0 {
			deadline = time.Now().Add(wait)
		} else if len(batch) == before && yields >= minYields || time.Now().After(deadline) {
			return batch
		}
		runtime.Gosched()
	}
}

// minYields is how many times the writer yields before a yield that
// brings no write ends the wait: on two cores a yield can come straight
// back before the woken callers ran.
const minYields = 8

// ownFault marks failures that belong to one op and left the transaction
// untouched, so the rest of the batch can still commit.
func ownFault(err error) bool {
	return errors.Is(err, errs.ErrExists) || errors.Is(err, errs.ErrWrongKind) ||
		errors.Is(err, errs.ErrInvalidName) || errors.Is(err, errs.ErrNotFound) ||
		errors.Is(err, errs.ErrEmpty) || errors.Is(err, errs.ErrNotClaimed) ||
		errors.Is(err, errs.ErrClaimed) || errors.Is(err, errs.ErrNotDead) ||
		errors.Is(err, errs.ErrSchema)
}

// commit applies a batch in one transaction. An op whose apply fails in a
// way that may have changed the transaction (a bbolt error) is dropped with
// its error and the rest are applied again, together: one bad op costs one
// more commit, not one commit per op. A failed commit (a full disk, an I/O
// error) fails every op of the batch: nothing of it was acknowledged, and
// retrying after a failed fsync could acknowledge data the disk lost.
func (db *DB) commit(batch []*WriteOp) {
	pending := batch
	for len(pending) > 0 {
		failed := -1
		err := containPanic(func() error {
			return db.update(func(tx *Tx) error {
				failed = -1 // a run after a conflict starts afresh
				for i, op := range pending {
					op.err = apply(tx, op)
					if op.err != nil && !ownFault(op.err) {
						failed = i
						return op.err
					}
				}
				return nil
			}, true)
		})
		switch {
		case err == nil:
			return
		case failed < 0:
			for _, op := range pending {
				op.err = err
			}
			return
		}
		rest := make([]*WriteOp, 0, len(pending)-1)
		rest = append(rest, pending[:failed]...)
		pending = append(rest, pending[failed+1:]...)
	}
}

func apply(tx *Tx, op *WriteOp) error {
	// A put creates the collection when it is not there yet; a delete never
	// does (there is nothing to delete). Both fail with ErrNotFound through
	// a handle opened before the collection was dropped.
	if op.Fn != nil {
		c, err := tx.UseHold(op.Coll, op.Create, op.Hold)
		if err != nil {
			return err
		}
		return op.Fn(tx, c)
	}
	c, err := tx.UseHold(op.Coll, !op.Delete, HoldRows)
	if err != nil || c == nil {
		return err
	}
	if op.Delete {
		_, err = tx.Delete(c, op.ID)
		return err
	}
	return tx.PutPrechecked(c, op.ID, op.Value, op.InsertOnly, &op.Pre, 0)
}
