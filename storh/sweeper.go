package storh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
)

// sweeper applies the retention of logs and the time to live of docs in
// the background: one goroutine per DB, started by the first handle
// opened with either (unless the DB was opened WithoutBackground or
// read-only), that sweeps every such collection, then waits
// WithSweepEvery, until the DB closes. Close waits for it, and a sweep in
// flight stops between two records: the transactions it committed stay,
// the one it was in rolls back.
//
// A handle asks for the sweep however it was opened: db.Docs, db.Log, or
// tx.Docs and tx.Log inside an Update or View (the expiry is the
// collection's rule, not the transaction's). Each sweep follows the
// collection the handle was opened on, not its name: a sweep finds the
// collection dropped, or dropped and made again (by this DB, or by
// another process on PostgreSQL, which gives each collection an identity
// of its own: engine.Coll.Incarnation), and stops sweeping it for good,
// having deleted nothing there. A handle opened on the new collection
// asks again.
//
// On a store that several processes write (PostgreSQL), a sweep of a
// collection first takes the store's exclusive lock of the collection
// (engine.DB.TryExclusive); a process that finds it taken leaves the
// collection to the one sweeping it until its next round.
type sweeper struct {
	mu      sync.Mutex
	started bool
	colls   map[sweepKey]*sweepTarget // what each distinct expiry setting sweeps
	errs    map[string]error          // the last failed sweep of each collection
	done    chan struct{}             // closed when the goroutine ends
	// onRound, set by tests, hears the end of each round (under no lock):
	// the records deleted per collection, the collections left to another
	// process sweeping them, and the round's errors.
	onRound func(swept map[string]int, skipped []string, err error)
	// onPause, set by tests, is called when a sweep pauses between two
	// of its transactions.
	onPause func()
	// onForget, set by tests, hears a collection the sweeper stopped
	// sweeping because it was dropped, or dropped and made again.
	onForget func(name string)
}

// sweepKey tells apart the handles a sweeper sweeps: a collection opened
// with two different settings is swept by each.
type sweepKey struct {
	name      string
	ttl       string
	retention time.Duration
}

// sweepTarget is one collection to sweep with one setting: a DB-level
// handle on it (one opened inside a transaction is made DB-level, as the
// sweep runs transactions of its own), and the collection it is for, once
// seen: its incarnation (0 on a file, whose drops the handle's epoch
// tells). Only the sweeper's goroutine changes seen and ident after the
// target is registered, under the sweeper's mu: a new registration
// replaces the target whole.
type sweepTarget struct {
	c     coll
	seen  bool
	ident uint64
}

// errSweepGone ends the sweep of a collection that was dropped, or
// dropped and made again, since its handle was opened: the sweeper stops
// sweeping it, having deleted nothing in the transaction that found it.
var errSweepGone = errors.New("the collection the handle was opened on is gone")

// sweepBatch is how many records the first transaction of a background
// sweep deletes. Later ones delete as many as keep a transaction near
// sweepTxTarget (nextSweepBatch), between minSweepBatch and
// maxSweepBatch: a writer that waits behind one waits about that long,
// on a fast file as on a PostgreSQL server a round trip away.
const (
	sweepBatch    = 1000
	minSweepBatch = 50
	maxSweepBatch = 5000
	sweepTxTarget = 20 * time.Millisecond
)

// nextSweepBatch is the batch after one of batch records that took took:
// halved when the transaction ran past twice the target, doubled when it
// ran under half of it.
func nextSweepBatch(batch int, took time.Duration) int {
	switch {
	case took > 2*sweepTxTarget:
		return max(batch/2, minSweepBatch)
	case took < sweepTxTarget/2:
		return min(batch*2, maxSweepBatch)
	}
	return batch
}

