package postgres

import (
	"crypto/rand"
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/kv"
)

// BenchmarkPutFloor takes a single durable put apart on the server. Each
// variant is one implicit transaction: a bare INSERT of 200 bytes under a
// new 16-byte key (what hand-written pgx sends); the same INSERT with one
// of the statements a store's put adds to it (+marker: the commit marker;
// +add: the counter add; +hold: the hold of the collection, which checks
// the cached tree); "statements", all the store's statements for a put
// in one batch, sent by pgx directly; and "kv", the store's own put
// through kv (Insert and Add in a held bucket, then Commit), which adds
// the store's client work to the same statements. The variants take
// turns operation by operation, each round starting at the next one, so
// a busy machine and the rows they share slow them alike; each reports
// its time per operation (<variant>-ns/op) and over the bare INSERT's
// (<variant>/insert). The statements are the store's own (registrySQL,
// tableSQL, marksSQL), so the floor moves with them.
func BenchmarkPutFloor(b *testing.B) {
	s, err := Open(ctx, pgtest.URL(b))
	must(b, err)
	defer s.Close()
	tx := begin(b, s, true)
	c := create(b, tx, "c")
	create(b, c, "r")
	create(b, c, "m")
	commit(b, tx)

	value := make([]byte, 200)
	rand.Read(value)
	delta := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 1), uint64(len(value)))
	slot := []byte("slot")
	var seq uint64
	newKey := func() []byte {
		seq++
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano())), seq)
	}
	kvPut := func() {
		tx, err := s.Begin(true)
		must(b, err)
		c := tx.(kv.Locker).BucketShared([]byte("c"))
		if c == nil {
			b.Fatal(tx.Err())
		}
		must(b, c.Bucket([]byte("r")).(kv.Inserter).Insert(newKey(), value))
		must(b, c.Bucket([]byte("m")).(kv.Adder).Add(slot, delta))
		must(b, tx.Commit())
	}
	kvPut() // caches c's subtree, as a store's later puts find it

	tr, ok := s.trees.Load("c")
	if !ok {
		b.Fatal("c's subtree is not cached")
	}
	tree := tr.(*tree)
	var records, counters *tableSQL
	for _, r := range tree.rows {
		switch string(r.name) {
		case "r":
			records = s.table(r.id)
		case "m":
			counters = s.table(r.id)
		}
	}
	_, err = s.pool.Exec(ctx, "CREATE TABLE bare (k bytea PRIMARY KEY, v bytea)")
	must(b, err)

	insert := func(batch *pgx.Batch) { batch.Queue("INSERT INTO bare (k, v) VALUES ($1, $2)", newKey(), value) }
	marker := func(batch *pgx.Batch) { batch.Queue(s.marks.mark, newToken()) }
	add := func(batch *pgx.Batch) { batch.Queue(counters.add1[1], slot, delta) }
	hold := func(batch *pgx.Batch) {
		batch.Queue(s.reg.holdCheckedShared, []byte("c"), s.watchKey("c", 0), s.lockKey([]byte("c")), tree.id, tree.gen)
	}
	storeInsert := func(batch *pgx.Batch) { batch.Queue(records.ins1, newKey(), value) }
	variants := []struct {
		name  string
		steps []func(*pgx.Batch)
	}{
		{"insert", []func(*pgx.Batch){insert}},
		{"+marker", []func(*pgx.Batch){insert, marker}},
		{"+add", []func(*pgx.Batch){add, insert}},
		{"+hold", []func(*pgx.Batch){hold, insert}},
		{"statements", []func(*pgx.Batch){hold, add, storeInsert, marker}},
		{"kv", nil},
	}
	spent := make([]time.Duration, len(variants))
	for round := 0; b.Loop(); round++ {
		// Each round starts at the next variant: one that follows
		// another's writes to the same rows pays for them (a hot row's
		// chain of versions), and every variant takes each place alike.
		for j := range variants {
			i := (round + j) % len(variants)
			v := variants[i]
			start := time.Now()
			if v.steps == nil {
				kvPut()
			} else {
				batch := &pgx.Batch{}
				for _, step := range v.steps {
					step(batch)
				}
				// From the pool, as the store takes its connections.
				must(b, s.pool.SendBatch(ctx, batch).Close())
			}
			spent[i] += time.Since(start)
		}
	}
	for i, v := range variants {
		b.ReportMetric(float64(spent[i].Nanoseconds())/float64(b.N), v.name+"-ns/op")
		if i > 0 {
			b.ReportMetric(float64(spent[i])/float64(spent[0]), v.name+"/insert")
		}
	}
}
