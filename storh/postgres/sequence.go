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
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/kv"
)

// Runs numbered at commit (kv.Sequencer). A counter made by StartSequence
// is a PostgreSQL sequence, named after the counter's bucket and key and
// owned by the bucket's table (so it goes when the table does). A bucket
// keeps the runs it is given until the commit, where statements queued
// after every other write of the transaction, right before its commit
// marker and COMMIT and in the same round trip, draw their numbers, store
// them, then trim the bucket:
//
//	SAVEPOINT; the counter's draw lock, then nextval and setval: a block
//	    of consecutive numbers for all the runs of the counter
//	ROLLBACK TO SAVEPOINT (the lock goes; the sequence keeps the block)
//	INSERT the runs' rows, and their side values, numbered from currval
//	WITH fl  AS (the floor row, FOR UPDATE SKIP LOCKED, if below the bound),
//	     del AS (DELETE the oldest runs ending at or below currval - keep,
//	             their entries at most max, if fl was locked),
//	     up  AS (UPDATE the floor row to the last number del deleted)
//
// The draw lock is held for the draw alone, never through a commit's WAL
// flush: writers of one collection draw numbers in turn but commit side by
// side, their flushes grouped, where a counter row would hold each
// writer's lock through its flush and make the commits take turns. A block
// costs one nextval and one setval where a nextval per entry cost a commit
// of 1,000 changes about 0.4 ms of the server's time. The price is on the
// readers' side: a number drawn by a transaction still committing can
// become visible after a greater one, and a reader that meets such a gap
// settles it (SettleSequence) before it passes it. The floor row is
// locked only by the commit that trims, and a commit that finds it locked
// leaves the trim to the one that holds it: so it is never waited for
// either, and as one commit at a time trims, the rows it deletes need no
// locks of their own.
type sequence struct {
	counter *bucket
	key     []byte
	name    string // the PostgreSQL sequence, quoted and schema-qualified
	table   string // the sequenced bucket's table, set at commit
	runs    []run
	keep    int64
	slack   int64
	max     int
	shape   kv.RunShape // TrimRuns: the runs' shape, when keep and max are set
}

// run is a run queued by SequenceRun: its stored value, Tag ‖ entries.
type run struct {
	value  []byte
	shape  kv.RunShape
	sideOf []int32 // 1-based, as the statement numbers the entries
	sides  byteaArray
}