// register adds the collection of c, a DB-level handle, to the sweeps,
// starting the goroutine if it is the first. It reads which collection of
// the name is there (one short read), so that the sweep follows that one.
// The caller holds Enter.
func (s *sweeper) register(db *DB, c coll) {
	if !s.wanted(db, c) {
		return
	}
	var seen bool
	var ident uint64
	err := db.eng.ViewSafe(func(etx *engine.Tx) error {
		seen, ident = false, 0 // set on every run: the read may run twice
		ec, err := etx.Use(c.h, false)
		if err == nil && ec != nil {
			seen, ident = true, ec.Incarnation()
		}
		return err
	})
	if err != nil {
		// Not known yet: the first sweep that finds the collection takes
		// it as the handle's (a collection dropped since the handle was
		// opened is still told by its epoch).
		seen, ident = false, 0
	}
	s.add(db, c, seen, ident)
}

// registerIn is register for a handle opened inside a transaction, on ec,
// the collection there (nil: not made yet). It reads nothing: the
// transaction's callback may not start another.
func (s *sweeper) registerIn(db *DB, c coll, ec *engine.Coll) {
	if !s.wanted(db, c) {
		return
	}
	c.tx = nil
	if ec == nil {
		s.add(db, c, false, 0)
		return
	}
	s.add(db, c, true, ec.Incarnation())
}

// wanted reports whether c's handle asks for a sweep that this DB runs.
func (s *sweeper) wanted(db *DB, c coll) bool {
	o := db.eng.Options()
	return !o.NoBackground && !o.ReadOnly && c.expires()
}

// add records the target of c, replacing an earlier one of the same
// setting unless that one is already for the same collection, and starts
// the goroutine if it has not started.
func (s *sweeper) add(db *DB, c coll, seen bool, ident uint64) {
	key := sweepKey{name: c.name, retention: c.retention}
	if c.ttl != nil {
		key.ttl = c.ttl.text
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.colls == nil {
		s.colls = map[sweepKey]*sweepTarget{}
	}
	// The newer handle names the collection there now: an earlier target
	// is kept only when it is for the same one (seen under the same
	// identity, no drop between), as a handle opened in every Update is.
	if old, ok := s.colls[key]; !ok || !old.seen || !seen || old.ident != ident || old.c.h.Epoch != c.h.Epoch {
		s.colls[key] = &sweepTarget{c: c, seen: seen, ident: ident}
	}
	if s.started {
		return
	}
	select {
	case <-db.eng.Closing():
		return // the DB is closing: nothing to start, nothing for Close to wait for
	default:
	}
	s.started = true
	s.done = make(chan struct{})
	every := db.eng.Options().SweepEvery
	if every <= 0 {
		every = DefaultSweepEvery
	}
	go s.run(db, every)
}

// forget stops sweeping t, unless a newer registration replaced it.
func (s *sweeper) forget(key sweepKey, t *sweepTarget) {
	s.mu.Lock()
	if s.colls[key] == t {
		delete(s.colls, key)
	}
	delete(s.errs, key.name)
	hook := s.onForget
	s.mu.Unlock()
	if hook != nil {
		hook(key.name)
	}
}

// run is the sweeper's goroutine.
func (s *sweeper) run(db *DB, every time.Duration) {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-db.eng.Closing():
			cancel() // stops a sweep in flight between two records
		case <-ctx.Done():
		}
	}()
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		s.round(ctx, db)
		timer.Reset(every)
	}
}

// round sweeps every registered collection once.
func (s *sweeper) round(ctx context.Context, db *DB) {
	s.mu.Lock()
	keys := make([]sweepKey, 0, len(s.colls))
	targets := make([]*sweepTarget, 0, len(s.colls))
	for k, t := range s.colls {
		keys, targets = append(keys, k), append(targets, t)
	}
	hook := s.onRound
	s.mu.Unlock()
	swept := map[string]int{}
	var skipped []string
	var roundErr error
	for i, t := range targets {
		if ctx.Err() != nil {
			break
		}
		name := t.c.name
		n, took, err := s.sweepColl(ctx, db, t)
		swept[name] += n
		if !took {
			skipped = append(skipped, name)
		}
		if ctx.Err() != nil {
			break // stopped by Close: not a failure of the sweep
		}
		if errors.Is(err, errSweepGone) || err != nil && db.eng.DroppedSince(t.c.h) {
			s.forget(keys[i], t)
			continue
		}
		s.mu.Lock()
		if err != nil {
			if s.errs == nil {
				s.errs = map[string]error{}
			}
			s.errs[name] = err
		} else {
			delete(s.errs, name)
		}
		s.mu.Unlock()
		roundErr = errors.Join(roundErr, err)
	}
	if hook != nil {
		hook(swept, skipped, roundErr)
	}
}

