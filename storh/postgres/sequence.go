package postgres

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/kv"
)

// Sequenced values (kv.Sequencer). A counter made by StartSequence is a
// PostgreSQL sequence, named after the counter's bucket and key and owned
// by the bucket's table (so it goes when the table does). A bucket keeps
// the values it is given until the commit, where two statements, queued
// after every other write of the transaction and right before its commit
// marker and COMMIT, in the same round trip, draw their numbers and store
// them, then trim the bucket (the second sees what the first stored):
//
//	INSERT INTO bucket SELECT int8send(nextval(seq)), val FROM unnest(values) ...
//	WITH fl  AS (the floor row, FOR UPDATE SKIP LOCKED, if below the bound),
//	     del AS (DELETE the oldest keys at or below currval(seq) - keep,
//	             at most max, if fl was locked),
//	     up  AS (UPDATE the floor row to the greatest key del deleted)
//
// nextval takes no lock that lasts: writers of one collection draw numbers
// side by side and commit side by side, their WAL flushes grouped, where a
// counter row would hold each writer's lock through its flush and make the
// commits take turns. The price is on the readers' side: a number drawn by
// a transaction still committing can become visible after a greater one,
// and a reader that meets such a gap settles it (SettleSequence) before it
// passes it. The floor row is locked only by the commit that trims, and a
// commit that finds it locked leaves the trim to the one that holds it:
// so it is never waited for either, and as one commit at a time trims, the
// rows it deletes need no locks of their own.
type sequence struct {
	counter *bucket
	key     []byte
	name    string // the PostgreSQL sequence, quoted and schema-qualified
	vals    byteaArray
	runs    []run
	keep    int64
	slack   int64
	max     int
	shape   *kv.RunShape // TrimRuns: the runs' shape; nil: TrimSequence
}

// run is a run queued by SequenceRun: its stored value, Tag ‖ entries.
type run struct {
	value  []byte
	shape  kv.RunShape
	sideOf []int32 // 1-based, as the statement numbers the entries
	sides  byteaArray
}

var (
	_ kv.RunSequencer = (*bucket)(nil)
	_ kv.Settler      = (*bucket)(nil)
)

// maxCounterKey bounds a counter's key, which names its sequence (an
// identifier holds 63 bytes).
const maxCounterKey = 16

// sequenceName is the sequence of counterKey in the bucket of id.
func (s *Store) sequenceName(id int64, counterKey []byte) string {
	return pgx.Identifier{s.schema, "storh_b" + strconv.FormatInt(id, 10) + "_q" + hex.EncodeToString(counterKey)}.Sanitize()
}

// counterOf checks that counter is a bucket of b's transaction with a key
// that can name a sequence.
func (b *bucket) counterOf(op string, counter kv.Bucket, counterKey []byte) (*bucket, error) {
	cb, ok := counter.(*bucket)
	switch {
	case !ok || cb.tx != b.tx:
		return nil, fmt.Errorf("postgres: %s: %w: the counter is not a bucket of this transaction", op, kv.ErrIncompatibleValue)
	case len(counterKey) == 0:
		return nil, fmt.Errorf("postgres: %s: %w", op, kv.ErrKeyRequired)
	case len(counterKey) > maxCounterKey:
		return nil, fmt.Errorf("postgres: %s: %w: a counter's key names its sequence, and is limited to %d bytes", op, kv.ErrKeyTooLarge, maxCounterKey)
	case cb.deleted || b.deleted:
		return nil, fmt.Errorf("postgres: %s: %w", op, errDeleted)
	}
	return cb, nil
}

