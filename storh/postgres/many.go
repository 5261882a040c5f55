package postgres

import (
	"errors"

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
		r.Found, r.Values = nil, nil
		if r.Op != kv.LockRange {
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
		r.Found, r.Values = nil, nil
		from := r.From
		if from == nil {
			from = []byte{}
		}
		scan := func(rows pgx.Rows) error {
			for rows.Next() {
				k, v, err := scanRow(rows, &t.arena, true)
				if err != nil {
					return err
				}
				r.Found, r.Values = append(r.Found, k), append(r.Values, v)
			}
			return rows.Err()
		}
		if r.To == nil {
			batch.Queue(b.sql.lockFrom, from, r.N).Query(scan)
		} else {
			batch.Queue(b.sql.lockRange, from, r.To, r.N).Query(scan)
		}
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
