package postgres

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/kv"
)

var _ kv.Pipeliner = (*tx)(nil)

// Pipeline sends reads as one batch, each after its bucket's buffered
// writes, in one round trip (see kv.Pipeliner). A read that needs no
// statement (locks in a read-only transaction, no keys, a deleted bucket)
// answers nil without one; reads that all need none make no trip.
func (t *tx) Pipeline(reads ...*kv.Read) {
	for _, r := range reads {
		r.Found, r.Values, r.Followed = nil, nil, nil
		switch r.Op {
		case kv.LockRange:
			r.Followed = make([][][]byte, len(r.Follow))
		case kv.After:
			r.Found, r.Values = make([][]byte, len(r.Keys)), make([][]byte, len(r.Keys))
		default:
			r.Values = make([][]byte, len(r.Keys))
		}
	}
	if !t.readable() {
		return
	}
	sent := make([]*bucket, len(reads)) // nil: the read needs no statement
	sending := false
	for i, r := range reads {
		b, ok := r.Bucket.(*bucket)
		for _, f := range r.Follow {
			fb, isOurs := f.Bucket.(*bucket)
			ok = ok && isOurs && fb.tx == t
		}
		if !ok || b.tx != t {
			_ = t.fail("pipeline", errors.New("a read of a bucket of another transaction"))
			return
		}
		if b.needsTrip(r) {
			sent[i], sending = b, true
		}
	}
	if !sending {
		return
	}
	err := t.trip("pipeline", func(batch *pgx.Batch) {
		for i := 0; i < len(reads); {
			b := sent[i]
			if b == nil {
				i++
				continue
			}
			end := i + 1
			for reads[i].Op == kv.LockRange && end < len(reads) && end-i < 256 && sent[end] != nil && reads[end].Op == kv.LockRange {
				end++
			}
			if end-i > 1 {
				queueRanges(batch, sent[i:end], reads[i:end])
			} else {
				b.queueFlush(batch)
				b.queueRead(batch, reads[i])
			}
			i = end
		}
	})
	if err != nil {
		for _, r := range reads {
			switch r.Op {
			case kv.LockRange:
				r.Found, r.Values = nil, nil
				clear(r.Followed)
			case kv.After:
				clear(r.Found)
				clear(r.Values)
			default:
				r.Found = nil
				clear(r.Values)
			}
		}
	}
}

// needsTrip reports whether read r of b needs a statement. The key of a
// nested bucket, which a Get answers nil without one, goes with the
// others: its row's value is NULL.
func (b *bucket) needsTrip(r *kv.Read) bool {
	t := b.tx
	switch {
	case b.deleted:
		return false
	case r.Op == kv.LockRange:
		return t.writable && r.N > 0
	case r.Op == kv.After:
		return len(r.Keys) > 0
	case r.Op != kv.Get && !t.writable:
		return false
	}
	if b.unchecked && r.Op == kv.Get {
		for _, k := range r.Keys {
			t.observe(b, k)
		}
	}
	return len(r.Keys) > 0
}