// StartSequence makes the sequence of counterKey in counter, going on
// from the integer there, and turns the integer into b's floor (see
// kv.Sequencer).
func (b *bucket) StartSequence(counter kv.Bucket, counterKey []byte) error {
	if err := b.writable("start sequence"); err != nil {
		return err
	}
	cb, err := b.counterOf("start sequence", counter, counterKey)
	if err != nil {
		return err
	}
	t := b.tx
	raw := cb.Get(counterKey)
	first, _ := b.Cursor().First()
	if err := t.err; err != nil {
		return err
	}
	if len(raw) != 8 {
		return fmt.Errorf("postgres: start sequence: %w: the counter holds %d bytes, not an 8-byte integer", kv.ErrIncompatibleValue, len(raw))
	}
	last := int64(binary.BigEndian.Uint64(raw))
	floor := last
	if len(first) == 8 {
		floor = int64(binary.BigEndian.Uint64(first)) - 1
	}
	create := "CREATE SEQUENCE " + t.s.sequenceName(cb.id, counterKey) + " AS bigint MINVALUE 0 START WITH " +
		strconv.FormatInt(last+1, 10) + " OWNED BY " + cb.sql.name + ".k"
	if err := t.trip("start sequence", func(batch *pgx.Batch) { batch.Queue(create) }); err != nil {
		return err
	}
	return cb.Put(counterKey, binary.BigEndian.AppendUint64(nil, uint64(floor)))
}

// Sequence queues value for the commit (see kv.Sequencer).
func (b *bucket) Sequence(counter kv.Bucket, counterKey, value []byte) error {
	if err := b.writable("sequence"); err != nil {
		return err
	}
	cb, err := b.counterOf("sequence", counter, counterKey)
	if err != nil {
		return err
	}
	if len(value) > MaxValueSize {
		return fmt.Errorf("postgres: sequence: %w: %d bytes, the limit is %d", kv.ErrValueTooLarge, len(value), MaxValueSize)
	}
	if value == nil {
		value = []byte{}
	}
	s, err := b.sequenceOf("sequence", cb, counterKey)
	if err != nil {
		return err
	}
	s.vals = append(s.vals, value)
	return nil
}

// sequenceOf returns what b numbers at commit from counterKey of cb,
// made on the first value.
func (b *bucket) sequenceOf(op string, cb *bucket, counterKey []byte) (*sequence, error) {
	s := b.seq
	if s == nil {
		s = &sequence{counter: cb, key: b.tx.arena.copy(counterKey), name: b.tx.s.sequenceName(cb.id, counterKey)}
		b.seq = s
		b.tx.sequenced = append(b.tx.sequenced, b)
	} else if s.counter != cb || string(s.key) != string(counterKey) {
		return nil, fmt.Errorf("postgres: %s: %w: a bucket's values take one counter", op, kv.ErrIncompatibleValue)
	}
	return s, nil
}

// SequenceRun queues r for the commit (see kv.RunSequencer).
func (b *bucket) SequenceRun(counter kv.Bucket, counterKey []byte, r kv.Run) error {
	if err := b.writable("sequence run"); err != nil {
		return err
	}
	cb, err := b.counterOf("sequence run", counter, counterKey)
	if err != nil {
		return err
	}
	sh := r.Shape
	side, err := b.sideOf("sequence run", sh)
	if err != nil {
		return err
	}
	switch {
	case len(r.Entries) == 0 || len(r.Entries)%sh.Size != 0:
		return fmt.Errorf("postgres: sequence run: %w: %d bytes of entries of %d bytes each", kv.ErrIncompatibleValue, len(r.Entries), sh.Size)
	case 1+len(r.Entries) > MaxValueSize:
		return fmt.Errorf("postgres: sequence run: %w: %d bytes, the limit is %d", kv.ErrValueTooLarge, 1+len(r.Entries), MaxValueSize)
	case len(r.SideOf) != len(r.Sides):
		return fmt.Errorf("postgres: sequence run: %w: %d side values for %d entries", kv.ErrIncompatibleValue, len(r.Sides), len(r.SideOf))
	case len(r.Sides) > 0 && side == nil:
		return fmt.Errorf("postgres: sequence run: %w: side values without a side bucket", kv.ErrIncompatibleValue)
	}
	q := run{shape: sh}
	n := len(r.Entries) / sh.Size
	for j, i := range r.SideOf {
		switch {
		case i < 0 || i >= n:
			return fmt.Errorf("postgres: sequence run: %w: a side value of entry %d of %d", kv.ErrIncompatibleValue, i, n)
		case r.Entries[i*sh.Size]&sh.SideFlag == 0:
			// The trim finds an entry's side value by the flag alone.
			return fmt.Errorf("postgres: sequence run: %w: entry %d has a side value and not the flag %#x", kv.ErrIncompatibleValue, i, sh.SideFlag)
		case len(r.Sides[j]) > MaxValueSize:
			return fmt.Errorf("postgres: sequence run: %w: a side value of %d bytes, the limit is %d", kv.ErrValueTooLarge, len(r.Sides[j]), MaxValueSize)
		}
		q.sideOf = append(q.sideOf, int32(i+1))
		v := r.Sides[j]
		if v == nil {
			v = []byte{}
		}
		q.sides = append(q.sides, v)
	}
	s, err := b.sequenceOf("sequence run", cb, counterKey)
	if err != nil {
		return err
	}
	q.value = make([]byte, 1+len(r.Entries))
	q.value[0] = sh.Tag
	copy(q.value[1:], r.Entries)
	s.runs = append(s.runs, q)
	return nil
}

