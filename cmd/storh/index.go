package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
)

func (a *app) indexCmd() *cobra.Command {
	cmd := groupCmd("index", "List, create and drop the secondary indexes of a collection",
		a.indexListCmd(), a.indexCreateCmd(), a.indexDropCmd(), a.indexBuildCmd())
	cmd.Long = `A secondary index makes conditions and orders on its fields a seek instead of
a scan of the whole collection: --where level=error, --where 'n>=5',
--where 'tags contains go', --order -score --limit 10. It changes what a
query costs, never what it returns; 'storh explain' shows which index a query
reads. Indexes are kept in the same transactions as their records and stay
with the collection: every program that opens it uses and maintains them.

list shows a collection's indexes, create builds a new one over the records
there are (unique, compound), drop removes one, build finishes builds that
were interrupted.`
	cmd.Example = `  storh index list posts
  storh index create posts slug --unique
  storh index create posts kind,publishedAt
  storh index drop posts kind,publishedAt`
	for _, sub := range cmd.Commands() {
		sub.ValidArgsFunction = a.completeColl(1)
	}
	return cmd
}

type indexJSON struct {
	Name      string   `json:"name"`
	Paths     []string `json:"paths"`
	Unique    bool     `json:"unique"`
	Entries   int64    `json:"entries"`
	Building  bool     `json:"building"`
	Built     int64    `json:"built,omitempty"` // records indexed so far, while building
	Layout    string   `json:"layout,omitempty"`
	Journaled int64    `json:"journaled,omitempty"` // changes not folded into the blocks yet
}

func toIndexJSON(ix storh.IndexInfo) indexJSON {
	paths := make([]string, len(ix.Paths))
	for i, p := range ix.Paths {
		paths[i] = pathString(p)
	}
	return indexJSON{Name: ix.Name, Paths: paths, Unique: ix.Unique, Entries: int64(ix.Entries), Building: ix.Building, Built: int64(ix.Built),
		Layout: ix.Layout, Journaled: int64(ix.Journaled)}
}

func (a *app) indexListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list COLL",
		Short: "List the indexes of a collection: name, fields, unique, entries, state",
		Long: `List shows each index of COLL: its name, its field paths (several for a
compound index), whether it is unique, how many entries it holds (one per
record, plus one per distinct element of a list value in a single-field
index), its state: ready, or building while a build is unfinished (with
how many records it has indexed), and its layout: "blocks" with how many
changes its journal holds that are not folded into the blocks yet, or
"keys" (see docs/indexes.md). Queries do not use an index until it is
ready; 'storh index build COLL' (or any write to the collection) finishes an
interrupted build. With --json it prints one object,
{"collection":…,"indexes":[{"name","paths","unique","entries","building","layout","journaled"}]}.`,
		Example: `  storh index list posts
  storh --json index list posts`,
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
			infos, err := st.indexes(cs.Name)
			if err != nil {
				return err
			}
			if a.jsonOut {
				out := make([]indexJSON, len(infos))
				for i, ix := range infos {
					out[i] = toIndexJSON(ix)
				}
				return a.printJSON(struct {
					Collection string      `json:"collection"`
					Indexes    []indexJSON `json:"indexes"`
				}{cs.Name, out})
			}
			if len(infos) == 0 {
				a.diag("storh: collection %s has no indexes; 'storh index create %s FIELD' makes one", qname(cs.Name), shellQuote(cs.Name))
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPATHS\tUNIQUE\tENTRIES\tSTATE\tLAYOUT")
			for _, ix := range infos {
				j := toIndexJSON(ix)
				unique, state := "no", "ready"
				if ix.Unique {
					unique = "yes"
				}
				if ix.Building {
					state = fmt.Sprintf("building (%s of %s records)", commas(int64(ix.Built)), commas(int64(cs.Records)))
				}
				layout := ix.Layout
				if ix.Layout == "blocks" {
					layout = fmt.Sprintf("blocks (%s journaled)", commas(int64(ix.Journaled)))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ix.Name, strings.Join(j.Paths, ","), unique, commas(int64(ix.Entries)), state, layout)
			}
			return tw.Flush()
		},
	}
}

// parseIndexPaths reads the PATH[,PATH...] argument of index create: field
// paths in the --where syntax, separated by commas.
func parseIndexPaths(s string) ([][]string, error) {
	fields, err := query.ParseFields(s)
	if err != nil {
		return nil, flagError(fmt.Sprintf("fields %q", s), 0, err)
	}
	out := make([][]string, len(fields))
	for i, f := range fields {
		out[i], _ = f.Path()
	}
	return out, nil
}