// sweepColl sweeps t's collection unless another process is sweeping it
// (took false). It fails with errSweepGone, having deleted nothing more,
// once the collection t is for is gone.
func (s *sweeper) sweepColl(ctx context.Context, db *DB, t *sweepTarget) (n int, took bool, err error) {
	// The whole sweep is one operation of the engine, so that Close waits
	// for the lock's release before it closes the store under it.
	if err := db.eng.Enter(); err != nil {
		return 0, true, nil // closed: nothing to sweep, nothing to report
	}
	defer db.eng.Exit()
	c := t.c
	release, ok, err := db.eng.TryExclusive("sweep/" + c.name)
	if err != nil {
		return 0, false, opErr("sweep", c.name, "", -1, err)
	}
	if !ok {
		return 0, false, nil
	}
	defer release()
	if there, err := s.follow(db, t); err != nil || !there {
		return 0, true, err
	}
	s.mu.Lock()
	hook := s.onPause
	s.mu.Unlock()
	n, err = c.sweep(ctx, deletePace{
		batch: sweepBatch,
		pause: func(took time.Duration, deleted int, batch *int) error {
			if hook != nil {
				hook()
			}
			*batch = nextSweepBatch(*batch, took)
			return pauseFor(ctx, took)
		},
		// Every transaction of the sweep checks, before it deletes, that
		// the collection is still the one t is for.
		check: func(_ *engine.Tx, ec *engine.Coll) error { return t.gone(db, ec) },
	})
	return n, true, err
}

// follow finds t's collection: there false when it is not made yet, and
// errSweepGone when the one t is for was dropped since. The first time it
// finds one it takes it as t's.
func (s *sweeper) follow(db *DB, t *sweepTarget) (there bool, err error) {
	if db.eng.DroppedSince(t.c.h) {
		return false, errSweepGone
	}
	var ident uint64
	err = db.eng.ViewSafe(func(etx *engine.Tx) error {
		there, ident = false, 0 // set on every run: the read may run twice
		ec, err := etx.Use(t.c.h, false)
		if err == nil && ec != nil {
			there, ident = true, ec.Incarnation()
		}
		return err
	})
	switch {
	case db.eng.DroppedSince(t.c.h):
		return false, errSweepGone // dropped by this DB meanwhile
	case err != nil:
		return false, opErr("sweep", t.c.name, "", -1, err)
	case !t.seen:
		if there {
			s.mu.Lock() // add reads a registered target's fields under mu
			t.seen, t.ident = true, ident
			s.mu.Unlock()
		}
		return there, nil
	case !there || ident != t.ident:
		return false, errSweepGone
	}
	return true, nil
}

// gone is errSweepGone when ec, the collection of t's name in a sweep's
// transaction (nil: none), is not the one t is for.
func (t *sweepTarget) gone(db *DB, ec *engine.Coll) error {
	if db.eng.DroppedSince(t.c.h) || ec == nil || ec.Incarnation() != t.ident {
		return errSweepGone
	}
	return nil
}

// pauseFor waits as long as the last transaction took (at least a
// millisecond), so that a sweep holds the writers at most half the time,
// or until ctx is done.
func pauseFor(ctx context.Context, took time.Duration) error {
	t := time.NewTimer(max(took, time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// wait waits for the goroutine to end, once the engine is closing.
func (s *sweeper) wait() {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// lastErr joins the errors of the collections whose last sweep failed.
func (s *sweeper) lastErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all error
	for name, err := range s.errs {
		all = errors.Join(all, fmt.Errorf("%s: %w", name, err))
	}
	return all
}
