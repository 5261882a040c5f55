package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func (a *app) schemaCmd() *cobra.Command {
	cmd := groupCmd("schema", "Show, set and remove the JSON Schema of a collection",
		a.schemaGetCmd(), a.schemaSetCmd(), a.schemaRmCmd())
	cmd.Long = `A collection's JSON Schema (draft 2020-12) is checked by every write to it,
whoever writes: storh put, import, patch, the HTTP API and every program that
opens the database. A write that fails it stores nothing, and its error names
the failing value by JSON pointer and the rule it breaks: /age: minimum: got
-3, want 0. Set checks the records already there first and refuses, listing
the first 10 that fail, if any does. docs/schemas.md says how stored values
(times, ids, bytes, big integers) look to a schema.

get prints the schema, set gives a collection one from FILE (or stdin), rm
removes it. Docs collections and logs take schemas; queues do not.`
	cmd.Example = `  storh schema set users users.schema.json
  storh schema get users
  storh schema rm users`
	for _, sub := range cmd.Commands() {
		sub.ValidArgsFunction = a.completeColl(1)
	}
	return cmd
}

func (a *app) schemaGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get COLL",
		Short: "Print the JSON Schema of a collection",
		Long: `Get prints COLL's JSON Schema as it was set, on one line, or nothing (and a
note on stderr) when it has none. With --json it prints one object,
{"collection":…,"schema":… or null}.`,
		Example: `  storh schema get users > users.schema.json
  storh --json schema get users`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCollNames(args); err != nil {
				return err
			}
			st, cs, err := a.openStoreReader(args[0])
			if err != nil {
				return err
			}
			defer st.close()
			doc, err := st.schema(cs.Name)
			if err != nil {
				return err
			}
			if a.jsonOut {
				raw := json.RawMessage("null")
				if doc != nil {
					raw = doc
				}
				return a.printJSON(struct {
					Collection string          `json:"collection"`
					Schema     json.RawMessage `json:"schema"`
				}{cs.Name, raw})
			}
			if doc == nil {
				a.diag("storh: collection %s has no schema; 'storh schema set %s FILE' gives it one", qname(cs.Name), shellQuote(cs.Name))
				return nil
			}
			var line bytes.Buffer
			if err := json.Compact(&line, doc); err != nil {
				line.Reset()
				line.Write(doc)
			}
			line.WriteByte('\n')
			_, err = a.stdout.Write(line.Bytes())
			return err
		},
	}
}

func (a *app) schemaSetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "set COLL [FILE]",
		Short: "Give a collection a JSON Schema, checking its records first",
		Long: `Set gives COLL the JSON Schema in FILE, or on stdin when FILE is - or
left out. Every record of COLL is checked first: if any fails, nothing
changes and the error lists the first 10 that fail. A document that is not a
valid schema is refused. The collection must exist (a program gives a new one
its schema with storh.WithSchema).`,
		Example: `  storh schema set users users.schema.json
  echo '{"required":["email"]}' | storh schema set users`,
		Args: args(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCollNames(args[:1]); err != nil {
				return err
			}
			doc, err := a.readSchemaFile(args[1:])
			if err != nil {
				return err
			}
			if !json.Valid(doc) {
				return usagef("the schema is not JSON: give a JSON Schema document")
			}
			return a.changeSchema(args[0], doc)
		},
	}
}

func (a *app) schemaRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm COLL",
		Short:   "Remove the JSON Schema of a collection",
		Long:    `Rm removes COLL's JSON Schema: writes are no longer checked against it.`,
		Example: `  storh schema rm users`,
		Args:    args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCollNames(args); err != nil {
				return err
			}
			return a.changeSchema(args[0], nil)
		},
	}
}

// readSchemaFile reads the schema of storh schema set: the file named, or
// stdin for "-" or none.
func (a *app) readSchemaFile(names []string) ([]byte, error) {
	if len(names) == 0 || names[0] == "-" {
		return io.ReadAll(a.stdin)
	}
	doc, err := os.ReadFile(names[0])
	if err != nil {
		return nil, fmt.Errorf("reading the schema: %v", err)
	}
	return doc, nil
}

// changeSchema sets (doc) or removes (nil) the schema of an existing Docs
// collection or Log.
func (a *app) changeSchema(name string, doc []byte) error {
	st, found, err := a.openStoreExisting(true, name)
	if err != nil {
		return err
	}
	defer st.close()
	if err := readable(found[0]); err != nil {
		return err
	}
	if err := st.setSchema(name, doc); err != nil {
		return err
	}
	if a.jsonOut {
		raw := json.RawMessage("null")
		if doc != nil {
			raw = doc
		}
		var compact bytes.Buffer
		if json.Compact(&compact, raw) == nil {
			raw = compact.Bytes()
		}
		return a.printJSON(struct {
			Collection string          `json:"collection"`
			Schema     json.RawMessage `json:"schema"`
		}{name, raw})
	}
	if doc == nil {
		a.diag("storh: collection %s has no schema now", qname(name))
	} else {
		a.diag("storh: collection %s has the new schema (checked against %s)", qname(name), plural(int64(found[0].Records), "record"))
	}
	return nil
}
