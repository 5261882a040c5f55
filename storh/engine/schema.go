package engine

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Schemas. A collection's JSON Schema lives in its metadata:
//
//	<collection>/
//	    "m"/
//	        "s"/   the schema: "json" → the schema document as given
//
// Every put validates the record against it (Tx.Put), whoever writes. The
// bucket is made afresh each time a schema is set, never written in place,
// so on a store whose buckets have an identity (kv.Identifier) the bucket's
// identity names the schema's version: a writer finds the compiled schema
// in the DB's cache by it without reading anything, and a writer in
// another process that took the collection's buckets from its cache before
// the change fails its transaction's check of them and runs again (see
// storh/postgres, holdCached). On a file the stored bytes are compared
// with the cached ones: a read of the memory map, no trip.
var (
	bucketSchema  = []byte("s")
	keySchemaJSON = []byte("json")
)

// schemaURL names the schema document inside its compiler: schemas are
// self-contained, and a $ref to anything else fails to compile.
const schemaURL = "storh:schema.json"

// maxSchemaViolations bounds the violations SetSchema lists.
const maxSchemaViolations = 10

// Schema is a compiled JSON Schema and the document it came from.
type Schema struct {
	raw      []byte
	compiled *jsonschema.Schema
	id       uint64 // the identity of the bucket it was read from; 0 on a file
}

// CompileSchema compiles a JSON Schema document (draft 2020-12 unless its
// $schema names another), with format assertions on. A document that is
// not JSON or not a valid schema is ErrInvalidOption.
func CompileSchema(doc []byte) (*Schema, error) {
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%w: the schema is not JSON: %v", errs.ErrInvalidOption, err)
	}
	if _, isObject := parsed.(map[string]any); !isObject {
		if _, isBool := parsed.(bool); !isBool {
			return nil, fmt.Errorf("%w: a schema is a JSON object (or true/false), not %s", errs.ErrInvalidOption, bytes.TrimSpace(doc))
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, parsed); err != nil {
		return nil, fmt.Errorf("%w: the schema: %v", errs.ErrInvalidOption, err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("%w: the schema does not compile: %v", errs.ErrInvalidOption, oneLine(err.Error()))
	}
	return &Schema{raw: bytes.Clone(doc), compiled: compiled}, nil
}

// noLoader refuses every document but the schema itself: a write must not
// wait for a file or a server, nor depend on one.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("a schema cannot refer to other documents (%s)", url)
}

// Raw returns the schema document as stored.
func (s *Schema) Raw() []byte { return s.raw }

// SameSchema reports whether two schema documents are the same JSON,
// whatever their spacing and key order.
func SameSchema(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// Check validates a record payload against the schema; a violation is
// ErrSchema naming the JSON pointer of each failing value and its rule.
func (s *Schema) Check(payload []byte) error { return s.checkIn(payload, nil) }

// checkIn is Check boxing the record's values in slab (mpack.Slab): a
// run of records validated one after another shares its allocations.
func (s *Schema) checkIn(payload []byte, slab *mpack.Slab) error {
	v, err := schemaValueIn(payload, slab)
	if err != nil {
		return fmt.Errorf("%w: %v", errs.ErrInvalidData, err)
	}
	err = s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%w: %v", errs.ErrSchema, err)
	}
	return fmt.Errorf("%w: %s", errs.ErrSchema, describeViolation(ve))
}

var english = message.NewPrinter(language.English)

// describeViolation names the values that failed and their rules, one
// "pointer: rule" per failing value, the innermost reasons only.
func describeViolation(ve *jsonschema.ValidationError) string {
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, pointer(e.InstanceLocation)+": "+e.ErrorKind.LocalizedString(english))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	const shown = 3
	if len(leaves) > shown {
		return strings.Join(leaves[:shown], "; ") + fmt.Sprintf("; and %d more", len(leaves)-shown)
	}
	return strings.Join(leaves, "; ")
}

// pointer writes a JSON pointer (RFC 6901); the record itself is "/"
// rather than the empty pointer, which a message could not show.
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// SchemaValue maps a record payload to the JSON value a schema validates
// (docs/schemas.md has the table): maps → objects, lists → arrays,
// integers → numbers kept exact (int64, uint64), floats → numbers, NaN
// and ±Inf → the strings "NaN", "Infinity", "-Infinity" (JSON has no
// number for them), times → RFC 3339 strings in UTC, UUIDs and ObjectIDs
// → their canonical text, bytes → standard base64. The strings are the
// text the JSON export (package jsonl) puts inside its wrappers.
func SchemaValue(payload []byte) (any, error) { return schemaValueIn(payload, nil) }

