package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/storhdb/storh-go/storh/internal/errs"
)

// A queue's rule for failed attempts (how many claims a job gets, and how
// long a failed job waits before its next) is stored with the queue, so
// that every handle, process and the CLI apply the same one: one key of
// the queue's metadata bucket,
//
//	qrule  version(1) ‖ max attempts ‖ backoff min (ms) ‖ backoff max (ms)
//
// 8 bytes each, big-endian. It needs no format step: a storh from before
// reads the metadata bucket's 8-byte values as integers and skips the
// others (loadMeta), and neither its Verify nor its Repair looks at keys it
// does not know, so an older build opens the queue and ignores the rule
// (applying its handles' WithMaxAttempts, as it always did).
var keyQueueRule = []byte("qrule")

const (
	queueRuleVersion = 1
	queueRuleSize    = 1 + 3*8

	// DefaultMaxAttempts is the max attempts of a queue whose rule
	// names none.
	DefaultMaxAttempts = 5
)

// QueueRule is a queue's rule for failed attempts. In a Handle, the zero
// fields are the ones its options did not give.
type QueueRule struct {
	MaxAttempts int
	// BackoffMin and BackoffMax (ms): a Fail that leaves the job pending
	// makes it due BackoffDelay later. 0: no backoff.
	BackoffMin, BackoffMax int64
}

// Filled is r with DefaultMaxAttempts where it names none.
func (r QueueRule) Filled() QueueRule {
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	return r
}

// BackoffDelay is how long (ms) a job that failed its attempts-th claim
// waits under r: BackoffMin·2^(attempts-1), capped at BackoffMax, then
// scaled by 0.8+0.4·jitter (jitter in [0, 1)), so that jobs failing
// together do not all come back at once. 0 without a backoff.
func BackoffDelay(r QueueRule, attempts int, jitter float64) int64 {
	if r.BackoffMin <= 0 {
		return 0
	}
	d := r.BackoffMax
	// min·2^(attempts-1) < max, without overflowing: shift while below.
	if shift := max(0, attempts-1); shift < 63 && r.BackoffMin <= r.BackoffMax>>shift {
		d = r.BackoffMin << shift
	}
	d = min(d, r.BackoffMax)
	return int64(math.Round(float64(d) * (0.8 + 0.4*jitter)))
}

// StoredQueueRule reads c's stored rule; ok false when it has none (a
// queue created by a storh from before rules were stored).
func (c *Coll) StoredQueueRule() (QueueRule, bool, error) {
	v := c.meta.Get(keyQueueRule)
	if v == nil {
		return QueueRule{}, false, nil
	}
	if len(v) != queueRuleSize || v[0] != queueRuleVersion {
		return QueueRule{}, false, fmt.Errorf("%w: queue %q: its stored rule is %d bytes of version %d, not %d of version %d",
			errs.ErrCorrupt, c.Name, len(v), v[0], queueRuleSize, queueRuleVersion)
	}
	r := QueueRule{
		MaxAttempts: int(binary.BigEndian.Uint64(v[1:])),
		BackoffMin:  int64(binary.BigEndian.Uint64(v[9:])),
		BackoffMax:  int64(binary.BigEndian.Uint64(v[17:])),
	}
	if r.MaxAttempts < 1 || r.BackoffMin < 0 || r.BackoffMax < r.BackoffMin {
		return QueueRule{}, false, fmt.Errorf("%w: queue %q: stored rule %+v is not valid", errs.ErrCorrupt, c.Name, r)
	}
	return r, true, nil
}

// storeQueueRule stores r (filled) as c's rule.
func (c *Coll) storeQueueRule(r QueueRule) error {
	r = r.Filled()
	v := make([]byte, 0, queueRuleSize)
	v = append(v, queueRuleVersion)
	v = binary.BigEndian.AppendUint64(v, uint64(r.MaxAttempts))
	v = binary.BigEndian.AppendUint64(v, uint64(r.BackoffMin))
	v = binary.BigEndian.AppendUint64(v, uint64(r.BackoffMax))
	c.ruleRead = false
	return mapStoreErr(c.meta.Put(keyQueueRule, v))
}

