package storh_test

import (
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// BenchmarkSchemaWrite: what a schema adds to durable writes (fsync on,
// on the backend STORH_TEST_BACKEND names): a single Put and a PutMany of
// 1000 records, into a collection with testkit.BenchSchema (10 rules) and into
// one without, in the same run.
func BenchmarkSchemaWrite(b *testing.B) {
	items := make([]any, 1000)
	for i := range items {
		items[i] = writeBenchRecord(i)
	}
	for _, op := range []struct {
		name  string
		write func(*storh.Docs) error
	}{
		{"put", func(d *storh.Docs) error { _, err := d.Put(items[7]); return err }},
		{"putmany1000", func(d *storh.Docs) error { _, err := d.PutMany(items); return err }},
	} {
		for _, sc := range []struct {
			name string
			opts []storh.CollectionOption
		}{
			{"none", nil},
			{"10rules", []storh.CollectionOption{storh.WithSchema(testkit.BenchSchema)}},
		} {
			// A store of its own for each: what one wrote before does not
			// weigh on the other's commits.
			b.Run("op="+op.name+"/schema="+sc.name, func(b *testing.B) {
				db, err := storh.Open(newPath(b))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				docs, err := db.Docs("w", sc.opts...)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := op.write(docs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