func schemaValueIn(payload []byte, slab *mpack.Slab) (any, error) {
	m, err := mpack.DecodeMapIn(payload, slab)
	if err != nil {
		return nil, err
	}
	return schemaForm(m), nil
}

// schemaForm maps a decoded value in place. Most values are JSON already,
// so a map's entry is written only when its value changes: a write costs a
// hash of the key each time.
func schemaForm(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !isJSONScalar(e) {
				x[k] = schemaForm(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = schemaForm(e)
		}
	case float64:
		switch {
		case math.IsNaN(x):
			return "NaN"
		case math.IsInf(x, 1):
			return "Infinity"
		case math.IsInf(x, -1):
			return "-Infinity"
		}
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case uuidv7.UUID:
		return x.String()
	case objectid.ObjectID:
		return x.Hex()
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	}
	return v
}

// isJSONScalar reports whether a decoded value is a JSON scalar already,
// which schemaForm would give back as it is.
func isJSONScalar(v any) bool {
	switch x := v.(type) {
	case nil, bool, int64, uint64, string:
		return true
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	}
	return false
}

// Prechecked is what validating records before their transaction found
// (DB.Precheck): the schema the DB had last compiled for their collection,
// and the first record that failed it. The validation is most of what a
// schema costs a write; done in the writers' goroutines it runs beside
// other writers and their commits, not one record after another in the
// group commit's one writer, holding the write lock. The transaction
// trusts the outcome only when that schema is the collection's at its
// commit, which the pointer tells (the DB compiles one *Schema per
// version; Tx.schema), and otherwise validates the record again: a write is
// always judged by the schema stored when it commits.
type Prechecked struct {
	schema *Schema // nil: nothing was checked
	failed int     // the first record that failed, or how many there were
	err    error   // why it failed
}

// verdict returns what the precheck found for record i against s; known
// is false when it did not check record i against s.
func (p *Prechecked) verdict(s *Schema, i int) (known bool, err error) {
	if p == nil || p.schema == nil || p.schema != s || i > p.failed {
		return false, nil
	}
	if i == p.failed {
		return true, p.err
	}
	return true, nil
}

// precheckChunk is the fewest records DB.Precheck gives a goroutine:
// below it, starting one costs about what it saves.
const precheckChunk = 64

// Precheck validates values (from AppendValue), to be put in the stored
// collection name, against the schema this DB last compiled for it, if
// any, for Tx.PutPrechecked. A large batch is split across GOMAXPROCS
// goroutines. A schema that has changed since costs the work twice (the
// transaction validates again); a collection without one costs a look-up.
func (db *DB) Precheck(name string, values [][]byte) Prechecked {
	got, ok := db.colls.schemas.Load(name)
	if !ok || len(values) == 0 {
		return Prechecked{}
	}
	s := got.(*Schema)
	workers := min(runtime.GOMAXPROCS(0), (len(values)+precheckChunk-1)/precheckChunk)
	if workers <= 1 {
		return s.precheck(values, &mpack.Slab{})
	}
	per := (len(values) + workers - 1) / workers
	found := make([]Prechecked, workers)
	var wg sync.WaitGroup
	for w := range workers {
		from, to := w*per, min(len(values), (w+1)*per)
		wg.Go(func() {
			found[w] = s.precheck(values[from:to], &mpack.Slab{})
			found[w].failed += from
		})
	}
	wg.Wait()
	for _, f := range found {
		if f.schema == nil {
			return Prechecked{}
		}
		if f.err != nil {
			return f
		}
	}
	return Prechecked{schema: s, failed: len(values)}
}

// PrecheckValue is Precheck of a single value.
func (db *DB) PrecheckValue(name string, value []byte) Prechecked {
	got, ok := db.colls.schemas.Load(name)
	if !ok {
		return Prechecked{}
	}
	return got.(*Schema).precheck([][]byte{value}, nil)
}

// precheck validates values one after another, up to the first that
// fails, boxing their values in slab (nil: each in its own, which suits a
// single value better than blocks sized for many). A panic of the
// validator leaves nothing checked: the transaction validates again,
// where a panic is contained and reported.
func (s *Schema) precheck(values [][]byte, slab *mpack.Slab) Prechecked {
	p := Prechecked{schema: s, failed: len(values)}
	_, panicked := contain(func() error {
		for i, v := range values {
			if err := s.checkIn(v[HeaderSize:], slab); err != nil {
				p.failed, p.err = i, err
				return nil
			}
		}
		return nil
	})
	if panicked {
		return Prechecked{}
	}
	return p
}

