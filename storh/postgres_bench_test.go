//go:build !storh_nopostgres

package storh_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// BenchmarkPostgresPage: a cursor page of 100 records on the PostgreSQL
// backend, against hand-written pgx code reading the same rows of the same
// table (the records table storh made) with the statement a user would
// write. Both copy the values out; neither decodes.
func BenchmarkPostgresPage(b *testing.B) {
	url := pgtest.URL(b)
	db, err := storh.Open(url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	docs, err := db.Docs("bench")
	if err != nil {
		b.Fatal(err)
	}
	const n = 10_000
	items := make([]any, 0, 1000)
	var ids []uuidv7.UUID
	for len(ids) < n {
		items = items[:0]
		for range 1000 {
			items = append(items, storh.Map{"user": "u", "score": len(ids), "note": "a small record of a few fields"})
		}
		recs, err := docs.PutMany(items)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
	}
	after := ids[n/2]
	b.Run("impl=storh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			page, err := docs.Find(query.All().After(after).Limit(100))
			if err != nil || len(page) != 100 {
				b.Fatalf("%d records, %v", len(page), err)
			}
		}
	})
	b.Run("impl=pgx", func(b *testing.B) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		// The records table: the one whose keys are the ids.
		var table string
		rows, _ := conn.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'storh_b%'")
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range names {
			var k []byte
			if conn.QueryRow(ctx, "SELECT k FROM "+pgx.Identifier{name}.Sanitize()+" WHERE k = $1", after[:]).Scan(&k) == nil {
				table = pgx.Identifier{name}.Sanitize()
			}
		}
		if table == "" {
			b.Fatal("no table holds the records")
		}
		stmt := "SELECT k, v FROM " + table + " WHERE k > $1 ORDER BY k LIMIT 100"
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
			if err != nil {
				b.Fatal(err)
			}
			rows, _ := tx.Query(ctx, stmt, after[:])
			got := 0
			for rows.Next() {
				var k, v []byte
				if err := rows.Scan(&k, &v); err != nil {
					b.Fatal(err)
				}
				got++
			}
			if rows.Err() != nil || got != 100 {
				b.Fatalf("%d rows, %v", got, rows.Err())
			}
			tx.Rollback(ctx)
		}
	})
}
