package storh_test

import (
	"testing"

	"github.com/storhdb/storh-go/storh"
)

// benchSchema has ten rules over the fields of writeBenchRecord, every one
// of which a record is checked against.
var benchSchema = []byte(`{
	"type": "object",
	"required": ["user", "email", "age", "created"],
	"properties": {
		"user": {"type": "string", "pattern": "^user-[0-9]+$"},
		"email": {"type": "string", "maxLength": 64},
		"age": {"type": "integer", "minimum": 0, "maximum": 150},
		"score": {"type": "number"},
		"active": {"type": "boolean"},
		"country": {"enum": ["NL", "DE", "FR"]},
		"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
		"created": {"type": "string", "format": "date-time"}
	}
}`)

// BenchmarkSchemaWrite: what a schema adds to durable writes (fsync on,
// on the backend STORH_TEST_BACKEND names): a single Put and a PutMany of
// 1000 records, into a collection with the 10-rule schema above and into
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
			{"10rules", []storh.CollectionOption{storh.WithSchema(benchSchema)}},
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