func (a *app) indexCreateCmd() *cobra.Command {
	var unique bool
	var name string
	cmd := &cobra.Command{
		Use:   "create COLL PATH[,PATH...]",
		Short: "Create an index on one or more fields, building it over the records there are",
		Long: `Create adds an index on the field PATH of COLL (a dotted path into nested
objects, as in --where: author.name), or a compound index on several paths
separated by commas, ordered by the first, then the second, and so on. A
compound index serves equality on its leading paths, then a range or the
order on the next: kind,publishedAt serves
  --where kind=post --order -publishedAt.

It builds the index over the records already there, in transactions of
5,000 records, so other writers are held up only briefly; an interrupted
build is finished by 'storh index build'. It prints the time taken and the
number of entries (with --json, one JSON object); on a terminal a spinner
counts the entries while it builds.

--unique refuses a second record with the same value (the same tuple of
values, for a compound index); a missing field or null never conflicts.
Over records that already hold a value twice it fails, names the value and
the records, and creates nothing. --name names the index; by default the
name is the paths joined with commas (kind,publishedAt).

Creating an index that exists with the same definition does nothing;
with another definition it fails: drop it first.`,
		Example: `  storh index create posts slug --unique
  storh index create posts author.name
  storh index create posts kind,publishedAt --name kind_date
  storh index create users email --unique --name email_unique`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCollNames(args[:1]); err != nil {
				return err
			}
			paths, err := parseIndexPaths(args[1])
			if err != nil {
				return usageError{err}
			}
			fields := make([]query.FieldRef, len(paths))
			for i, p := range paths {
				fields[i] = query.FieldPath(p...)
			}
			spec := storh.IndexFields(fields...)
			if unique {
				spec = spec.Unique()
			}
			if cmd.Flags().Changed("name") {
				if name == "" {
					return usagef("--name: an index name cannot be empty; leave --name out for the default (the paths joined with commas)")
				}
				spec = spec.Named(name)
			}
			return a.createIndex(args[0], paths, spec, unique, name)
		},
	}
	cmd.Flags().BoolVar(&unique, "unique", false, "refuse two records with the same value")
	cmd.Flags().StringVar(&name, "name", "", "the index's `NAME` (default: the paths joined with commas)")
	return cmd
}

func (a *app) createIndex(coll string, paths [][]string, spec storh.IndexSpec, unique bool, name string) error {
	if name == "" {
		name = defaultIndexName(paths)
	}
	db, found, err := a.openExisting(true, coll)
	if err != nil {
		return err
	}
	defer db.Close()
	cs := found[0]
	open := func(opts ...storh.CollectionOption) (reader, error) {
		switch cs.Kind {
		case "docs":
			return db.Docs(coll, opts...)
		case "log":
			return db.Log(coll, opts...)
		}
		return nil, fmt.Errorf("collection %s is a %s: only docs and log collections have indexes", qname(coll), cs.Kind)
	}
	r, err := open()
	if err != nil {
		return err
	}
	before, err := r.Indexes()
	if err != nil {
		return err
	}
	want := toIndexJSON(storh.IndexInfo{Name: name, Paths: paths, Unique: unique})
	for _, ix := range before {
		if ix.Name != name {
			continue
		}
		have := toIndexJSON(ix)
		if slices.Equal(have.Paths, want.Paths) && have.Unique == want.Unique && !ix.Building {
			a.diag("storh: collection %s already has the index %s (%s%s, %s): nothing to do", qname(coll), qstr(name), strings.Join(have.Paths, ","), uniqueNote(ix.Unique), entries(ix.Entries))
			return a.printIndexCreated(coll, ix, 0, false)
		}
		if !ix.Building {
			return fmt.Errorf("collection %s already has an index %s (%s%s); to change it, drop it first: storh index drop %s %s",
				qname(coll), qstr(name), strings.Join(have.Paths, ","), uniqueNote(ix.Unique), shellQuote(coll), shellQuote(name))
		}
	}

	start := time.Now()
	stop := a.indexProgress(r, name)
	_, err = open(storh.WithIndex(spec))
	stop()
	took := time.Since(start)
	if err != nil {
		return a.indexCreateError(err, r, coll, name, paths, unique)
	}
	after, err := r.Indexes()
	if err != nil {
		return err
	}
	for _, ix := range after {
		if ix.Name == name {
			return a.printIndexCreated(coll, ix, took, true)
		}
	}
	return fmt.Errorf("index %s of %s was not found after creating it", qstr(name), qname(coll))
}

