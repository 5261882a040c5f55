package storh

// SetSweepHook makes db's background sweeper call fn at the end of every
// round, with how many records it deleted per collection and the round's
// error: the signal the expiry tests wait on instead of sleeping.
func SetSweepHook(db *DB, fn func(swept map[string]int, err error)) {
	db.sweep.mu.Lock()
	db.sweep.onRound = fn
	db.sweep.mu.Unlock()
}
