package storh

import "github.com/storhdb/storh-go/storh/engine"

// SetSweepHook makes db's background sweeper call fn at the end of every
// round, with how many records it deleted per collection and the round's
// error, and the collections it left to another process: the signal the expiry tests wait on instead of sleeping.
func SetSweepHook(db *DB, fn func(swept map[string]int, skipped []string, err error)) {
	db.sweep.mu.Lock()
	db.sweep.onRound = fn
	db.sweep.mu.Unlock()
}

// SweeperStarted reports whether db started its background sweeper.
func SweeperStarted(db *DB) bool {
	db.sweep.mu.Lock()
	defer db.sweep.mu.Unlock()
	return db.sweep.started
}

// ExplainTTL runs the selection of d's sweep (ApplyTTL) as a read and
// reports how it read: the index, the records read and selected.
func ExplainTTL(d *Docs) (Plan, error) {
	c := &d.coll
	specs, _, err := c.expiredSpecs(c.db.eng.Now())
	if err != nil {
		return Plan{}, err
	}
	var p Plan
	for _, spec := range specs {
		r := engine.NewRun(spec)
		var items []engine.Item
		for !r.Done {
			if items, err = c.chunk(r, items[:0]); err != nil {
				return Plan{}, err
			}
		}
		p.Indexes = append(p.Indexes, r.Stats.Indexes...)
		p.Sorted = p.Sorted || r.Stats.Sorted
		p.KeysRead += r.Stats.KeysRead
		p.RecordsRead += r.Stats.RecordsRead
		p.Returned += r.Stats.Returned
	}
	return p, nil
}

// SetSweepPauseHook makes db's sweeper call fn each time a sweep pauses
// between two of its transactions: mid-sweep.
func SetSweepPauseHook(db *DB, fn func()) {
	db.sweep.mu.Lock()
	db.sweep.onPause = fn
	db.sweep.mu.Unlock()
}