// sideOf checks sh, and returns its side bucket (nil: it has none).
func (b *bucket) sideOf(op string, sh kv.RunShape) (*bucket, error) {
	if sh.Size < 1 || sh.SideKey < 0 || 1+sh.SideKey > sh.Size {
		return nil, fmt.Errorf("postgres: %s: %w: entries of %d bytes with side keys of %d", op, kv.ErrIncompatibleValue, sh.Size, sh.SideKey)
	}
	if sh.Side == nil {
		return nil, nil
	}
	side, ok := sh.Side.(*bucket)
	switch {
	case !ok || side.tx != b.tx:
		return nil, fmt.Errorf("postgres: %s: %w: the side bucket is not a bucket of this transaction", op, kv.ErrIncompatibleValue)
	case side.deleted:
		return nil, fmt.Errorf("postgres: %s: %w", op, errDeleted)
	case sh.SideFlag == 0:
		return nil, fmt.Errorf("postgres: %s: %w: a side bucket without a flag to find its values by", op, kv.ErrIncompatibleValue)
	}
	return side, nil
}

// TrimRuns sets how the commit trims the bucket of runs (see
// kv.RunSequencer).
func (b *bucket) TrimRuns(keep, slack int64, max int, shape kv.RunShape) error {
	if err := b.writable("trim"); err != nil {
		return err
	}
	if _, err := b.sideOf("trim", shape); err != nil {
		return err
	}
	if b.seq == nil {
		return nil
	}
	b.seq.keep, b.seq.slack, b.seq.max, b.seq.shape = max64(keep, 0), max64(slack, 0), max, &shape
	return nil
}

// TrimSequence sets how the commit trims the bucket (see kv.Sequencer).
func (b *bucket) TrimSequence(keep, slack int64, max int) error {
	if err := b.writable("trim"); err != nil {
		return err
	}
	if b.seq == nil {
		return nil // nothing sequenced: nothing to trim with
	}
	b.seq.keep, b.seq.slack, b.seq.max = max64(keep, 0), max64(slack, 0), max
	return nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// queueSequences queues the statement of each bucket's sequenced values,
// in the order of their counters' buckets and keys, so that the floors of
// two collections a commit trims are locked in one order.
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
		if bk.deleted || s.counter.deleted || len(s.vals)+len(s.runs) == 0 {
			continue
		}
		if len(s.vals) > 0 {
			b.Queue(sequenceSQL(s.name, bk.sql.name), s.vals)
		}
		for _, r := range s.runs {
			queueRun(b, s.name, bk, r)
		}
		switch {
		case s.keep <= 0 || s.max <= 0:
		case s.shape == nil:
			b.Queue(trimSQL(s.name, s.counter.sql.name, bk.sql.name), s.keep, s.key, s.max, s.slack)
		default:
			sh := s.shape
			side, _ := sh.Side.(*bucket)
			if side == nil || side.deleted {
				b.Queue(trimRunsSQL(s.name, s.counter.sql.name, bk.sql.name, ""), s.keep, s.key, s.max, s.slack, int32(sh.Tag), sh.Size)
				continue
			}
			b.Queue(trimRunsSQL(s.name, s.counter.sql.name, bk.sql.name, side.sql.name), s.keep, s.key, s.max, s.slack,
				int32(sh.Tag), sh.Size, int32(sh.SideFlag), sh.SideKey)
		}
	}
	t.sequenced = nil
}

