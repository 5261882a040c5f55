package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/internal/linereader"
	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// maxPutLines bounds `put` from stdin, which writes in one transaction;
// import streams any amount.
const maxPutLines = 10000

func (a *app) putCmd() *cobra.Command {
	var idFlag, invalidUTF8 string
	var asLog bool
	cmd := &cobra.Command{
		Use:   "put COLL [JSON]",
		Short: "Store records: one JSON object, or JSON lines on stdin",
		Long: `Put stores the JSON object given as an argument, or each JSON object read from
stdin (one per line, all in one transaction: all or none), and prints the
stored records. A collection that does not exist is created: as docs, or as
an append-only log with --log. Values use the import type mapping, so
{"$date":"2024-05-01T12:00:00Z"} stores a time (see docs/bulk-data.md).

--id stores the record under that id: a docs collection replaces the record
there, a log refuses an id it already has. For more than a few thousand
records (at most 10,000) use 'storh import'.

A key given twice and text that is not UTF-8 are refused, naming the line
and place; --invalid-utf8=binary stores such a string as binary data
instead. If the put fails, nothing is stored, and a collection (or a
database file) the put created is removed again.`,
		Example: `  storh put pages '{"slug":"home","title":"Home"}'
  storh put events --log '{"level":"info","msg":"started"}'
  storh put pages --id 0190a4f4-5c3b-7def-8123-456789abcdef '{"slug":"home","title":"Welcome"}'
  printf '{"n":1}\n{"n":2}\n' | storh put numbers`,
		Args: args(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var id uuidv7.UUID
			if idFlag != "" {
				var err error
				if id, err = parseID("--id", idFlag); err != nil {
					return err
				}
			}
			keepBad, err := keepInvalidUTF8(invalidUTF8)
			if err != nil {
				return err
			}
			items, lines, err := a.putInput(args, keepBad)
			if err != nil {
				return err
			}
			if idFlag != "" && len(items) != 1 {
				return usagef("--id names one record, but stdin held %d", len(items))
			}
			s, err := a.openStore(true)
			if err != nil {
				return err
			}
			defer s.close()
			st, err := s.stats()
			if err != nil {
				s.discard(args[0], false)
				return err
			}
			kind, created, err := writerKind(st, args[0], asLog)
			if err != nil {
				s.discard(args[0], false)
				return err
			}
			var ids []uuidv7.UUID
			if idFlag != "" {
				ids = []uuidv7.UUID{id}
			}
			recs, err := s.put(args[0], kind, ids, items)
			if err != nil {
				s.discard(args[0], created)
				var e *storh.Error
				if len(lines) > 0 && errors.As(err, &e) && e.Index >= 0 && e.Index < len(lines) {
					return fmt.Errorf("stdin line %d: %s (nothing was stored)", lines[e.Index], libMsg(e.Err))
				}
				if len(lines) == 0 && errors.As(err, &e) && e.Index == 0 {
					// The one record of the argument: the batch and item
					// are the library's business.
					return fmt.Errorf("put %s: %s (nothing was stored)", qname(args[0]), libMsg(e.Err))
				}
				return err
			}
			if created {
				a.diag("storh: created %s collection %s in %s", kind, qname(args[0]), s.where())
			}
			p := a.newPrinter()
			for _, rec := range recs {
				if err := p.printLine(rec.Line); err != nil {
					return err
				}
			}
			return p.flush()
		},
	}
	cmd.Flags().StringVar(&idFlag, "id", "", "store under this `ID` (docs: replace; log: must be new)")
	cmd.Flags().BoolVar(&asLog, "log", false, "create the collection as an append-only log if it does not exist")
	addInvalidUTF8Flag(cmd, &invalidUTF8)
	return cmd
}

