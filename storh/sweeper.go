package storh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// sweeper applies the retention of logs and the time to live of docs in
// the background: one goroutine per DB, started by the first handle
// opened with either (unless the DB was opened WithoutBackground or
// read-only), that sweeps every such collection, then waits
// WithSweepEvery, until the DB closes. Close waits for it, and a sweep in
// flight stops between two records: the transactions it committed stay,
// the one it was in rolls back.
//
// On a store that several processes write (PostgreSQL), a sweep of a
// collection first takes the store's exclusive lock of the collection
// (engine.DB.TryExclusive); a process that finds it taken leaves the
// collection to the one sweeping it until its next round.
type sweeper struct {
	mu      sync.Mutex
	started bool
	colls   map[sweepKey]coll // what each distinct expiry setting sweeps
	errs    map[string]error  // the last failed sweep of each collection
	done    chan struct{}     // closed when the goroutine ends
	// onRound, set by tests, hears the end of each round (under no lock):
	// the records deleted per collection, the collections left to another
	// process sweeping them, and the round's errors.
	onRound func(swept map[string]int, skipped []string, err error)
	// onPause, set by tests, is called when a sweep pauses between two
	// of its transactions.
	onPause func()
}

// sweepKey tells apart the handles a sweeper sweeps: a collection opened
// with two different settings is swept by each.
type sweepKey struct {
	name      string
	ttl       string
	retention time.Duration
}

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

// register adds c's collection to the sweeps, starting the goroutine if
// it is the first.
func (s *sweeper) register(db *DB, c coll) {
	o := db.eng.Options()
	if o.NoBackground || o.ReadOnly || !c.expires() {
		return
	}
	key := sweepKey{name: c.name, retention: c.retention}
	if c.ttl != nil {
		key.ttl = c.ttl.text
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.colls == nil {
		s.colls = map[sweepKey]coll{}
	}
	s.colls[key] = c
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
	every := o.SweepEvery
	if every <= 0 {
		every = DefaultSweepEvery
	}
	go s.run(db, every)
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
	colls := make([]coll, 0, len(s.colls))
	for _, c := range s.colls {
		colls = append(colls, c)
	}
	hook := s.onRound
	s.mu.Unlock()
	swept := map[string]int{}
	var skipped []string
	var roundErr error
	for _, c := range colls {
		if ctx.Err() != nil {
			break
		}
		n, took, err := s.sweepColl(ctx, db, c)
		swept[c.name] += n
		if !took {
			skipped = append(skipped, c.name)
		}
		if ctx.Err() != nil {
			break // stopped by Close: not a failure of the sweep
		}
		s.mu.Lock()
		if err != nil {
			if s.errs == nil {
				s.errs = map[string]error{}
			}
			s.errs[c.name] = err
		} else {
			delete(s.errs, c.name)
		}
		s.mu.Unlock()
		roundErr = errors.Join(roundErr, err)
	}
	if hook != nil {
		hook(swept, skipped, roundErr)
	}
}

// sweepColl sweeps c's collection unless another process is sweeping it
// (took false).
func (s *sweeper) sweepColl(ctx context.Context, db *DB, c coll) (n int, took bool, err error) {
	// The whole sweep is one operation of the engine, so that Close waits
	// for the lock's release before it closes the store under it.
	if err := db.eng.Enter(); err != nil {
		return 0, true, nil // closed: nothing to sweep, nothing to report
	}
	defer db.eng.Exit()
	release, ok, err := db.eng.TryExclusive("sweep/" + c.name)
	if err != nil {
		return 0, false, opErr("sweep", c.name, "", -1, err)
	}
	if !ok {
		return 0, false, nil
	}
	defer release()
	s.mu.Lock()
	hook := s.onPause
	s.mu.Unlock()
	n, err = c.sweep(ctx, deletePace{batch: sweepBatch, pause: func(took time.Duration, deleted int, batch *int) error {
		if hook != nil {
			hook()
		}
		*batch = nextSweepBatch(*batch, took)
		return pauseFor(ctx, took)
	}})
	return n, true, err
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