// sequenceSQL is the statement of sequenced values (see sequence): $1 the
// values. The numbers are drawn in the order of the values (a function
// scan keeps its rows' order, and nextval is evaluated row by row).
func sequenceSQL(seq, table string) string {
	return "INSERT INTO " + table + " (k, v) SELECT int8send(nextval('" + seq + "')), u.val" +
		" FROM unnest($1::bytea[]) WITH ORDINALITY AS u(val, ord)"
}

// runRowBytes bounds the stored value of one row of a run: a run is
// stored in rows of as many entries as fit, so that a row stays in its
// table's page, under PostgreSQL's threshold for moving values out of line
// (about 2 KB), where a commit would compress the value and write it to a
// table of its own, and the trim delete it there.
const runRowBytes = 1800

// queueRun queues the statement of run r of bucket bk, numbered from
// sequence seq (see kv.RunSequencer). It draws the numbers one per entry,
// in order, as sequenceSQL does, and stores the entries in rows of
// consecutive numbers, each under its first: rows of up to runRowBytes,
// and, where a concurrent commit drew between two numbers, a row ends
// there too (the entries whose number less their place is the same are
// one stretch). A side value goes under the bytes of its entry that lead
// its key and the entry's number.
func queueRun(b *pgx.Batch, seq string, bk *bucket, r run) {
	size := r.shape.Size
	n := (len(r.value) - 1) / size
	side, _ := r.shape.Side.(*bucket)
	if len(r.sides) == 0 || side.deleted {
		side = nil
	}
	if n == 1 {
		// One number, one row: as plain as a value's statement (a third
		// less for a single put's commit than the statement that groups).
		if side == nil {
			b.Queue("INSERT INTO "+bk.sql.name+" (k, v) SELECT int8send(nextval('"+seq+"')), $1::bytea", r.value)
			return
		}
		b.Queue("WITH d AS (SELECT nextval('"+seq+"') AS v),"+
			" one AS (INSERT INTO "+bk.sql.name+" (k, v) SELECT int8send(d.v), $1::bytea FROM d)"+
			" INSERT INTO "+side.sql.name+" (k, v) SELECT substring($1::bytea FROM 3 FOR $2::int) || int8send(d.v), $3::bytea FROM d",
			r.value, r.shape.SideKey, r.sides[0])
		return
	}
	perRow := max(1, (runRowBytes-1)/size)
	q := "WITH d AS MATERIALIZED (SELECT nextval('" + seq + "') AS v, o FROM generate_series(1, $2::int) AS o)," +
		" g AS (SELECT min(d.v) AS v, min(d.o) AS o, count(*)::int AS n FROM d GROUP BY d.v - d.o, (d.o - 1) / $5::int)," +
		" ins AS (INSERT INTO " + bk.sql.name + " (k, v)" +
		" SELECT int8send(g.v), $3::bytea || substring($1::bytea FROM 2 + (g.o - 1) * $4::int FOR g.n * $4::int) FROM g)"
	if side == nil {
		b.Queue(q+" SELECT 1", r.value, n, []byte{r.shape.Tag}, size, perRow)
		return
	}
	b.Queue(q+" INSERT INTO "+side.sql.name+" (k, v)"+
		" SELECT substring($1::bytea FROM 3 + (u.o - 1) * $4::int FOR $8::int) || int8send(d.v), u.val"+
		" FROM unnest($6::int[], $7::bytea[]) AS u(o, val) JOIN d ON d.o = u.o",
		r.value, n, []byte{r.shape.Tag}, size, perRow, r.sideOf, r.sides, r.shape.SideKey)
}

