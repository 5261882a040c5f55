package storh

import (
	"context"
	"fmt"
	"iter"
	"reflect"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Item is one record of a typed collection: its id and its data decoded
// into T.
type Item[T any] struct {
	ID    uuidv7.UUID
	Value T
}

// Time returns the creation time carried by the id.
func (it Item[T]) Time() time.Time { return it.ID.Time() }

// MarshalJSON writes the item as the JSON of the record it is stored as,
// {"id":"…","time":"…","data":{…}}: the same bytes as Record.MarshalJSON
// (and a line of storh/jsonl's Export), with T encoded as a write would
// store it.
func (it Item[T]) MarshalJSON() ([]byte, error) {
	tc, err := engine.NewTypedCodec[T]()
	if err != nil {
		return nil, opErr("marshal json", "", it.ID.String(), -1, err)
	}
	value, err := tc.AppendValue(nil, &it.Value)
	if err != nil {
		return nil, opErr("marshal json", "", it.ID.String(), -1, err)
	}
	return marshalRecordJSON(it.ID, value[engine.HeaderSize:])
}

// UnmarshalJSON reads what MarshalJSON (or Record.MarshalJSON) writes into
// the item: the id, and the data decoded into T as a read would (a value
// that does not fit T is ErrTypeMismatch). JSON null leaves it as it is.
func (it *Item[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	id, payload, err := unmarshalRecordJSON(b)
	if err != nil {
		return err
	}
	tc, err := engine.NewTypedCodec[T]()
	if err == nil {
		err = tc.Decode(payload, &it.Value)
	}
	if err != nil {
		return opErr("unmarshal json", "", id.String(), -1, err)
	}
	it.ID = id
	return nil
}

// Opener opens collections by name: a *DB, or a *Tx for handles bound to
// one transaction. DocsOf and LogOf take either.
type Opener interface {
	Docs(name string, opts ...CollectionOption) (*Docs, error)
	Log(name string, opts ...CollectionOption) (*Log, error)
}

var (
	_ Opener = (*DB)(nil)
	_ Opener = (*Tx)(nil)
)

// typed is what TypedDocs and TypedLog share: the untyped collection and
// T's codec, compiled once per type (shared by every handle of T).
type typed[T any] struct {
	c  *coll
	tc engine.TypedCodec[T]
}

// codecOf returns T's codec, refusing (once, at open) a T that cannot be a
// record: records are maps, so T is a struct, a pointer to one, or a map
// with string keys.
func codecOf[T any](op, name string) (engine.TypedCodec[T], error) {
	tc, err := engine.NewTypedCodec[T]()
	if err != nil {
		return tc, opErr(op, name, "", -1, fmt.Errorf("%w: a typed collection holds structs, pointers to structs or maps with string keys, not %s", ErrInvalidData, reflect.TypeFor[T]()))
	}
	return tc, nil
}

// DocsOf opens the document collection name, as o.Docs does (same options),
// as a collection of T: a struct, a pointer to a struct, or a map with
// string keys. docs/types.md says how each Go type is stored and decoded.
func DocsOf[T any](o Opener, name string, opts ...CollectionOption) (*TypedDocs[T], error) {
	tc, err := codecOf[T]("docs", name)
	if err != nil {
		return nil, err
	}
	d, err := o.Docs(name, opts...)
	if err != nil {
		return nil, err
	}
	return &TypedDocs[T]{typed[T]{&d.coll, tc}, d}, nil
}

// LogOf opens the log name, as o.Log does (same options), as a log of T.
// See DocsOf for what T may be.
func LogOf[T any](o Opener, name string, opts ...CollectionOption) (*TypedLog[T], error) {
	tc, err := codecOf[T]("log", name)
	if err != nil {
		return nil, err
	}
	l, err := o.Log(name, opts...)
	if err != nil {
		return nil, err
	}
	return &TypedLog[T]{typed[T]{&l.coll, tc}, l}, nil
}

// TypedDocs is a document collection whose records are values of T: the
// methods of Docs with T in and out. Records written through it are
// ordinary records: Docs handles on the same collection read them, and it
// reads what they write, as far as it fits T.
type TypedDocs[T any] struct {
	typed[T]
	d *Docs
}

// Untyped returns the collection as a *Docs, for what has no typed form
// (Stats, Indexes, DropIndex, Explain) and for code that takes a
// Collection.
func (t *TypedDocs[T]) Untyped() *Docs { return t.d }

// PutWithID stores v under id, replacing the record stored there, if any
// (see Docs.PutWithID).
func (t *TypedDocs[T]) PutWithID(id uuidv7.UUID, v T) (Item[T], error) {
	return t.putWithID(id, v)
}

// Delete removes the record id (see Docs.Delete).
func (t *TypedDocs[T]) Delete(id uuidv7.UUID) error { return t.d.Delete(id) }

// TypedLog is a log whose records are values of T: the methods of Log with
// T in and out (see TypedDocs).
type TypedLog[T any] struct {
	typed[T]
	l *Log
}

// Untyped returns the log as a *Log (see TypedDocs.Untyped).
func (t *TypedLog[T]) Untyped() *Log { return t.l }

// PutWithID appends v under id; an id already in the log is ErrExists (see
// Log.PutWithID).
func (t *TypedLog[T]) PutWithID(id uuidv7.UUID, v T) (Item[T], error) {
	return t.putWithID(id, v)
}

// Name returns the collection name.
func (t typed[T]) Name() string { return t.c.name }

// Put stores v under a new id and returns it as an Item whose Value is v
// (see Docs.Put). A v that cannot be stored is ErrInvalidData.
func (t typed[T]) Put(v T) (Item[T], error) {
	value, err := t.tc.AppendValue(nil, &v)
	if err != nil {
		return Item[T]{}, opErr(t.c.opName("put"), t.c.name, "", -1, err)
	}
	id := t.c.newID()
	if err := checkID(id, true); err != nil {
		return Item[T]{}, opErr(t.c.opName("put"), t.c.name, id.String(), -1, err)
	}
	if _, err := t.c.write("put", id, value); err != nil {
		return Item[T]{}, err
	}
	return Item[T]{ID: id, Value: v}, nil
}

func (t typed[T]) putWithID(id uuidv7.UUID, v T) (Item[T], error) {
	if err := checkID(id, false); err != nil {
		return Item[T]{}, opErr(t.c.opName("put"), t.c.name, id.String(), -1, err)
	}
	value, err := t.tc.AppendValue(nil, &v)
	if err != nil {
		return Item[T]{}, opErr(t.c.opName("put"), t.c.name, id.String(), -1, err)
	}
	if _, err := t.c.write("put", id, value); err != nil {
		return Item[T]{}, err
	}
	return Item[T]{ID: id, Value: v}, nil
}

// PutMany stores all values in one transaction, or none of them, and
// returns them as Items in input order (see Docs.PutMany).
func (t typed[T]) PutMany(values []T) ([]Item[T], error) {
	b, err := putMany(t.c, values, func(b *batch, v *T) error {
		return b.addWith(uuidv7.UUID{}, func(dst []byte) ([]byte, error) { return t.tc.AppendValue(dst, v) })
	})
	if err != nil {
		return nil, err
	}
	out := make([]Item[T], len(values))
	for i := range values {
		out[i] = Item[T]{ID: b.ids[i], Value: values[i]}
	}
	return out, nil
}

// PutItems is PutMany with ids: each item is stored under its ID, or under
// a new id when its ID is zero. It returns the items with their ids filled
// in.
func (t typed[T]) PutItems(items []Item[T]) ([]Item[T], error) {
	b, err := putMany(t.c, items, func(b *batch, it *Item[T]) error {
		return b.addWith(it.ID, func(dst []byte) ([]byte, error) { return t.tc.AppendValue(dst, &it.Value) })
	})
	if err != nil {
		return nil, err
	}
	out := make([]Item[T], len(items))
	for i := range items {
		out[i] = Item[T]{ID: b.ids[i], Value: items[i].Value}
	}
	return out, nil
}

// PutStream stores an unbounded sequence of values in transactions of
// StreamBatch records (see Docs.PutStream).
func (t typed[T]) PutStream(seq iter.Seq[T]) (int, error) {
	return t.PutStreamContext(context.Background(), seq)
}

// PutStreamContext is PutStream that stops when ctx is done (see
// Docs.PutStreamContext).
func (t typed[T]) PutStreamContext(ctx context.Context, seq iter.Seq[T]) (int, error) {
	return putStream(ctx, t.c, seq, func(b *batch, v T) error {
		return b.addWith(uuidv7.UUID{}, func(dst []byte) ([]byte, error) { return t.tc.AppendValue(dst, &v) })
	})
}

// Get returns the record id decoded into T. Besides Docs.Get's errors, a
// record that does not fit T is ErrTypeMismatch.
func (t typed[T]) Get(id uuidv7.UUID) (Item[T], error) {
	it := Item[T]{ID: id}
	err := t.c.get("get", id, func(p []byte) error { return t.tc.Decode(p, &it.Value) })
	if err != nil {
		return Item[T]{}, err
	}
	return it, nil
}

// Count returns the number of records (see Docs.Count).
func (t typed[T]) Count() (int, error) { return t.c.Count() }

// Stream returns the records q selects decoded into T, in the order of
// Docs.Stream. A record that does not fit T is an error (ErrTypeMismatch)
// that ends the stream, unless the query has ContinueOnError.
func (t typed[T]) Stream(q query.Query) iter.Seq2[Item[T], error] {
	return t.StreamContext(context.Background(), q)
}

// StreamContext is Stream that stops when ctx is done (see
// Docs.StreamContext).
func (t typed[T]) StreamContext(ctx context.Context, q query.Query) iter.Seq2[Item[T], error] {
	return func(yield func(Item[T], error) bool) {
		t.c.run(ctx, t.c.opName("stream"), q, false, nil, func(r Record) (bool, error) {
			it := Item[T]{ID: r.ID}
			if err := t.tc.Decode(r.payload, &it.Value); err != nil {
				return true, err
			}
			return yield(it, nil), nil
		}, func(err error) { yield(Item[T]{}, err) })
	}
}

// Find returns every record q selects decoded into T (see Docs.Find).
func (t typed[T]) Find(q query.Query) ([]Item[T], error) {
	return t.FindContext(context.Background(), q)
}

// FindContext is Find that stops when ctx is done.
func (t typed[T]) FindContext(ctx context.Context, q query.Query) ([]Item[T], error) {
	var out []Item[T]
	err := t.c.find(ctx, "find", q, func(r Record) error {
		out = append(out, Item[T]{ID: r.ID})
		if err := t.tc.Decode(r.payload, &out[len(out)-1].Value); err != nil {
			out = out[:len(out)-1]
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// First returns the first record q selects decoded into T, or ErrNotFound
// when none does.
func (t typed[T]) First(q query.Query) (Item[T], error) {
	return t.FirstContext(context.Background(), q)
}

// FirstContext is First that stops when ctx is done.
func (t typed[T]) FirstContext(ctx context.Context, q query.Query) (Item[T], error) {
	var it Item[T]
	err := t.c.first(ctx, q, func(r Record) error {
		it.ID = r.ID
		return t.tc.Decode(r.payload, &it.Value)
	})
	if err != nil {
		return Item[T]{}, err
	}
	return it, nil
}

// CountMatching counts the records Stream(q) would yield (see
// Docs.CountMatching); it decodes none.
func (t typed[T]) CountMatching(q query.Query) (int, error) { return t.c.CountMatching(q) }

// CountMatchingContext is CountMatching that stops when ctx is done.
func (t typed[T]) CountMatchingContext(ctx context.Context, q query.Query) (int, error) {
	return t.c.CountMatchingContext(ctx, q)
}