var (
	_ kv.Sequencer = (*bucket)(nil)
	_ kv.Settler   = (*bucket)(nil)
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

// SequenceRun queues r for the commit (see kv.Sequencer).
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
// kv.Sequencer).
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
	b.seq.keep, b.seq.slack, b.seq.max, b.seq.shape = max64(keep, 0), max64(slack, 0), max, shape
	return nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// queueSequences queues the statements of each bucket's runs (see
// sequence), in the order of their counters' buckets and keys, so that two
// collections' draw locks, and the floors a commit trims, are taken in one
// order. The first run of a counter draws the counter's block.
//
// A trim is queued only when, by what this store's commits saw of the
// sequence (its last number and floor), the floor is more than the slack
// below the bound: a trim statement that finds nothing to do still cost
// about 50µs of the server's time, a tenth of a durable single put's
// commit, and most commits would find nothing. The numbers drawn since
// by other stores are not seen, so a commit may leave a trim that is due
// to a later one, theirs or this store's next, which sees them; the floor
// others raised is not seen either, so a commit may queue a trim that then
// finds nothing, and learns the floor from it.
func (t *tx) queueSequences(b *pgx.Batch) {
	slices.SortFunc(t.sequenced, func(x, y *bucket) int {
		if c := cmp.Compare(x.seq.counter.id, y.seq.counter.id); c != 0 {
			return c
		}
		return bytes.Compare(x.seq.key, y.seq.key)
	})
	var live []*sequence
	blocks := map[string]int64{} // sequence → the entries of its block
	for _, bk := range t.sequenced {
		s := bk.seq
		bk.seq = nil
		if bk.deleted || s.counter.deleted || len(s.runs) == 0 {
			continue
		}
		s.table = bk.sql.name
		live = append(live, s)
		for _, r := range s.runs {
			blocks[s.name] += int64(r.entries())
		}
	}
	t.sequenced = nil
	ahead := map[string]int64{} // sequence → the entries of its block queued so far
	for _, s := range live {
		seen := t.sees(s.name)
		for _, r := range s.runs {
			n := blocks[s.name]
			if ahead[s.name] == 0 {
				t.drew = true
				t.s.queueRun(b, s.name, n, s.table, r, -n).QueryRow(func(row pgx.Row) error {
					return row.Scan(&seen.last)
				})
			} else {
				// The block's last number less the entries from r on.
				t.s.queueRun(b, s.name, 0, s.table, r, ahead[s.name]-n)
			}
			ahead[s.name] += int64(r.entries())
		}
		if s.keep <= 0 || s.max <= 0 {
			continue
		}
		if was := t.s.seenOf(s.name); was.last+blocks[s.name]-s.keep-was.floor <= s.slack {
			continue
		}
		sh := s.shape
		side, _ := sh.Side.(*bucket)
		var q *pgx.QueuedQuery
		if side == nil || side.deleted {
			q = b.Queue(trimRunsSQL(s.name, s.counter.sql.name, s.table, ""), s.keep, s.key, s.max, s.slack, int32(sh.Tag), sh.Size)
		} else {
			q = b.Queue(trimRunsSQL(s.name, s.counter.sql.name, s.table, side.sql.name), s.keep, s.key, s.max, s.slack,
				int32(sh.Tag), sh.Size, int32(sh.SideFlag), sh.SideKey)
		}
		q.QueryRow(func(row pgx.Row) error { return row.Scan(&seen.floor) })
		t.s.trims.Add(1)
	}
}

// seqSeen is what commits saw of a sequence: the last number drawn, and
// the floor after a trim (0: none seen).
type seqSeen struct{ last, floor int64 }

// seenOf is what this store's commits saw of sequence seq.
func (s *Store) seenOf(seq string) seqSeen {
	if v, ok := s.seen.Load(seq); ok {
		return v.(*atomicSeen).load()
	}
	return seqSeen{}
}

// sees is where t's commit puts what it sees of sequence seq.
func (t *tx) sees(seq string) *seqSeen {
	if t.seen == nil {
		t.seen = map[string]*seqSeen{}
	}
	v := t.seen[seq]
	if v == nil {
		v = &seqSeen{}
		t.seen[seq] = v
	}
	return v
}

// saw records what a commit saw of its sequences: the greater of each
// number and what the store saw before, as both only grow.
func (s *Store) saw(seen map[string]*seqSeen) {
	for seq, v := range seen {
		a, _ := s.seen.LoadOrStore(seq, new(atomicSeen))
		a.(*atomicSeen).raise(*v)
	}
}

// atomicSeen is a seqSeen that commits raise side by side.
type atomicSeen struct {
	mu sync.Mutex
	v  seqSeen
}

func (a *atomicSeen) load() seqSeen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.v
}

func (a *atomicSeen) raise(v seqSeen) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.v.last, a.v.floor = max(a.v.last, v.last), max(a.v.floor, v.floor)
}

// drawSQL is the query of one row, last, that draws a block of n numbers
// ($n, a parameter, so that one statement serves every size) from
// sequence seq and returns its last: it takes the sequence's draw lock,
// draws, and lets the lock go again, in that order (each step reads the
// row of the one before it, and a subquery with an OFFSET is planned as a
// step of its own). The lock is a session's, held for the draw alone: a
// transaction's would be held through the commit and make writers commit
// in turn. Its key is two integers, a space of its own, apart from the
// single-integer keys of the buckets' holds. A draw that fails between
// the two steps leaves the lock held, which the failed commit then lets
// go (see releaseDraws). The unlock's answer gates the number: were the
// lock not held, the row's key would be NULL and the commit fail.
func (s *Store) drawSQL(seq, n string) string {
	k := s.lockKey([]byte(seq))
	lock := strconv.Itoa(int(int32(k>>32))) + ", " + strconv.Itoa(int(int32(k)))
	return "(SELECT CASE WHEN pg_advisory_unlock(" + lock + ") THEN x.last END AS last" +
		" FROM (SELECT CASE WHEN " + n + "::bigint = 1 THEN nextval('" + seq + "')" +
		" ELSE setval('" + seq + "', nextval('" + seq + "') + " + n + "::bigint - 1) END AS last" +
		" FROM (SELECT pg_advisory_lock(" + lock + ") OFFSET 0) AS l OFFSET 0) AS x)"
}

// releaseDraws lets go of any draw lock a failed commit left held (see
// drawSQL), before the connection goes back to the pool: the pool's
// connections hold no other session locks. A connection that cannot is
// closed, which lets go of them too.
func (t *tx) releaseDraws() {
	if !t.drew || t.conn == nil {
		return
	}
	t.drew = false
	if _, err := t.conn.Exec(t.ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
		_ = t.conn.Conn().Close(context.Background())
	}
}

// entries is the number of entries of r.
func (r run) entries() int { return (len(r.value) - 1) / r.shape.Size }

