package storh

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ttlConf is a docs handle's time to live (WithTTL): the path whose time
// a record expires at, as the user wrote it and as segments.
type ttlConf struct {
	text string
	path []string
}

// WithTTL gives a documents handle a time to live: a record expires once
// the time at path has come, by the database's clock (WithClock), where
// path holds a time.Time or a string in RFC 3339 (with or without a
// fraction of a second, any offset). A record without path never expires,
// nor does one whose path holds anything else (a number, a string that is
// no RFC 3339 time, a list): give the collection a schema to refuse
// those. A path through a list of maps reaches a value in each: the record
// expires at the earliest time among them.
//
// Expired records disappear from this handle's reads at once (Get is
// ErrNotFound; Find, Stream, First, CountMatching, Aggregate and
// PatchMatching skip them), and are deleted by the database's background
// sweep (see WithSweepEvery), or by ApplyTTL. Count is the stored count,
// expired records included until they are deleted. An index on path makes
// the sweep a seek, a walk in the index's order (for a dotted path, while
// no record's values there go through a list); without one each sweep
// reads the whole collection. Watch does not deliver a record that has
// expired when it reads it.
//
// The time to live is the collection's rule, however the handle was
// opened: one from tx.Docs inside an Update or View asks for the
// background sweep too. The sweep is for the collection the handle was
// opened on: once that one is dropped (or dropped and made again, by any
// process) it stops, and a handle opened with WithTTL on the new one asks
// again. See docs/retention.md. Only docs take it: Log and Queue refuse
// it with ErrInvalidOption, as a path that is not a field path.
func WithTTL(path string) CollectionOption {
	return CollectionOption{func(c *collConfig) error {
		p, err := query.Field(path).Path()
		if err != nil {
			return fmt.Errorf("%w: WithTTL(%q): %w", ErrInvalidOption, path, err)
		}
		c.ttl = &ttlConf{text: path, path: p}
		return nil
	}}
}

// expires reports whether the handle's reads hide records: it has a time
// to live or a retention.
func (c *coll) expires() bool { return c.ttl != nil || c.retention > 0 }

// liveSpec narrows spec to the records that have not expired at now: the
// ids from the retention's cutoff on, and a condition that no record with
// a time at the TTL path before now passes. The planner uses no index for
// the condition, so a query an index decided reads its records.
func (c *coll) liveSpec(spec *plan.Spec, now time.Time) {
	if c.retention > 0 {
		if lo := uuidv7.MinForTimestampMs(retentionFromMs(now.Add(-c.retention))); lo.Compare(spec.Lo) > 0 {
			spec.Lo = lo
			if spec.Lo.Compare(spec.Hi) > 0 {
				spec.Empty = true
			}
		}
	}
	if c.ttl != nil {
		live := &plan.Cond{Op: plan.OpLive, Path: c.ttl.path, Values: []any{now},
			Text: fmt.Sprintf("%s not expired", plan.PathString(c.ttl.path))}
		if spec.Cond == nil {
			spec.Cond = live
		} else {
			spec.Cond = &plan.Cond{Op: plan.OpAnd, Kids: []*plan.Cond{spec.Cond, live}}
		}
	}
}

// compile compiles q for a read through the handle: with a retention or a
// time to live, without the records that have expired.
func (c *coll) compile(q query.Query) (*plan.Spec, error) {
	spec, err := plan.Compile(q)
	if err == nil && c.expires() {
		c.liveSpec(spec, c.db.eng.Now())
	}
	return spec, err
}

// hidden reports whether the record id with payload has expired for this
// handle, so that Get does not find it.
func (c *coll) hidden(id uuidv7.UUID, payload []byte) bool {
	if !c.expires() {
		return false
	}
	now := c.db.eng.Now()
	if c.retention > 0 && id.Time().UnixMilli() < retentionFromMs(now.Add(-c.retention)) {
		return true
	}
	if c.ttl != nil {
		live, err := plan.NewMatcher(&plan.Cond{Op: plan.OpLive, Path: c.ttl.path, Values: []any{now}}).Match(payload)
		return err == nil && !live
	}
	return false
}