// schemaBucket returns the collection's schema bucket, or nil.
func (c *Coll) schemaBucket() kv.Bucket { return c.meta.Bucket(bucketSchema) }

// StoredSchema returns the collection's schema document, or nil.
func (c *Coll) StoredSchema() []byte {
	b := c.schemaBucket()
	if b == nil {
		return nil
	}
	return bytes.Clone(b.Get(keySchemaJSON))
}

// schema returns the collection's compiled schema, or nil: read once per
// transaction, compiled once per schema version and kept in the DB's
// cache.
func (t *Tx) schema(c *Coll) (*Schema, error) {
	if c.schemaRead {
		return c.schemaSet, nil
	}
	s, err := t.loadSchema(c)
	if err != nil {
		return nil, err
	}
	c.schemaSet, c.schemaRead = s, true
	return s, nil
}

func (t *Tx) loadSchema(c *Coll) (*Schema, error) {
	b := c.schemaBucket()
	if b == nil {
		return nil, t.failure() // a lookup that failed on the server reads as none
	}
	var cache *collections
	if t.db != nil {
		cache = &t.db.colls
	}
	ider, identified := b.(kv.Identifier)
	var id uint64
	if identified {
		id = ider.ID()
	}
	var raw []byte
	if cache != nil {
		if got, ok := cache.schemas.Load(c.Name); ok {
			s := got.(*Schema)
			if identified && s.id == id {
				return s, nil
			}
			if !identified {
				if raw = b.Get(keySchemaJSON); bytes.Equal(raw, s.raw) {
					return s, nil
				}
			}
		}
	}
	if raw == nil {
		raw = b.Get(keySchemaJSON)
	}
	if raw == nil {
		if err := t.failure(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: collection %q: its schema bucket holds no schema", errs.ErrCorrupt, c.Name)
	}
	s, err := CompileSchema(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: collection %q: its stored schema does not compile: %v", errs.ErrCorrupt, c.Name, err)
	}
	s.id = id
	if cache != nil {
		cache.schemas.Store(c.Name, s)
	}
	return s, nil
}

// checkSchema validates a payload about to be stored in c, record i of
// what pre checked (nil: nothing was), trusting pre when it checked it
// against c's schema as it is in this transaction.
func (t *Tx) checkSchema(c *Coll, payload []byte, pre *Prechecked, i int) error {
	s, err := t.schema(c)
	if err != nil || s == nil {
		return err
	}
	known, err := pre.verdict(s, i)
	if !known {
		err = s.Check(payload)
	} else if Invariants {
		if again := s.Check(payload); (again == nil) != (err == nil) {
			return fmt.Errorf("invariant: %q: a record's precheck said %v, its check %v", c.Name, err, again)
		}
	}
	if err != nil && c.remote && errors.Is(err, errs.ErrSchema) {
		// The schema may come from buckets a writer took from its
		// store's cache, which the transaction's first statement checks
		// (storh/postgres, holdCached); a write goes out with that
		// statement, and so fails if they changed, but a refusal sends
		// nothing. Reading the schema sends the check: if the buckets
		// changed, the transaction fails with a conflict and runs again
		// with the schema as it is.
		if b := c.schemaBucket(); b != nil {
			b.Get(keySchemaJSON)
		}
		if ferr := t.failure(); ferr != nil {
			return ferr
		}
	}
	return err
}

// SetSchema gives c the schema doc (nil removes it), after checking every
// record c holds against it: if any fails, nothing changes and the error,
// ErrSchema, lists the first maxSchemaViolations. It holds c alone, so no
// write beside it commits unchecked against the new schema. A queue takes
// no schema. Storing a schema raises the store's format to formatSchemas:
// a storh from before schemas would let violating writes in.
func (t *Tx) SetSchema(c *Coll, doc []byte) error {
	if !t.ktx.Writable() {
		return errs.ErrReadOnly
	}
	if c.Kind == KindQueue {
		return fmt.Errorf("%w: %q is a queue; only docs and logs take a schema", errs.ErrInvalidOption, c.Name)
	}
	t.holdAlone(c)
	var s *Schema
	if doc != nil {
		var err error
		if s, err = CompileSchema(doc); err != nil {
			return err
		}
		if err := t.checkExisting(c, s); err != nil {
			return err
		}
	}
	if c.schemaBucket() != nil {
		if err := c.meta.DeleteBucket(bucketSchema); err != nil {
			return mapStoreErr(err)
		}
	}
	c.schemaSet, c.schemaRead = nil, true
	if s == nil {
		return nil
	}
	return t.storeSchema(c, s)
}

// storeSchema writes s into c's metadata, which holds none.
func (t *Tx) storeSchema(c *Coll, s *Schema) error {
	b, err := c.meta.CreateBucket(bucketSchema)
	if err != nil {
		return mapStoreErr(err)
	}
	if err := b.Put(keySchemaJSON, s.raw); err != nil {
		return mapStoreErr(err)
	}
	if err := t.needFormat(formatSchemas); err != nil {
		return err
	}
	c.schemaSet, c.schemaRead = s, true
	// Cached now, the writes after this transaction are validated before
	// theirs (DB.Precheck) from the first. Should this one not commit, the
	// entry names a version that is not stored, and loadSchema replaces it.
	if ider, ok := b.(kv.Identifier); ok {
		s.id = ider.ID()
	}
	if t.db != nil {
		t.db.colls.schemas.Store(c.Name, s)
	}
	return nil
}

// checkExisting validates every record of c against s.
func (t *Tx) checkExisting(c *Coll, s *Schema) error {
	var found []string
	total := 0
	cur := c.records.Cursor()
	if ra, ok := cur.(kv.ReadAhead); ok {
		ra.ReadAhead(1000)
	}
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if v == nil {
			continue
		}
		payload, err := Payload(k, v)
		if err != nil {
			return err
		}
		err = s.Check(payload)
		if err == nil {
			continue
		}
		if !errors.Is(err, errs.ErrSchema) {
			return err
		}
		total++
		if len(found) < maxSchemaViolations {
			found = append(found, "record "+uuidv7.UUID(k).String()+": "+strings.TrimPrefix(err.Error(), errs.ErrSchema.Error()+": "))
		}
	}
	if err := t.failure(); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	more := ""
	if total > len(found) {
		more = fmt.Sprintf("; and %d more", total-len(found))
	}
	return fmt.Errorf("%w: %d of the records of %q fail the new schema, which is not set: %s%s",
		errs.ErrSchema, total, c.Name, strings.Join(found, "; "), more)
}