// trimRunsSQL is trimSQL of a bucket of runs (see kv.RunSequencer): $5
// the runs' tag, $6 the size of an entry; with a side table, $7 the flag
// of an entry with a side value, $8 the bytes of an entry that lead its
// key. A run is deleted whole once its last number is at or below the
// bound, the rows found are at most $3, and so are the entries deleted
// (the first row's always: a run may hold more).
func trimRunsSQL(seq, counter, table, side string) string {
	bound := "(SELECT currval('" + seq + "') - $1::bigint)"
	entries := func(v string) string {
		return "CASE WHEN get_byte(" + v + ", 0) = $5::int THEN (length(" + v + ") - 1) / $6::int ELSE 1 END"
	}
	q := "WITH fl AS (SELECT c.v FROM " + counter + " AS c WHERE c.k = $2" +
		" AND " + beIntAt("c.v", "1") + " < " + bound + " - $4::bigint FOR UPDATE SKIP LOCKED)," +
		" found AS (SELECT f.k, " + entries("f.v") + " AS n FROM " + table + " AS f" +
		" WHERE f.k > (SELECT CASE WHEN " + beIntAt("fl.v", "1") + " / " + strconv.Itoa(strayEvery) +
		" <> " + bound + " / " + strconv.Itoa(strayEvery) + " THEN ''::bytea ELSE fl.v END FROM fl)" +
		" AND f.k <= int8send(" + bound + ")" +
		" ORDER BY f.k LIMIT $3::int)," +
		" cand AS (SELECT x.k, " + beIntAt("x.k", "1") + " + x.n - 1 AS last, sum(x.n) OVER (ORDER BY x.k) - x.n AS ahead FROM found AS x)," +
		" del AS (DELETE FROM " + table + " WHERE k IN (SELECT k FROM cand WHERE last <= " + bound + " AND ahead < $3::int)" +
		" RETURNING k, v, " + beIntAt("k", "1") + " + " + entries("v") + " - 1 AS last),"
	if side != "" {
		q += " sd AS (DELETE FROM " + side + " WHERE k IN (SELECT substring(d.v FROM 3 + i * $6::int FOR $8::int) || int8send(" + beIntAt("d.k", "1") + " + i)" +
			" FROM del AS d, generate_series(0, (length(d.v) - 1) / $6::int - 1) AS i" +
			" WHERE get_byte(d.v, 0) = $5::int AND (get_byte(d.v, 1 + i * $6::int) & $7::int) <> 0)),"
	}
	return q + " up AS (UPDATE " + counter + " AS c SET v = int8send(greatest(" + beIntAt("c.v", "1") + "," +
		" (SELECT max(d.last) FROM del AS d)))" +
		" WHERE EXISTS (SELECT FROM del) AND c.k = $2)" +
		" SELECT 1"
}

// strayEvery: a trim whose range crosses a multiple of it looks for
// strays from the start of the bucket (see trimSQL).
const strayEvery = 1024

