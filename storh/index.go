package storh

import (
	"fmt"
	"strings"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/query"
)

// IndexSpec declares a secondary index: make one with Index, refine it with
// Unique and Named, and pass it to WithIndex when opening a collection.
type IndexSpec struct {
	spec engine.IndexSpec
	err  error
}

// Index declares an index on one or more fields, each a dotted path as
// query.Field takes it ("author.name" is the key "name" of the map under
// "author"). Several paths make a compound index, ordered by the first
// path, then the second, and so on: it serves equality on a leading run of
// its paths, then a range or an order on the next.
func Index(paths ...string) IndexSpec {
	s := IndexSpec{spec: engine.IndexSpec{Paths: make([][]string, len(paths))}}
	for i, p := range paths {
		s.spec.Paths[i] = strings.Split(p, ".")
	}
	return s
}

// IndexFields is Index for fields given as query.FieldRef values, such as
// query.FieldPath("a.b") for a top-level key that contains a dot.
func IndexFields(fields ...query.FieldRef) IndexSpec {
	s := IndexSpec{spec: engine.IndexSpec{Paths: make([][]string, len(fields))}}
	for i, f := range fields {
		p, err := f.Path()
		if err != nil && s.err == nil {
			s.err = fmt.Errorf("%w: %v", ErrInvalidIndex, strings.TrimPrefix(err.Error(), "storh: invalid query: "))
		}
		s.spec.Paths[i] = p
	}
	return s
}

// Unique makes the index refuse a second record with the same value (the
// same values, for a compound index): such a write fails with
// ErrUniqueViolation and stores nothing. A missing field or null never
// conflicts, as in SQL; values are typed (1 and "1" differ) and strings
// case-sensitive.
func (s IndexSpec) Unique() IndexSpec {
	s.spec.Unique = true
	return s
}

// Named names the index; by default its name is its paths joined with
// commas ("kind,publishedAt").
func (s IndexSpec) Named(name string) IndexSpec {
	s.spec.Name = name
	if name == "" {
		s.err = fmt.Errorf("%w: Named(\"\"): an index name cannot be empty", ErrInvalidIndex)
	}
	return s
}

// String describes the declaration.
func (s IndexSpec) String() string {
	names := make([]string, len(s.spec.Paths))
	for i, p := range s.spec.Paths {
		names[i] = plan.PathString(p)
	}
	out := "Index(" + strings.Join(names, ", ") + ")"
	if s.spec.Unique {
		out += ".Unique()"
	}
	if s.spec.Name != "" {
		out += fmt.Sprintf(".Named(%q)", s.spec.Name)
	}
	return out
}

// WithIndex declares an index on the collection. Definitions persist in the
// collection: reopening without the option keeps and uses the index (use
// DropIndex to remove it). Declaring a new index on a collection that holds
// records builds it before Docs or Log returns, in bounded transactions, so
// writers are never held up for long and the collection is consistent at
// every commit; a crash resumes the build at the next open. A unique index
// over data holding duplicates fails with ErrUniqueViolation and is not
// created. Declaring an index under an existing name with other paths or
// uniqueness fails with ErrInvalidIndex.
func WithIndex(s IndexSpec) CollectionOption {
	return CollectionOption{func(c *collConfig) error {
		if s.err != nil {
			return s.err
		}
		spec := s.spec
		spec.Paths = append([][]string(nil), spec.Paths...)
		if err := engine.ValidateIndexSpec(&spec); err != nil {
			return fmt.Errorf("%w (in %v)", err, s)
		}
		for _, prev := range c.indexes {
			if prev.Name == spec.Name {
				return fmt.Errorf("%w: two indexes named %q", ErrInvalidIndex, spec.Name)
			}
		}
		c.indexes = append(c.indexes, spec)
		return nil
	}}
}

// IndexInfo describes an index of a collection: its name, its field paths
// (each as its segments), whether it is unique, how many entries it holds
// (one per record, plus one per distinct element of a list value in a
// single-field index) and whether it is still being built (queries do not
// use it until it is complete).
//
// Layout is how the entries are stored: "blocks" (a database file's
// indexes: sorted blocks, and a journal of the changes since they were
// last folded into them, Journaled of them) or "keys" (a PostgreSQL
// store's, and a file's indexes made before blocks existed: a key per
// entry). docs/indexes.md has the details.
//
// FoldError is why the last fold of a blocked index in this process
// failed (nil when it did not): a fold moves journaled changes into the
// blocks after the commit that made them, so its failure fails no write.
// While it wraps ErrCorrupt the index's readers fail with it too, until a
// fold succeeds or Repair rebuilds the index; another failure (a full
// disk) leaves the index readable, and the fold is tried again after the
// next write.
type IndexInfo struct {
	Name      string
	Paths     [][]string
	Unique    bool
	Entries   int
	Building  bool
	Built     int // while Building: records indexed so far
	Layout    string
	Journaled int
	FoldError error
}

// Indexes lists the collection's indexes, by name.
func (c *coll) Indexes() ([]IndexInfo, error) {
	var out []IndexInfo
	err := c.read(func(_ *engine.Tx, ec *engine.Coll) error {
		out = out[:0]
		if ec == nil {
			for _, s := range c.h.Indexes {
				out = append(out, IndexInfo{Name: s.Name, Paths: s.Paths, Unique: s.Unique})
			}
			return nil
		}
		infos, err := ec.Indexes()
		for _, i := range infos {
			out = append(out, IndexInfo{Name: i.Name, Paths: i.Paths, Unique: i.Unique, Entries: i.Entries, Building: i.Building, Built: i.Built,
				Layout: i.Layout, Journaled: i.Journaled, FoldError: i.FoldError})
		}
		return err
	})
	return out, opErr(c.opName("indexes"), c.name, "", -1, err)
}

// DropIndex removes the index name and its entries, in one transaction. A
// name the collection has no index of is ErrNotFound.
func (c *coll) DropIndex(name string) error {
	op := c.opName("drop index")
	drop := func(etx *engine.Tx, ec *engine.Coll) error {
		if ec == nil {
			return fmt.Errorf("%w: collection %q has no index %q (it holds no records yet)", ErrNotFound, c.name, name)
		}
		return etx.DropIndex(ec, name)
	}
	var err error
	if c.tx != nil {
		if err = c.tx.usable(true); err == nil {
			err = c.inTx(false, drop)
		}
	} else if err = c.db.eng.Enter(); err == nil {
		defer c.db.eng.Exit()
		if c.db.eng.Options().ReadOnly {
			err = ErrReadOnly
		} else {
			err = c.db.eng.UpdateSafe(func(etx *engine.Tx) error {
				ec, err := etx.Use(c.h, false)
				if err != nil {
					return err
				}
				return drop(etx, ec)
			})
		}
	}
	return opErr(op, c.name, "", -1, err)
}
