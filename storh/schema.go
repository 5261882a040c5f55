package storh

import (
	"bytes"

	"github.com/storhdb/storh-go/storh/engine"
)

// WithSchema gives a Docs or Log collection a JSON Schema (draft 2020-12
// unless its "$schema" names another draft) that every record written to
// it must pass: a write that fails it is ErrSchema and stores nothing.
// The schema is stored with the collection when its first write creates
// it, so it holds for every process and every later handle. Opening a
// collection that exists with another schema, or none, fails with
// ErrInvalidOption: SetSchema changes it, checking the records first. A
// document that is not a valid schema is ErrInvalidOption; so is
// WithSchema given to a queue. See docs/schemas.md for how stored values
// map to JSON.
func WithSchema(jsonSchema []byte) CollectionOption {
	return CollectionOption{func(c *collConfig) error {
		if _, err := engine.CompileSchema(jsonSchema); err != nil {
			return err
		}
		c.schema = bytes.Clone(jsonSchema)
		return nil
	}}
}

// SetSchema gives the collection a new JSON Schema, or with nil removes
// its schema. It first checks every record the collection holds against
// the new schema and, if any fails, changes nothing and returns ErrSchema
// listing the first 10 that fail. It holds the collection alone while it
// checks and stores: a write that commits after SetSchema returns was
// checked against the new schema, in this process and, on PostgreSQL, in
// every other. A missing collection is ErrNotFound, a queue and a
// document that is not a valid schema ErrInvalidOption.
func (db *DB) SetSchema(collection string, jsonSchema []byte) error {
	const op = "set schema"
	if err := db.eng.Enter(); err != nil {
		return opErr(op, collection, "", -1, err)
	}
	defer db.eng.Exit()
	if db.eng.Options().ReadOnly {
		return opErr(op, collection, "", -1, ErrReadOnly)
	}
	if jsonSchema != nil {
		jsonSchema = bytes.Clone(jsonSchema)
	}
	return opErr(op, collection, "", -1, db.eng.SetSchema(collection, jsonSchema))
}

// Schema returns the collection's JSON Schema as it was given, or nil
// when it has none. A missing collection is ErrNotFound.
func (db *DB) Schema(collection string) ([]byte, error) {
	const op = "schema"
	if err := db.eng.Enter(); err != nil {
		return nil, opErr(op, collection, "", -1, err)
	}
	defer db.eng.Exit()
	doc, err := db.eng.Schema(collection)
	if err != nil {
		return nil, opErr(op, collection, "", -1, err)
	}
	return doc, nil
}
