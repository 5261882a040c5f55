package postgres

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/kv"
)

// Sequenced values (kv.Sequencer). A bucket keeps the values it is given
// until the commit, where one statement, queued after every other write of
// the transaction and right before its commit marker and COMMIT, adds their
// number to the counter row, stores them under the numbers the sum ends
// at, and trims the bucket:
//
//	WITH c AS (UPDATE counter SET v = int8send(v + n) WHERE k = $key RETURNING v),
//	     ins AS (INSERT INTO bucket SELECT int8send(last - n + ord), val ...),
//	     del AS (DELETE FROM bucket WHERE k IN (the oldest at or below
//	             last - keep, at most max, SKIP LOCKED))
//
// The UPDATE waits for the counter's row lock and then reads the row as
// last committed (READ COMMITTED), so each writer numbers after every
// writer that held the lock before it. It holds the lock from this
// statement to the end of its commit only: writers of one collection run
// side by side until then. PostgreSQL makes a commit visible before it
// releases the transaction's locks, so the next writer's numbers become
// visible after these: a reader never sees a number before a smaller one
// is visible. A transaction that fails rolls its counter update back with
// it: no number is lost.
type sequence struct {
	counter *bucket
	key     []byte
	vals    byteaArray
	keep    int64
	max     int
}

var _ kv.Sequencer = (*bucket)(nil)

// Sequence queues value for the commit (see kv.Sequencer).
func (b *bucket) Sequence(counter kv.Bucket, counterKey, value []byte) error {
	if err := b.writable("sequence"); err != nil {
		return err
	}
	cb, ok := counter.(*bucket)
	switch {
	case !ok || cb.tx != b.tx:
		return fmt.Errorf("postgres: sequence: %w: the counter is not a bucket of this transaction", kv.ErrIncompatibleValue)
	case len(counterKey) == 0:
		return fmt.Errorf("postgres: sequence: %w", kv.ErrKeyRequired)
	case len(value) > MaxValueSize:
		return fmt.Errorf("postgres: sequence: %w: %d bytes, the limit is %d", kv.ErrValueTooLarge, len(value), MaxValueSize)
	}
	if value == nil {
		value = []byte{}
	}
	s := b.seq
	if s == nil {
		s = &sequence{counter: cb, key: b.tx.arena.copy(counterKey)}
		b.seq = s
		b.tx.sequenced = append(b.tx.sequenced, b)
	} else if s.counter != cb || string(s.key) != string(counterKey) {
		return fmt.Errorf("postgres: sequence: %w: a bucket's values take one counter", kv.ErrIncompatibleValue)
	}
	s.vals = append(s.vals, value)
	return nil
}

// TrimSequence sets how the commit trims the bucket (see kv.Sequencer).
func (b *bucket) TrimSequence(keep int64, max int) error {
	if err := b.writable("trim"); err != nil {
		return err
	}
	if b.seq == nil {
		return nil // nothing sequenced: nothing to trim with
	}
	b.seq.keep, b.seq.max = max64(keep, 0), max
	return nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// queueSequences queues the statement of each bucket's sequenced values,
// in the order of their counters' buckets and keys: two transactions that
// both number in two collections lock the counters in the same order, and
// never wait for each other in a circle.
func (t *tx) queueSequences(b *pgx.Batch) {
	slices.SortFunc(t.sequenced, func(x, y *bucket) int {
		if c := cmp.Compare(x.seq.counter.id, y.seq.counter.id); c != 0 {
			return c
		}
		return bytes.Compare(x.seq.key, y.seq.key)
	})
	for _, bk := range t.sequenced {
		s := bk.seq
		bk.seq = nil
		if bk.deleted || s.counter.deleted || len(s.vals) == 0 {
			continue
		}
		b.Queue(sequenceSQL(s.counter.sql.name, bk.sql.name), s.key, len(s.vals), s.vals, s.keep, s.max)
	}
	t.sequenced = nil
}

// sequenceSQL is the statement of sequenced values (see sequence): $1 the
// counter's key, $2 how many values, $3 the values, $4 keep (0: no trim),
// $5 the most keys to trim. A counter row that is missing makes the
// values' keys NULL, which fails the statement (and the transaction)
// rather than drop them.
func sequenceSQL(counter, table string) string {
	last := beIntAt("c.v", "1")
	// The trim's bound is a scalar subquery, computed once, so the oldest
	// keys are found by an index scan from the start that stops at it
	// (a join with c would read the whole table); NULL, when nothing is
	// beyond keep, finds none.
	return "WITH c AS (UPDATE " + counter + " AS o SET v = int8send(" + beIntAt("o.v", "1") + " + $2::bigint) WHERE k = $1 RETURNING v)," +
		" ins AS (INSERT INTO " + table + " (k, v) SELECT int8send(" + last + " - $2::bigint + u.ord), u.val" +
		" FROM unnest($3::bytea[]) WITH ORDINALITY AS u(val, ord) LEFT JOIN c ON true)," +
		" del AS (DELETE FROM " + table + " WHERE k IN (SELECT f.k FROM " + table + " AS f" +
		" WHERE f.k <= (SELECT int8send(" + last + " - $4::bigint) FROM c WHERE $4::bigint > 0 AND " + last + " - $4::bigint > 0)" +
		" ORDER BY f.k LIMIT $5::int FOR UPDATE OF f SKIP LOCKED))" +
		" SELECT 1"
}