// defaultIndexName is the name the library gives an index on paths: the
// paths joined with commas, a segment with a dot, space, tab or quote in it
// quoted (Go syntax).
func defaultIndexName(paths [][]string) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		segs := slices.Clone(p)
		for j, seg := range segs {
			if seg == "" || strings.ContainsAny(seg, ". \t\"") {
				segs[j] = fmt.Sprintf("%q", seg)
			}
		}
		names[i] = strings.Join(segs, ".")
	}
	return strings.Join(names, ",")
}

// pathTexts writes paths as --where does.
func pathTexts(paths [][]string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = pathString(p)
	}
	return out
}

func uniqueNote(unique bool) string {
	if unique {
		return ", unique"
	}
	return ""
}

// qstr quotes an index name for messages.
func qstr(s string) string { return qname(s) }

func (a *app) printIndexCreated(coll string, ix storh.IndexInfo, took time.Duration, created bool) error {
	j := toIndexJSON(ix)
	if a.jsonOut {
		return a.printJSON(struct {
			Collection string `json:"collection"`
			indexJSON
			Created bool    `json:"created"`
			Seconds float64 `json:"seconds"`
		}{coll, j, created, took.Seconds()})
	}
	if created {
		a.diag("storh: created index %s on %s (%s%s): %s in %s", qstr(ix.Name), qname(coll), strings.Join(j.Paths, ","), uniqueNote(ix.Unique),
			entries(ix.Entries), took.Round(time.Millisecond))
	}
	return nil
}

// indexProgress shows the entries of the index being built on stderr while
// the build runs, when stderr is a terminal; the returned func stops it.
// It counts entries, with no total: a record of a list field makes
// several, so the share of the records done is unknown.
func (a *app) indexProgress(r reader, name string) func() {
	prog := a.startCounter("indexing:", entries)
	if prog.bar == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				infos, err := r.Indexes()
				if err != nil {
					continue
				}
				for _, ix := range infos {
					if ix.Name == name {
						prog.records.Store(int64(ix.Entries))
					}
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		prog.stop()
	}
}

// indexCreateError words a failed create: for a unique index over
// duplicates, the value and the records that hold it.
func (a *app) indexCreateError(err error, r reader, coll, name string, paths [][]string, unique bool) error {
	switch {
	case errors.Is(err, storh.ErrUniqueViolation):
		what := fmt.Sprintf("cannot create the unique index %s on %s (%s)", qstr(name), qname(coll), strings.Join(pathTexts(paths), ","))
		if dup := duplicates(err, r, paths); dup != "" {
			return fmt.Errorf("%s: %s; nothing was created (make those values differ, or create the index without --unique)", what, dup)
		}
		return fmt.Errorf("%s: %s; nothing was created", what, strings.TrimPrefix(libMsg(err), "docs "+qname(coll)+": "))
	case errors.Is(err, storh.ErrInvalidIndex):
		msg := libMsg(err)
		if i := strings.Index(msg, "invalid index: "); i >= 0 {
			msg = msg[i+len("invalid index: "):]
		}
		if i := strings.Index(msg, " (in Index("); i >= 0 {
			msg = msg[:i]
		}
		return usagef("cannot create the index %s on %s: %s", qstr(name), qname(coll), msg)
	}
	return err
}

// duplicates describes the records holding the value a unique violation
// names: the value and up to three ids, with how many there are. It
// returns "" when it cannot tell.
func duplicates(err error, r reader, paths [][]string) string {
	var uv *storh.UniqueViolation
	if !errors.As(err, &uv) {
		return ""
	}
	rec, gerr := r.Get(uv.Existing)
	if gerr != nil {
		return ""
	}
	data := rec.Data()
	q := query.All()
	var shown []string
	for _, segs := range paths {
		v, ok := lookupPath(data, segs)
		if !ok || v == nil {
			return ""
		}
		q = q.Where(query.FieldPath(segs...).Eq(v))
		shown = append(shown, query.FieldPath(segs...).Eq(v).String())
	}
	n, cerr := r.CountMatching(q)
	if cerr != nil || n < 2 {
		return ""
	}
	var ids []string
	for rec, err := range r.Stream(q.Limit(3)) {
		if err != nil {
			return ""
		}
		ids = append(ids, rec.ID.String())
	}
	list := strings.Join(ids, ", ")
	if n > len(ids) {
		list += fmt.Sprintf(" and %s more", commas(int64(n-len(ids))))
	}
	return fmt.Sprintf("%s records hold %s: %s", commas(int64(n)), strings.Join(shown, ", "), list)
}