// runRowBytes bounds the stored value of one row of a run: a run is
// stored in rows of as many entries as fit, so that a row stays in its
// table's page, under PostgreSQL's threshold for moving values out of line
// (about 2 KB), where a commit would compress the value and write it to a
// table of its own, and the trim delete it there.
const runRowBytes = 1800

// queueRun queues the statement that stores run r in table, numbered
// from sequence seq (see kv.Sequencer): its first entry last + base + 1,
// where last is the last number of the block of draw numbers the
// statement draws, or with draw 0, of the block drawn before it (currval),
// and the others on from it. It stores them in rows of up to runRowBytes,
// each under the number of its first entry, with a side value under the
// bytes of its entry that lead its key and the entry's number, and
// answers last.
func (s *Store) queueRun(b *pgx.Batch, seq string, draw int64, table string, r run, base int64) *pgx.QueuedQuery {
	size := r.shape.Size
	n := r.entries()
	perRow := max(1, (runRowBytes-1)/size)
	args := []any{r.value, base + 1}
	p := func(i int) string { return "$" + strconv.Itoa(len(args)+i) }
	d := "(SELECT currval('" + seq + "') AS last)"
	if draw > 0 {
		d = s.drawSQL(seq, p(1))
		args = append(args, draw)
	}
	q := "WITH d AS MATERIALIZED " + d + ", ins AS ("
	if n <= perRow {
		q += "INSERT INTO " + table + " (k, v) SELECT int8send(d.last + $2::bigint), $1::bytea FROM d)"
	} else {
		q += "INSERT INTO " + table + " (k, v) SELECT int8send(d.last + $2::bigint + g.r * " + p(1) + "::int)," +
			" " + p(2) + "::bytea || substring($1::bytea FROM 2 + g.r * " + p(1) + "::int * " + p(3) + "::int FOR " + p(1) + "::int * " + p(3) + "::int)" +
			" FROM d, generate_series(0, " + p(4) + "::int - 1) AS g(r))"
		args = append(args, perRow, []byte{r.shape.Tag}, size, (n+perRow-1)/perRow)
	}
	if side, _ := r.shape.Side.(*bucket); len(r.sides) > 0 && !side.deleted {
		q += ", sd AS (INSERT INTO " + side.sql.name + " (k, v)" +
			" SELECT substring($1::bytea FROM 3 + (u.o - 1) * " + p(1) + "::int FOR " + p(2) + "::int) || int8send(d.last + $2::bigint - 1 + u.o), u.val" +
			" FROM d, unnest(" + p(3) + "::int[], " + p(4) + "::bytea[]) AS u(o, val))"
		args = append(args, size, r.shape.SideKey, r.sideOf, r.sides)
	}
	return b.Queue(q+" SELECT d.last FROM d", args...)
}

// strayEvery: a trim whose range crosses a multiple of it looks for
// strays from the start of the bucket (see trimRunsSQL).
const strayEvery = 1024

// trimRunsSQL is the trim that follows the runs' statements in the same
// transaction, so that it sees the rows just stored: $1 keep, $2 the
// floor's key in counter, $3 the most entries to trim, $4 the slack, $5
// the runs' tag, $6 the size of an entry; with a side table, $7 the flag
// of an entry with a side value, $8 the bytes of an entry that lead its
// key. Its bound is keep below currval, the last number this session
// drew. The floor row is locked only when the floor is more than the
// slack below the bound, so most commits take no lock at all and leave
// the floor row as it is. A run is deleted whole once its last number is
// at or below the bound; the rows found are at most $3, and so are the
// entries deleted (the first row's always: a run may hold more).
//
// The oldest rows are found by an index scan that starts at the floor
// and stops at the bound: the deleted keys below the floor stay in the
// index as dead entries until a vacuum, and a scan from the start would
// step over all of them at every commit (a PutMany of 1000 took 4.5 times
// as long with a feed as without, against 1.8 times with the scan from the
// floor, when a feed held a row per change).
//
// A row can land below the floor: a commit that drew its number, and was
// still flushing while enough greater numbers were drawn and trimmed past
// it (more than keep), stores it after the trim that raised the floor
// over it. No reader ever reads it (readers start at the floor), but it
// takes room: so a trim whose range crosses a multiple of strayEvery scans
// from the start instead, once per strayEvery changes, and deletes such
// strays with the rest. The floor's update is gated by a one-time filter:
// a commit that did not lock the floor row (or found nothing to delete)
// does not touch it. The statement answers the floor after it. The bound
// is a scalar subquery, computed once:
// currval is volatile, and compared row by row it would keep the index
// from finding the oldest keys (a scan of the whole feed at every commit).
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
		" SELECT greatest((SELECT " + beIntAt("c.v", "1") + " FROM " + counter + " AS c WHERE c.k = $2), (SELECT max(d.last) FROM del AS d))"
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