// putInput reads the records to put: the JSON argument, or stdin's lines
// (with their line numbers, for errors).
func (a *app) putInput(args []string, keepBad bool) ([]any, []int, error) {
	dec := jsonl.Decoder{KeepInvalidUTF8: keepBad}
	if len(args) == 2 {
		m, err := dec.DecodeObject([]byte(args[1]))
		if err != nil {
			return nil, nil, usagef("the JSON argument is not a JSON object: %s", libMsg(utf8Hint(err)))
		}
		return []any{m}, nil, nil
	}
	if isTerminal(a.stdin) {
		return nil, nil, usagef("missing JSON: pass an object, as in storh put %s '{\"a\":1}', or pipe JSON lines to stdin", args[0])
	}
	var items []any
	var lines []int
	in := linereader.New(a.stdin, jsonl.MaxLine)
	for {
		b, n, ok, tooLong, err := in.Next()
		if !ok {
			if err != io.EOF {
				return nil, nil, fmt.Errorf("reading stdin: %w", err)
			}
			break
		}
		line := bytes.TrimSpace(b)
		switch {
		case tooLong:
			return nil, nil, fmt.Errorf("stdin line %d is longer than %s, the most one record's JSON may take (nothing was stored)", n, humanBytes(jsonl.MaxLine))
		case len(line) == 0:
			continue
		case len(items) == maxPutLines:
			return nil, nil, fmt.Errorf("stdin has more than %d records: use 'storh import %s -' for bulk data", maxPutLines, args[0])
		}
		m, err := dec.DecodeObject(line)
		if err != nil {
			return nil, nil, fmt.Errorf("stdin line %d: %s (nothing was stored)", n, libMsg(utf8Hint(err)))
		}
		items = append(items, m)
		lines = append(lines, int(n))
	}
	if len(items) == 0 {
		return nil, nil, usagef("no JSON given: pass an object as an argument, or JSON lines on stdin")
	}
	return items, lines, nil
}

func (a *app) getCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get COLL ID",
		Short: "Print one record",
		Long: `Get prints the record of COLL with the id ID as one JSON line,
  {"id":"…","time":"…","data":{…}}
where time is the creation time the id carries (RFC 3339, UTC, milliseconds)
and data uses Extended JSON wrappers for the types JSON lacks ({"$date":…},
{"$binary":…}). The id may be in any case. A record that is not there exits
with 1 ("not found"); an id that is not a UUIDv7 is a usage error (2).`,
		Example: `  storh get pages 0190a4f4-5c3b-7def-8123-456789abcdef
  storh get users $(storh objectid to-uuid 5e0be232153bcf7c10df5e93)`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("id", args[1])
			if err != nil {
				return err
			}
			s, _, err := a.openStoreReader(args[0])
			if err != nil {
				return err
			}
			defer s.close()
			line, err := s.get(args[0], id)
			if err != nil {
				return err
			}
			p := a.newPrinter()
			if err := p.printLine(line); err != nil {
				return err
			}
			return p.flush()
		},
	}
}

func (a *app) deleteCmd() *cobra.Command {
	var f queryFlags
	cmd := &cobra.Command{
		Use:   "delete COLL [ID...]",
		Short: "Delete records from a docs collection: by id, or those --where selects",
		Long: `Delete removes the records with the given ids from a docs collection, in one
transaction. An id that is not there is not an error, as with the library's
Docs.Delete: the record is gone either way, so deleting twice is safe and a
retried script does not fail. The summary (and --json) counts the records
deleted and the ids that were not there; the exit code is 0 for both.

Without ids, it deletes the records that --where and the other selection
flags pick, exactly as 'storh query' with them would list them (indexes
make it a seek). A large deletion runs in transactions of a few thousand
records, each reading and deleting together; --limit (with --order: the
first N in that order) bounds it. The file does not shrink: later writes
reuse the freed pages, and 'storh compact' gives them back.

A record whose stored bytes are damaged can be deleted too. Logs are
append-only: their records cannot be deleted one by one ('storh retain'
trims a log by time). An id that is not a UUIDv7 is a usage error, and
nothing is deleted.`,
		Example: `  storh delete pages 0190a4f4-5c3b-7def-8123-456789abcdef
  storh delete pages 0190a4f4-5c3b-7def-8123-456789abcdef 0190a4f4-5c3b-7def-8123-456789abcdee
  storh --json delete pages 0190a4f4-5c3b-7def-8123-456789abcdef   # {"collection":"pages","deleted":1,"not_found":0}
  storh delete sessions --where 'expired=true'
  storh delete posts --where 'kind=draft' --until -720h`,
		Args: args(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if !f.selective() {
					return usagef("nothing to delete: give ids, or select records with --where (or --from, --until, --after, --before)")
				}
				return a.deleteMatching(args[0], &f)
			}
			if f.selective() || f.order != "" {
				return usagef("give either ids or selection flags (--where and the like), not both")
			}
			ids := make([]uuidv7.UUID, 0, len(args)-1)
			for _, s := range args[1:] {
				id, err := parseID("id", s)
				if err != nil {
					return err
				}
				if !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
			name := args[0]
			s, found, err := a.openStoreExisting(true, name)
			if err != nil {
				return err
			}
			defer s.close()
			switch found[0].Kind {
			case "log":
				return fmt.Errorf("collection %s is a log: its records are immutable and cannot be deleted", qname(name))
			case "queue":
				return fmt.Errorf("collection %s is a queue: use 'storh queue complete' or 'storh queue purge'", qname(name))
			}
			deleted, missing, err := s.deleteIDs(name, ids)
			if err != nil {
				if deleted > 0 && a.url != "" {
					a.diag("storh: deleted %s from %s before the error", plural(deleted, "record"), qname(name))
				}
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"collection": name, "deleted": deleted, "not_found": missing})
			}
			msg := fmt.Sprintf("storh: deleted %s from %s", plural(deleted, "record"), qname(name))
			switch {
			case missing == 1 && len(ids) == 1:
				msg += "; the id was not there"
			case missing == 1:
				msg += "; 1 id was not there"
			case missing > 1:
				msg += fmt.Sprintf("; %s ids were not there", commas(missing))
			}
			a.diag("%s", msg)
			return nil
		},
	}
	f.register(cmd.Flags(), false)
	return cmd
}