// queueRule is the rule a Fail or an expired lease of c applies: the
// stored one, read once per transaction, else fallback (the handle's
// options, filled).
func (t *Tx) queueRule(c *Coll, fallback QueueRule) (QueueRule, error) {
	if !c.ruleRead {
		r, ok, err := c.StoredQueueRule()
		if err == nil {
			err = t.failure()
		}
		if err != nil {
			return QueueRule{}, err
		}
		c.rule, c.hasRule, c.ruleRead = r, ok, true
	}
	if c.hasRule {
		return c.rule, nil
	}
	return fallback.Filled(), nil
}

// CheckQueueRule refuses a handle whose options give a rule that differs
// from c's stored one; a queue that stores none takes any.
func (t *Tx) CheckQueueRule(c *Coll, given QueueRule, backoffGiven bool) error {
	if c == nil || (given.MaxAttempts == 0 && !backoffGiven) {
		return nil
	}
	stored, ok, err := c.StoredQueueRule()
	if err != nil || !ok {
		return err
	}
	if given.MaxAttempts != 0 && given.MaxAttempts != stored.MaxAttempts {
		return fmt.Errorf("%w: queue %q stores max attempts %d; WithMaxAttempts(%d) differs: use SetQueueOptions (`storh queue options`) to change it",
			errs.ErrInvalidOption, c.Name, stored.MaxAttempts, given.MaxAttempts)
	}
	if backoffGiven && (given.BackoffMin != stored.BackoffMin || given.BackoffMax != stored.BackoffMax) {
		return fmt.Errorf("%w: queue %q stores %s; WithBackoff(%v, %v) differs: use SetQueueOptions (`storh queue options`) to change it",
			errs.ErrInvalidOption, c.Name, describeBackoff(stored), ms(given.BackoffMin), ms(given.BackoffMax))
	}
	return nil
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func describeBackoff(r QueueRule) string {
	if r.BackoffMin == 0 {
		return "no backoff"
	}
	return fmt.Sprintf("backoff %v..%v", ms(r.BackoffMin), ms(r.BackoffMax))
}

// CheckHandleQueue is CheckQueueRule of the queue h names, if it exists.
// The caller must hold Enter.
func (db *DB) CheckHandleQueue(h Handle) error {
	if h.Kind != KindQueue || (h.Rule.MaxAttempts == 0 && !h.BackoffGiven) {
		return nil
	}
	return db.ViewSafe(func(tx *Tx) error {
		c, err := tx.Use(h, false)
		if err != nil || c == nil {
			return err
		}
		return tx.CheckQueueRule(c, h.Rule, h.BackoffGiven)
	})
}

// SetQueueRule stores the rule change gives from the queue's stored rule
// (or, if none is stored, from h's), creating the queue if needed, and
// returns what it stored. It holds the queue alone: a Fail anywhere
// commits before it, under the old rule, or after, under the new one. The
// caller must hold Enter.
func (db *DB) SetQueueRule(h Handle, change func(QueueRule) (QueueRule, error)) (QueueRule, error) {
	var out QueueRule
	err := db.UpdateSafe(func(tx *Tx) error {
		c, err := tx.Use(h, true)
		if err != nil {
			return err
		}
		if _, err := c.jobBuckets(false); err != nil {
			return err // not a queue
		}
		r, err := tx.queueRule(c, h.Rule)
		if err != nil {
			return err
		}
		if out, err = change(r); err != nil {
			return err
		}
		out = out.Filled()
		return c.storeQueueRule(out)
	})
	return out, err
}

// QueueRule returns the stored rule of queue name, and whether it has one.
// A missing queue is ErrNotFound. The caller must hold Enter.
func (db *DB) QueueRule(name string) (r QueueRule, ok bool, err error) {
	err = db.ViewSafe(func(tx *Tx) error {
		c, err := tx.Coll(name, KindQueue, false)
		if err != nil {
			return err
		}
		r, ok, err = c.StoredQueueRule()
		return err
	})
	return r, ok, err
}