// trimSQL is the trim that follows sequenceSQL in the same transaction,
// so that it sees the values just stored: $1 keep, $2 the floor's key in
// counter, $3 the most keys to trim, $4 the slack. Its bound is keep below
// currval, the last number this session drew: the last of those values.
// The floor row is locked only when the floor is more than the slack below
// the bound, so most commits take no lock at all and leave the floor row
// as it is. The oldest keys are found by an index
// scan that starts at the floor and stops at the bound: the deleted keys
// below the floor stay in the index as dead entries until a vacuum, and a
// scan from the start would step over all of them at every commit (a
// PutMany of 1000 took 4.5 times as long with a feed as without, against
// 1.8 times with the scan from the floor).
//
// A key can land below the floor: a commit that drew its number, and was
// still flushing while enough greater numbers were drawn and trimmed past
// it (more than keep), stores it after the trim that raised the floor
// over it. No reader ever reads it (readers start at the floor), but it
// takes room: so a trim whose range crosses a multiple of strayEvery scans
// from the start instead, once per strayEvery changes, and deletes such
// strays with the rest. The floor's update is gated by a one-time filter:
// a commit that did not lock the floor row (or found nothing to delete)
// does not touch it.
func trimSQL(seq, counter, table string) string {
	// A scalar subquery, computed once: currval is volatile, and compared
	// row by row it would keep the index from finding the oldest keys
	// (a scan of the whole feed at every commit).
	bound := "(SELECT currval('" + seq + "') - $1::bigint)"
	return "WITH fl AS (SELECT c.v FROM " + counter + " AS c WHERE c.k = $2" +
		" AND " + beIntAt("c.v", "1") + " < " + bound + " - $4::bigint FOR UPDATE SKIP LOCKED)," +
		" del AS (DELETE FROM " + table + " WHERE k IN (SELECT f.k FROM " + table + " AS f" +
		" WHERE f.k > (SELECT CASE WHEN " + beIntAt("fl.v", "1") + " / " + strconv.Itoa(strayEvery) +
		" <> " + bound + " / " + strconv.Itoa(strayEvery) + " THEN ''::bytea ELSE fl.v END FROM fl)" +
		" AND f.k <= int8send(" + bound + ")" +
		" ORDER BY f.k LIMIT $3::int) RETURNING k)," +
		" up AS (UPDATE " + counter + " AS c SET v = int8send(greatest(" + beIntAt("c.v", "1") + "," +
		" (SELECT " + beIntAt("d.k", "1") + " FROM del AS d ORDER BY d.k DESC LIMIT 1)))" +
		" WHERE EXISTS (SELECT FROM del) AND c.k = $2)" +
		" SELECT 1"
}

// SettleSequence waits for the writers of counter's top-level bucket, and
// returns the last number drawn from the sequence of counterKey once they
// have ended (see kv.Settler). It takes the bucket's advisory lock alone,
// on a connection of its own outside any transaction: every writer of the
// bucket holds that lock, shared or alone, from its first statement to
// its end, and draws its numbers at its commit, so once the lock is
// granted, no number drawn before is still to commit. The lock is held
// for the one statement: the writers queued behind it go on at once. A
// store that reads from a standby raises its read floor to where the
// primary's WAL ended then, so that its next read sees those commits.
func (b *bucket) SettleSequence(ctx context.Context, counter kv.Bucket, counterKey []byte) (uint64, error) {
	cb, ok := counter.(*bucket)
	switch {
	case !ok || cb.tx != b.tx:
		return 0, fmt.Errorf("postgres: settle: %w: the counter is not a bucket of this transaction", kv.ErrIncompatibleValue)
	case cb.top == nil:
		return 0, fmt.Errorf("postgres: settle: %w: the counter is not in a top-level bucket", kv.ErrIncompatibleValue)
	}
	s := b.tx.s
	q := "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END, " +
		"(CASE WHEN pg_is_in_recovery() THEN '0/0'::pg_lsn ELSE pg_current_wal_insert_lsn() END)::text FROM " +
		s.sequenceName(cb.id, counterKey) + " WHERE (SELECT pg_advisory_xact_lock($1)) IS NOT NULL"
	var last int64
	var lsn string
	if err := s.pool.QueryRow(ctx, q, s.lockKey([]byte(cb.top.name))).Scan(&last, &lsn); err != nil {
		return 0, dbErr("settle", err)
	}
	if s.standby != nil {
		if pos, err := parseLSN(lsn); err == nil && pos > 0 {
			raise(&s.floor, pos)
		}
	}
	return uint64(last), nil
}