// queueRead queues read r of b, whose callback fills in its answer; the
// answer is reset first, as a trip that finds a cached subtree stale
// builds its batch again.
func (b *bucket) queueRead(batch *pgx.Batch, r *kv.Read) {
	t := b.tx
	switch r.Op {
	case kv.LockRange:
		b.queueRange(batch, r)
		return
	case kv.After:
		b.queueAfter(batch, r)
		return
	}
	clear(r.Values)
	stmt := getKeysSQL(b.sql)
	switch r.Op {
	case kv.LockKeys:
		stmt = b.sql.lockKeys
	case kv.TryKeys:
		stmt = b.sql.tryKeys
	}
	batch.Queue(stmt, r.Keys).Query(func(rows pgx.Rows) error {
		got := make(map[string][]byte, len(r.Keys))
		for rows.Next() {
			k, v, err := scanRow(rows, &t.arena, true)
			if err != nil {
				return err
			}
			got[string(k)] = v
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for i, k := range r.Keys {
			r.Values[i] = got[string(k)]
		}
		return nil
	})
}

// queueAfter queues After read r of b: for each key, an index seek past
// it, in one statement that answers a row per key, in their order (NULLs
// where none is in bounds: a stored key is never empty).
func (b *bucket) queueAfter(batch *pgx.Batch, r *kv.Read) {
	t := b.tx
	clear(r.Found)
	clear(r.Values)
	stmt := "SELECT x.k, x.v FROM unnest($1::bytea[], $2::bytea[]) WITH ORDINALITY AS u(lo, hi, o)" +
		" LEFT JOIN LATERAL (SELECT f.k, f.v FROM " + b.sql.name + " AS f WHERE f.k > u.lo AND f.k < u.hi ORDER BY f.k LIMIT 1) AS x ON true" +
		" ORDER BY u.o"
	batch.Queue(stmt, byteaArray(r.Keys), byteaArray(r.Ends)).Query(func(rows pgx.Rows) error {
		i := 0
		for ; rows.Next(); i++ {
			k, v, err := scanRow(rows, &t.arena, true)
			if err != nil {
				return err
			}
			if i < len(r.Keys) && len(k) > 0 {
				r.Found[i], r.Values[i] = k, v
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if i != len(r.Keys) {
			return fmt.Errorf("postgres: after: %d rows for %d keys", i, len(r.Keys))
		}
		return nil
	})
}

// getKeysSQL is the statement of a Get of several keys of table q.
func getKeysSQL(q *tableSQL) string {
	return "SELECT k, v FROM " + q.name + " WHERE k = ANY($1::bytea[])"
}

// queueRange queues LockRange r of b, following its values into r.Follow
// in the same statement: a scalar subquery per bucket followed, which
// PostgreSQL runs for each row once the range has locked it, as an index
// lookup (a join of the tables may scan one whole).
func (b *bucket) queueRange(batch *pgx.Batch, r *kv.Read) {
	stmt, args := b.rangeSQL(r, 0)
	follows := queueFollowFlushes(batch, r)
	if len(r.Follow) > 0 {
		tables, locks := followed(r, follows)
		stmt = followSQL(stmt, tables, locks)
	}
	batch.Queue(stmt, args...).Query(func(rows pgx.Rows) error {
		return scanRanges(rows, &b.tx.arena, []*kv.Read{r}, [][]int{follows}, len(follows))
	})
}

// queueRanges queues the LockRanges rs of buckets bs, two or more in a
// row in a pipeline, as one statement (see rangesSQL). A statement costs
// the server its executor's start and end and the protocol's messages
// whatever it reads, so a claim's look for expired leases, which mostly
// finds none, rides with its read of the pending jobs instead of costing
// a statement of its own. The ranges' buffered writes all go first: a
// write a range would have met after an earlier range is to a bucket the
// earlier one does not read (one it read was sent with it), so each finds
// what it would have found alone; the ranges share the statement's
// snapshot, as if they ran in the same instant, and the locks each takes
// are held as the next runs.
func queueRanges(batch *pgx.Batch, bs []*bucket, rs []*kv.Read) {
	follows := make([][]int, len(rs))
	ranged := make([]string, len(rs))
	tables, locks := make([][]string, len(rs)), make([][]bool, len(rs))
	var args []any
	width := 0
	for i, r := range rs {
		bs[i].queueFlush(batch)
		follows[i] = queueFollowFlushes(batch, r)
		tables[i], locks[i] = followed(r, follows[i])
		width = max(width, len(follows[i]))
		var params []any
		ranged[i], params = bs[i].rangeSQL(r, len(args))
		args = append(args, params...)
	}
	batch.Queue(rangesSQL(ranged, tables, locks), args...).Query(func(rows pgx.Rows) error {
		return scanRanges(rows, &bs[0].tx.arena, rs, follows, width)
	})
}

// rangeSQL is the statement of LockRange r of b, with its parameters
// numbered from after+1, and their values.
func (b *bucket) rangeSQL(r *kv.Read, after int) (string, []any) {
	from := r.From
	if from == nil {
		from = []byte{}
	}
	stmt, args := b.sql.lockFrom, []any{from, r.N}
	if r.To != nil {
		stmt, args = b.sql.lockRange, []any{from, r.To, r.N}
	}
	return renumber(stmt, len(args), after), args
}

// renumber is stmt, whose parameters are $1 to $n, with them numbered
// from after+1.
func renumber(stmt string, n, after int) string {
	if after == 0 {
		return stmt
	}
	pairs := make([]string, 0, 2*n)
	for i := range n {
		pairs = append(pairs, "$"+strconv.Itoa(i+1), "$"+strconv.Itoa(after+i+1))
	}
	return strings.NewReplacer(pairs...).Replace(stmt)
}

// queueFollowFlushes queues the buffered writes of the buckets r follows
// into, and returns the indexes in r.Follow of those it reads: a bucket
// deleted in this transaction has no table, and nothing followed there is
// found.
func queueFollowFlushes(batch *pgx.Batch, r *kv.Read) []int {
	var follows []int
	for i, f := range r.Follow {
		if fb := f.Bucket.(*bucket); !fb.deleted {
			fb.queueFlush(batch)
			follows = append(follows, i)
		}
	}
	return follows
}

// followed returns the tables of the buckets of r.Follow listed in
// follows, and whether each is locked.
func followed(r *kv.Read, follows []int) (tables []string, locks []bool) {
	tables, locks = make([]string, len(follows)), make([]bool, len(follows))
	for j, i := range follows {
		tables[j], locks[j] = r.Follow[i].Bucket.(*bucket).sql.name, r.Follow[i].Lock
	}
	return tables, locks
}

// followSQL is statement ranged, which reads (k, v), with v followed into
// tables, FOR UPDATE where locks says so.
func followSQL(ranged string, tables []string, locks []bool) string {
	return "SELECT p.k, p.v" + followColumns(tables, locks) + " FROM (" + ranged + ") p ORDER BY p.k"
}

// rangesSQL is statements ranged, each read as followSQL reads it, as
// one statement: a UNION ALL whose rows start with their statement's
// place, one byte, and are padded with NULLs to the most tables followed.
func rangesSQL(ranged []string, tables [][]string, locks [][]bool) string {
	width := 0
	for _, t := range tables {
		width = max(width, len(t))
	}
	var sb strings.Builder
	for i, stmt := range ranged {
		if i > 0 {
			sb.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&sb, "SELECT '\\x%02x'::bytea, p.k, p.v", i)
		sb.WriteString(followColumns(tables[i], locks[i]))
		sb.WriteString(strings.Repeat(", NULL::bytea", width-len(tables[i])))
		sb.WriteString(" FROM (" + stmt + ") p")
	}
	sb.WriteString(" ORDER BY 1, 2")
	return sb.String()
}

// followColumns are the columns that follow a range's values p.v into
// tables, FOR UPDATE where locks says so: a scalar subquery each.
func followColumns(tables []string, locks []bool) string {
	var sb strings.Builder
	for i, table := range tables {
		sb.WriteString(", (SELECT v FROM " + table + " WHERE k = p.v")
		if locks[i] {
			sb.WriteString(" FOR UPDATE")
		}
		sb.WriteString(")")
	}
	return sb.String()
}

// scanRanges fills in the answers of ranges rs from rows: (k, v) and the
// values followed, width columns of them, after a column naming the range
// of each row where there are several. An answer is reset first, as a
// trip that finds a cached subtree stale builds its batch again.
func scanRanges(rows pgx.Rows, a *arena, rs []*kv.Read, follows [][]int, width int) error {
	for _, r := range rs {
		r.Found, r.Values = nil, nil
		clear(r.Followed)
	}
	tagged := 0
	if len(rs) > 1 {
		tagged = 1
	}
	for rows.Next() {
		row, err := scanValues(rows, a, tagged+2+width)
		if err != nil {
			return err
		}
		r, which := rs[0], 0
		if tagged == 1 {
			if len(row[0]) != 1 || int(row[0][0]) >= len(rs) {
				return fmt.Errorf("postgres: a row of %d ranges read as one is tagged %x", len(rs), row[0])
			}
			which = int(row[0][0])
			r, row = rs[which], row[1:]
		}
		r.Found, r.Values = append(r.Found, row[0]), append(r.Values, row[1])
		for j, i := range follows[which] {
			r.Followed[i] = append(r.Followed[i], row[2+j])
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range rs {
		for i := range r.Followed {
			if r.Followed[i] == nil {
				r.Followed[i] = make([][]byte, len(r.Found))
			}
		}
	}
	return nil
}

// scanValues reads a row of n bytea columns, copying into a (see scanRow);
// a NULL reads nil.
func scanValues(rows pgx.Rows, a *arena, n int) ([][]byte, error) {
	out := make([][]byte, n)
	raw := rows.RawValues()
	binary := len(raw) == n
	for _, f := range rows.FieldDescriptions() {
		binary = binary && f.Format == pgx.BinaryFormatCode
	}
	if !binary {
		dest := make([]any, n)
		for i := range out {
			dest[i] = &out[i]
		}
		return out, rows.Scan(dest...)
	}
	for i, v := range raw {
		if v != nil {
			out[i] = a.copy(v)
		}
	}
	return out, nil
}