// deleteMatching deletes what the query flags select from the docs
// collection name.
func (a *app) deleteMatching(name string, f *queryFlags) error {
	if a.url != "" {
		return usagef("delete with --where and the other selection flags works on a database file only: over --url, give the ids to delete")
	}
	return a.runMatching(name, f, matching{
		refuse: func(kind string) error {
			switch kind {
			case "log":
				return fmt.Errorf("collection %s is a log: its records cannot be deleted by query; 'storh retain %s --before TIME' trims it by time", qname(name), shellQuote(name))
			case "queue":
				return fmt.Errorf("collection %s is a queue: use 'storh queue complete' or 'storh queue purge'", qname(name))
			}
			return nil
		},
		did: "deleted", prep: "from",
		run: func(d *storh.Docs, q query.Query) (int, error) { return d.DeleteMatchingContext(a.ctx, q) },
	})
}

// matching is what a command does to the records its query flags select
// (delete, patch).
type matching struct {
	refuse    func(kind string) error // why it cannot work on a collection of kind, or nil
	did, prep string                  // "deleted", "from": its report's words
	run       func(d *storh.Docs, q query.Query) (int, error)
}

// runMatching runs m on what the query flags select in the docs
// collection name, and reports how many records it changed (on stderr,
// or as JSON under --json), also when an error stopped it part way.
func (a *app) runMatching(name string, f *queryFlags, m matching) error {
	if err := checkCollNames([]string{name}); err != nil {
		return err
	}
	q, err := f.build(a.now())
	if err != nil {
		return err
	}
	db, found, err := a.openExisting(true, name)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := m.refuse(found[0].Kind); err != nil {
		return err
	}
	d, err := db.Docs(name)
	if err != nil {
		return err
	}
	n, err := m.run(d, q)
	if err != nil {
		if n > 0 {
			a.diag("storh: %s %s %s %s before the error", m.did, plural(n, "record"), m.prep, qname(name))
		}
		return f.runError(err, name)
	}
	if a.jsonOut {
		return a.printJSON(map[string]any{"collection": name, m.did: n})
	}
	a.diag("storh: %s %s %s %s", m.did, plural(n, "record"), m.prep, qname(name))
	return nil
}