// lookupPath walks nested maps.
func lookupPath(data map[string]any, path []string) (any, bool) {
	var cur any = data
	for _, seg := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func (a *app) indexDropCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "drop COLL NAME",
		Short: "Remove an index and its entries",
		Long: `Drop removes the index NAME of COLL and all its entries, in one transaction.
The records are untouched; queries that used the index read the records
instead (--require-index then fails for them). 'storh index list' shows the
names. With --json it prints {"collection":…,"dropped":…,"entries":…}.`,
		Example: `  storh index drop posts slug
  storh index drop posts kind,publishedAt`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCollNames(args[:1]); err != nil {
				return err
			}
			coll, name := args[0], args[1]
			db, found, err := a.openExisting(true, coll)
			if err != nil {
				return err
			}
			defer db.Close()
			var r reader
			switch found[0].Kind {
			case "docs":
				r, err = db.Docs(coll)
			case "log":
				r, err = db.Log(coll)
			default:
				return fmt.Errorf("collection %s is a %s: it has no indexes", qname(coll), found[0].Kind)
			}
			if err != nil {
				return err
			}
			infos, err := r.Indexes()
			if err != nil {
				return err
			}
			var n int64 = -1
			names := make([]string, 0, len(infos))
			for _, ix := range infos {
				names = append(names, ix.Name)
				if ix.Name == name {
					n = int64(ix.Entries)
				}
			}
			if n < 0 {
				have := "it has no indexes"
				if len(names) > 0 {
					quoted := make([]string, len(names))
					for i, n := range names {
						quoted[i] = qstr(n)
					}
					have = "it has " + strings.Join(quoted, ", ")
				}
				return fmt.Errorf("collection %s has no index %s (%s)", qname(coll), qstr(name), have)
			}
			if err := r.DropIndex(name); err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"collection": coll, "dropped": name, "entries": n})
			}
			a.diag("storh: dropped index %s of %s (%s)", qstr(name), qname(coll), entries(n))
			return nil
		},
	}
}

// entries counts index entries.
func entries[N ~int | ~int64](n N) string {
	if n == 1 {
		return "1 entry"
	}
	return commas(n) + " entries"
}

func (a *app) indexBuildCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "build COLL",
		Short: "Finish the index builds of a collection that were interrupted",
		Long: `Build finishes the indexes of COLL whose build was interrupted (the process
was killed or the machine stopped during 'storh index create', or a program
declaring an index). The build resumes where its last transaction ended.
Until it is finished the commands that only read (query, count, get, export,
index list) cannot open the collection, and say so; any write to the
collection finishes it too. Build with nothing to finish does nothing.`,
		Example: `  storh index build posts`,
		Args:    args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCollNames(args); err != nil {
				return err
			}
			coll := args[0]
			db, found, err := a.openExisting(true, coll)
			if err != nil {
				return err
			}
			defer db.Close()
			start := time.Now()
			var r reader
			switch found[0].Kind {
			case "docs":
				r, err = db.Docs(coll) // opening finishes the builds
			case "log":
				r, err = db.Log(coll)
			default:
				return fmt.Errorf("collection %s is a %s: it has no indexes", qname(coll), found[0].Kind)
			}
			if err != nil {
				return fmt.Errorf("finishing the index builds of %s: %s", qname(coll), strings.TrimPrefix(strings.TrimPrefix(libMsg(err), "docs "+qname(coll)+": "), "log "+qname(coll)+": "))
			}
			infos, err := r.Indexes()
			if err != nil {
				return err
			}
			if a.jsonOut {
				out := make([]indexJSON, len(infos))
				for i, ix := range infos {
					out[i] = toIndexJSON(ix)
				}
				return a.printJSON(struct {
					Collection string      `json:"collection"`
					Indexes    []indexJSON `json:"indexes"`
					Seconds    float64     `json:"seconds"`
				}{coll, out, time.Since(start).Seconds()})
			}
			names := make([]string, len(infos))
			for i, ix := range infos {
				names[i] = fmt.Sprintf("%s (%s)", qstr(ix.Name), entries(ix.Entries))
			}
			if len(names) == 0 {
				a.diag("storh: collection %s has no indexes", qname(coll))
				return nil
			}
			a.diag("storh: the indexes of %s are ready: %s (%s)", qname(coll), strings.Join(names, ", "), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}