// SetSchema is Tx.SetSchema in a write transaction of its own, on the
// stored collection name. The caller must hold Enter.
func (db *DB) SetSchema(name string, doc []byte) error {
	return db.UpdateSafe(func(tx *Tx) error {
		c, err := tx.Coll(name, 0, false)
		if err != nil {
			return err
		}
		return tx.SetSchema(c, doc)
	})
}

// Schema returns the schema of the stored collection name, or nil. The
// caller must hold Enter.
func (db *DB) Schema(name string) ([]byte, error) {
	var doc []byte
	err := db.ViewSafe(func(tx *Tx) error {
		doc = nil
		c, err := tx.Coll(name, 0, false)
		if err != nil {
			return err
		}
		doc = c.StoredSchema()
		return tx.failure()
	})
	return doc, err
}

// CheckHandleSchema refuses a handle declaring a schema other than its
// stored collection's: a declared schema is given to a collection when
// its first write creates it; one that exists changes its schema by
// SetSchema alone, which checks its records first. The caller must hold
// Enter.
func (db *DB) CheckHandleSchema(h Handle) error {
	if h.Schema == nil {
		return nil
	}
	return db.ViewSafe(func(tx *Tx) error {
		c, err := tx.Use(h, false)
		if err != nil || c == nil {
			return err
		}
		return tx.CheckHandleSchema(c, h.Schema)
	})
}

// CheckHandleSchema is DB.CheckHandleSchema of c inside a transaction.
func (t *Tx) CheckHandleSchema(c *Coll, doc []byte) error {
	if doc == nil {
		return nil
	}
	stored := c.StoredSchema()
	if err := t.failure(); err != nil {
		return err
	}
	if stored != nil && SameSchema(stored, doc) {
		return nil
	}
	has := "no schema"
	if stored != nil {
		has = "the schema " + oneLine(string(stored))
	}
	return fmt.Errorf("%w: collection %q exists with %s, not the one WithSchema gives; change it with SetSchema (`storh schema set`), which checks its records first", errs.ErrInvalidOption, c.Name, has)
}