// expiredAt returns the test of hidden at now, made once for a read that
// tests many records at one moment (a Watch's batch of commits): nil when
// the handle hides nothing. (hidden, for one record, makes nothing it
// would not use.)
func (c *coll) expiredAt(now time.Time) func(id uuidv7.UUID, payload []byte) bool {
	if !c.expires() {
		return nil
	}
	var fromMs int64
	if c.retention > 0 {
		fromMs = retentionFromMs(now.Add(-c.retention))
	}
	var live *plan.Matcher
	if c.ttl != nil {
		live = plan.NewMatcher(&plan.Cond{Op: plan.OpLive, Path: c.ttl.path, Values: []any{now}})
	}
	return func(id uuidv7.UUID, payload []byte) bool {
		if c.retention > 0 && id.Time().UnixMilli() < fromMs {
			return true
		}
		if live != nil {
			ok, err := live.Match(payload)
			return err == nil && !ok
		}
		return false
	}
}

// retentionFromMs is the first id millisecond a retention whose cutoff is
// t keeps: DeleteBefore(t) deletes the records of the milliseconds before
// it.
func retentionFromMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		return ms + 1
	}
	return ms
}

// expiredSpecs select the records of the handle's TTL path that have
// expired at now, with index ranges a planner can seek: the timestamps up
// to now, and the strings that sort before the RFC 3339 text of a day
// after now (a time up to now written with any offset, at most a day,
// sorts before it), each checked exactly on the record.
//
// With an index that leads with the path and can be walked in its order
// (engine.Coll.WalkableBy), they are two walks of it in that order, which
// a deletion runs in batches that each read only what they delete.
// Otherwise, with an index, a seek of the two ranges in id order, which
// gathers and sorts every candidate in its first transaction (a dotted
// path that goes through a list in some record has no order to walk);
// without one, a read of every record.
func (c *coll) expiredSpecs(now time.Time) (specs []*plan.Spec, ordered bool, err error) {
	if ordered, err = c.ttlIndexed(); err != nil || !ordered {
		if err == nil {
			specs, err = c.unorderedSpecs(now)
		}
		return specs, false, err
	}
	times, texts, and := c.expiredConds(now)
	for _, cond := range []query.Cond{times, texts} {
		spec, err := plan.Compile(query.All().Where(cond).OrderBy(c.ttl.text, query.Asc))
		if err != nil {
			return nil, false, err
		}
		spec.Cond = and(spec.Cond)
		specs = append(specs, spec)
	}
	return specs, true, nil
}

// unorderedSpecs is expiredSpecs in id order: one read of both ranges.
func (c *coll) unorderedSpecs(now time.Time) ([]*plan.Spec, error) {
	times, texts, and := c.expiredConds(now)
	spec, err := plan.Compile(query.All().Where(query.Or(times, texts)))
	if err != nil {
		return nil, err
	}
	// The exact test goes into each branch: a condition beside the Or
	// would keep the planner from serving it as a union of index scans.
	if spec.Cond.Op != plan.OpOr {
		return nil, fmt.Errorf("the sweep's selection compiled to %s, not an Or", spec.Cond)
	}
	for i, k := range spec.Cond.Kids {
		spec.Cond.Kids[i] = and(k)
	}
	return []*plan.Spec{spec}, nil
}

// expiredConds are the two ranges of expiredSpecs, and and, which adds
// the exact test of a record to a condition.
func (c *coll) expiredConds(now time.Time) (times, texts query.Cond, and func(*plan.Cond) *plan.Cond) {
	f := query.FieldPath(c.ttl.path...)
	bound := now.UTC().Add(24*time.Hour + time.Second).Format("2006-01-02T15:04:05")
	expired := &plan.Cond{Op: plan.OpExpired, Path: c.ttl.path, Values: []any{now},
		Text: fmt.Sprintf("%s expired", plan.PathString(c.ttl.path))}
	and = func(k *plan.Cond) *plan.Cond { return &plan.Cond{Op: plan.OpAnd, Kids: []*plan.Cond{k, expired}} }
	return f.Lte(now), f.Between("", bound+"~"), and
}

