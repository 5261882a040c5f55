package storh

import (
	"context"
	"iter"

	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Collection is what *Docs and *Log have in common: the methods of code
// that works on either kind, such as an export, an import or an admin page.
// Writes keep their kind's meaning (a Docs PutWithID replaces, a Log one
// refuses an id it has); Delete is on *Docs only.
//
// It is for using collections, not for implementing them: a release may
// add methods to it that *Docs and *Log gain. A type of your own that must
// satisfy it (a test double, a wrapper) embeds a Collection and overrides
// the methods it changes, so it keeps compiling when one is added.
type Collection interface {
	Name() string
	Kind() string

	Put(data any) (Record, error)
	PutWithID(id uuidv7.UUID, data any) (Record, error)
	PutMany(items []any) ([]Record, error)
	PutStream(seq iter.Seq[any]) (int, error)
	PutStreamContext(ctx context.Context, seq iter.Seq[any]) (int, error)

	Get(id uuidv7.UUID) (Record, error)
	GetRaw(id uuidv7.UUID, fn func(raw []byte) error) error
	Stream(q query.Query) iter.Seq2[Record, error]
	StreamContext(ctx context.Context, q query.Query) iter.Seq2[Record, error]
	ScanRaw(q query.Query, fn func(id uuidv7.UUID, raw []byte) error) error
	ScanRawContext(ctx context.Context, q query.Query, fn func(id uuidv7.UUID, raw []byte) error) error
	Find(q query.Query) ([]Record, error)
	FindContext(ctx context.Context, q query.Query) ([]Record, error)
	First(q query.Query) (Record, error)
	FirstContext(ctx context.Context, q query.Query) (Record, error)
	CountMatching(q query.Query) (int, error)
	CountMatchingContext(ctx context.Context, q query.Query) (int, error)
	Explain(q query.Query) (Plan, error)
	ExplainContext(ctx context.Context, q query.Query) (Plan, error)
	Aggregate(q query.Query, groupBy []string, aggs ...query.Agg) ([]Group, error)
	AggregateContext(ctx context.Context, q query.Query, groupBy []string, aggs ...query.Agg) ([]Group, error)
	ExplainAggregate(q query.Query, groupBy []string, aggs ...query.Agg) (Plan, error)
	ExplainAggregateContext(ctx context.Context, q query.Query, groupBy []string, aggs ...query.Agg) (Plan, error)

	Watch(ctx context.Context, from uuidv7.UUID) iter.Seq2[Record, error]

	Count() (int, error)
	Stats() (CollectionInfo, error)
	Indexes() ([]IndexInfo, error)
	DropIndex(name string) error
}

var (
	_ Collection = (*Docs)(nil)
	_ Collection = (*Log)(nil)
)

// Collections lists the collections of the database, by name: each one's
// name, kind, record count, size and first and last ids (whose times are
// FirstTime and LastTime). It reads counters and the two ends of each
// collection, not its records. A collection exists once its first record
// is written.
func (db *DB) Collections() ([]CollectionInfo, error) {
	st, err := db.Stats()
	if err != nil {
		return nil, err
	}
	return st.Collections, nil
}