func (a *app) retainCmd() *cobra.Command {
	var before string
	cmd := &cobra.Command{
		Use:   "retain LOG --before TIME",
		Short: "Trim a log: delete its records created before a time",
		Long: `Retain deletes the records of the log LOG created strictly before --before
(RFC 3339, Unix milliseconds, or relative to now: -720h is thirty days ago),
by the time their ids carry: a seek to the oldest record and a walk to the
cutoff, in transactions of a few thousand records. It prints how many it
deleted. Records at or after the cutoff are never touched. The file does not
shrink: later writes reuse the freed pages, and 'storh compact' gives them
back.`,
		Example: `  storh retain events --before -720h
  storh retain events --before 2024-01-01T00:00:00Z`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if before == "" {
				return usagef("--before is required: the time before which records go")
			}
			t, err := parseTime(before, a.now())
			if err != nil {
				return usagef("--before: %v", err)
			}
			name := args[0]
			if err := checkCollNames([]string{name}); err != nil {
				return err
			}
			db, found, err := a.openExisting(true, name)
			if err != nil {
				return err
			}
			defer db.Close()
			if found[0].Kind != "log" {
				return fmt.Errorf("collection %s is a %s, not a log: 'storh delete %s --until TIME' deletes by time", qname(name), found[0].Kind, shellQuote(name))
			}
			l, err := db.Log(name)
			if err != nil {
				return err
			}
			n, err := l.DeleteBeforeContext(a.ctx, t)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"collection": name, "deleted": n, "before": t.UTC().Format(jsonTime)})
			}
			fmt.Fprintf(a.stdout, "deleted %s created before %s\n", plural(n, "record"), t.UTC().Format(jsonTime))
			return nil
		},
	}
	cmd.Flags().StringVar(&before, "before", "", "delete records created before `TIME`")
	return cmd
}

func (a *app) countCmd() *cobra.Command {
	var f queryFlags
	cmd := &cobra.Command{
		Use:   "count COLL",
		Short: "Print the number of records, or of those --where and the other flags select",
		Long: `Count prints the number of records in COLL. Without selection flags it reads a
counter kept with the records and updated in the same transactions as the
writes, so it is exact and costs the same for ten records or a billion.

With --where, --after/--before or --from/--until it counts the records they
select (the flags of 'storh query'): from index keys alone, reading no
record, when an index decides every condition; otherwise by reading the
records in range. With --order, --after and --before count from a record's
place in that order (how many remain after a keyset page).

With --json it prints {"collection":…,"count":…,"kind":…}.`,
		Example: `  storh count events
  storh --json count pages
  storh count events --where 'level=error and status>=500'
  storh count events --from -1h --where level=error`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := f.build(a.now())
			if err != nil {
				return err
			}
			if !f.selective() && !f.requireIndex { // --order alone does not change a count
				s, found, err := a.openStoreExisting(false, args[0])
				if err != nil {
					return err
				}
				defer s.close()
				return a.printCount(found[0], int64(found[0].Records))
			}
			s, cs, err := a.openStoreReader(args[0])
			if err != nil {
				return err
			}
			defer s.close()
			n, err := s.countMatching(a.ctx, cs.Name, &f, q)
			if err != nil {
				return f.runError(err, cs.Name)
			}
			return a.printCount(cs, int64(n))
		},
	}
	f.register(cmd.Flags(), true)
	return cmd
}

func (a *app) printCount(cs storh.CollectionInfo, n int64) error {
	if a.jsonOut {
		return a.printJSON(map[string]any{"collection": cs.Name, "kind": cs.Kind, "count": n})
	}
	_, err := fmt.Fprintln(a.stdout, n)
	return err
}

func (a *app) dropCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "drop COLL...",
		Short: "Delete whole collections, records and all",
		Long: `Drop deletes each named collection with all its records, in one transaction
per collection. It cannot be undone, so it asks for --yes; without it, it only
says what would be deleted. The file does not shrink: the space is reused, or
reclaimed with 'storh compact'.`,
		Example: `  storh drop scratch --yes`,
		Args:    args(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, found, err := a.openExisting(yes, args...)
			if err != nil {
				return err
			}
			defer db.Close()
			var total int64
			for _, cs := range found {
				total += int64(cs.Records)
			}
			if !yes {
				return usagef("drop would delete %s with %s for good: add --yes to confirm", quoteArgs(args), plural(total, "record"))
			}
			for _, name := range args {
				if err := db.Drop(name); err != nil {
					return err
				}
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"dropped": args, "records": total})
			}
			a.diag("storh: dropped %s (%s)", quoteArgs(args), plural(total, "record"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "really delete")
	return cmd
}
