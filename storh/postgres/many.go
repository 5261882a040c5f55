package postgres

import (
	"errors"
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
		if r.Op == kv.LockRange {
			r.Followed = make([][][]byte, len(r.Follow))
		} else {
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
		for i, r := range reads {
			if b := sent[i]; b != nil {
				b.queueFlush(batch)
				b.queueRead(batch, r)
			}
		}
	})
	if err != nil {
		for _, r := range reads {
			r.Found = nil
			if r.Op == kv.LockRange {
				r.Values = nil
				clear(r.Followed)
			} else {
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
	if r.Op == kv.LockRange {
		b.queueRange(batch, r)
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

// getKeysSQL is the statement of a Get of several keys of table q.
func getKeysSQL(q *tableSQL) string {
	return "SELECT k, v FROM " + q.name + " WHERE k = ANY($1::bytea[])"
}

// queueRange queues LockRange r of b, following its values into r.Follow
// in the same statement: a scalar subquery per bucket followed, which
// PostgreSQL runs for each row once the range has locked it, as an index
// lookup (a join of the tables may scan one whole).
func (b *bucket) queueRange(batch *pgx.Batch, r *kv.Read) {
	t := b.tx
	from := r.From
	if from == nil {
		from = []byte{}
	}
	stmt, args := b.sql.lockFrom, []any{from, r.N}
	if r.To != nil {
		stmt, args = b.sql.lockRange, []any{from, r.To, r.N}
	}
	// A bucket deleted in this transaction has no table: nothing followed
	// there is found.
	var follows []int
	for i, f := range r.Follow {
		if fb := f.Bucket.(*bucket); !fb.deleted {
			fb.queueFlush(batch)
			follows = append(follows, i)
		}
	}
	if len(r.Follow) > 0 {
		tables, locks := make([]string, len(follows)), make([]bool, len(follows))
		for j, i := range follows {
			tables[j], locks[j] = r.Follow[i].Bucket.(*bucket).sql.name, r.Follow[i].Lock
		}
		stmt = followSQL(stmt, tables, locks)
	}
	batch.Queue(stmt, args...).Query(func(rows pgx.Rows) error {
		r.Found, r.Values = nil, nil
		clear(r.Followed)
		for rows.Next() {
			row, err := scanValues(rows, &t.arena, 2+len(follows))
			if err != nil {
				return err
			}
			r.Found, r.Values = append(r.Found, row[0]), append(r.Values, row[1])
			for j, i := range follows {
				r.Followed[i] = append(r.Followed[i], row[2+j])
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range r.Followed {
			if r.Followed[i] == nil {
				r.Followed[i] = make([][]byte, len(r.Found))
			}
		}
		return nil
	})
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

// followSQL is statement ranged, which reads (k, v), with v followed into
// tables, FOR UPDATE where locks says so.
func followSQL(ranged string, tables []string, locks []bool) string {
	var sb strings.Builder
	sb.WriteString("SELECT p.k, p.v")
	for i, table := range tables {
		sb.WriteString(", (SELECT v FROM " + table + " WHERE k = p.v")
		if locks[i] {
			sb.WriteString(" FOR UPDATE")
		}
		sb.WriteString(")")
	}
	sb.WriteString(" FROM (" + ranged + ") p ORDER BY p.k")
	return sb.String()
}