// ttlIndexed reports whether the collection has a ready index that leads
// with the TTL path and can be walked in its order, which a sweep does:
// for a path of one field, any; for a longer one, while no record's
// values there go through a list (engine.Coll.WalkableBy).
func (c *coll) ttlIndexed() (bool, error) {
	var ok bool
	err := c.read(func(_ *engine.Tx, ec *engine.Coll) error {
		ok = false // set on every run: the read may run twice
		if ec == nil {
			return nil
		}
		var err error
		ok, err = ec.WalkableBy(c.ttl.path)
		return err
	})
	return ok, err
}

// ApplyTTL deletes the records that have expired by the handle's time to
// live (WithTTL), at the database's clock, and returns how many; without
// a time to live it deletes nothing. It runs as DeleteMatching does, in
// transactions of a few thousand records, each reading and deleting
// together, so a record rewritten with a later time meanwhile stays. An
// index on the TTL path makes it a seek; without one it reads every
// record. The database runs it in the background unless it was opened
// WithoutBackground.
func (d *Docs) ApplyTTL() (int, error) {
	return d.coll.applyTTL(context.Background(), deletePace{batch: tune.MatchingBatch})
}

// ApplyTTLContext is ApplyTTL that stops when ctx is done, between
// records: what was deleted before stays deleted.
func (d *Docs) ApplyTTLContext(ctx context.Context) (int, error) {
	return d.coll.applyTTL(ctx, deletePace{batch: tune.MatchingBatch})
}

func (c *coll) applyTTL(ctx context.Context, pace deletePace) (int, error) {
	if c.ttl == nil {
		return 0, nil
	}
	now := c.db.eng.Now()
	specs, ordered, err := c.expiredSpecs(now)
	if err != nil {
		return 0, opErr("apply ttl", c.name, "", -1, err)
	}
	pace.ordered = ordered
	total := 0
	for i := 0; i < len(specs); i++ {
		n, err := c.deleteSpec(ctx, "apply ttl", specs[i], false, pace)
		total += n
		if err != nil && ordered && len(c.ttl.path) > 1 && errors.Is(err, ErrInvalidQuery) {
			// A record written since the walk began has its values at the
			// dotted path through a list, which has no order: what is left
			// is sought in id order (the walks so far deleted only what
			// had expired, and committed).
			if specs, err = c.unorderedSpecs(now); err != nil {
				return total, opErr("apply ttl", c.name, "", -1, err)
			}
			pace.ordered, ordered, i = false, false, -1
			continue
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// applyRetention is ApplyRetention paced by pace.
func (c *coll) applyRetention(ctx context.Context, pace deletePace) (int, error) {
	if c.retention <= 0 {
		return 0, nil
	}
	q, ok := beforeQuery(c.db.eng.Now().Add(-c.retention))
	if !ok {
		return 0, nil
	}
	spec, err := plan.Compile(q)
	if err != nil {
		return 0, opErr("log delete", c.name, "", -1, err)
	}
	return c.deleteSpec(ctx, "log delete", spec, true, pace)
}

// sweep runs the handle's expiry once, paced for the background: the
// retention of a log, the time to live of docs.
func (c *coll) sweep(ctx context.Context, pace deletePace) (int, error) {
	if c.kind == engine.KindLog {
		return c.applyRetention(ctx, pace)
	}
	return c.applyTTL(ctx, pace)
}

// errExpired is Get's error for a record that has expired but is not
// deleted yet: to the reader it is not there.
var errExpired = fmt.Errorf("%w: the record has expired", ErrNotFound)
