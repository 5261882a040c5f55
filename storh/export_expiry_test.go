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

// SetSweepForgetHook makes db's sweeper call fn when it stops sweeping a
// collection that was dropped, or dropped and made again.
func SetSweepForgetHook(db *DB, fn func(name string)) {
	db.sweep.mu.Lock()
	db.sweep.onForget = fn
	db.sweep.mu.Unlock()
}

// SweepTargets lists the collections db's sweeper sweeps, one entry per
// distinct setting.
func SweepTargets(db *DB) []string {
	db.sweep.mu.Lock()
	defer db.sweep.mu.Unlock()
	var out []string
	for k := range db.sweep.colls {
		out = append(out, k.name)
	}
	return out
}

// TTLFirstStep runs the first transaction's read of d's sweep, as a
// deletion in batches of n does, and reports the index keys and records
// it read and how many it selected: the work one sweep transaction does
// before it deletes.
func TTLFirstStep(d *Docs, n int) (Plan, error) {
	c := &d.coll
	specs, _, err := c.expiredSpecs(c.db.eng.Now())
	if err != nil {
		return Plan{}, err
	}
	var r *engine.Run
	err = c.read(func(_ *engine.Tx, ec *engine.Coll) error {
		r = engine.NewRun(specs[0]) // afresh on every run: the read may run twice
		_, err := r.Next(ec, n, nil)
		return err
	})
	return Plan{Indexes: r.Stats.Indexes, Sorted: r.Stats.Sorted, KeysRead: r.Stats.KeysRead,
		RecordsRead: r.Stats.RecordsRead, Returned: r.Stats.Returned}, err
}
