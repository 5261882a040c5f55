package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh/jsonl"
)

// skipShown bounds how many skipped lines are listed on stderr.
const skipShown = 10

type importOpts struct {
	mongo       bool
	asLog       bool
	skipInvalid bool
	invalidUTF8 string // error or binary (--invalid-utf8)
	onDuplicate string // fail, last or skip (--on-duplicate)
}

func (a *app) importCmd() *cobra.Command {
	var o importOpts
	cmd := &cobra.Command{
		Use:   "import COLL FILE|-",
		Short: "Load JSON lines (storh export or mongoexport output) into a collection",
		Long: `Import reads JSON lines from FILE (or stdin for -) into COLL, creating it (as
docs, or a log with --log) when it does not exist. Each line is one of
  {"id":"…","data":{…}}   the export form: the record keeps its id
  {"data":{…}}             a new id is generated
  {…}                      a bare object: the data, with a new id
Typed values use MongoDB Extended JSON wrappers ({"$date":…}, {"$binary":…},
{"$numberDouble":"NaN"}); docs/bulk-data.md has the full type mapping.

With --mongo the lines are mongoexport output (relaxed or canonical Extended
JSON): an ObjectID _id becomes the UUIDv7 derived from it (same creation
second; importing the same file again replaces the same records), and the
ObjectID is kept as the field _oid.

Rows are written in transactions of 5000 (fewer when they are large),
streaming: memory stays flat for any file size, but for the ids seen (20
bytes a row that has one, in ascending order). On a bad line the import
stops, names the line and why, and tells which lines are committed: the
batch holding the bad line is not written. With --skip-invalid bad lines are
listed and skipped instead. A key given twice and text that is not UTF-8 are
bad lines; --invalid-utf8=binary stores such a string as binary data.

An id given twice stops the import at the later line, naming both;
--on-duplicate=last writes the later row over the earlier one (docs only),
--on-duplicate=skip keeps the earlier one. An id already in the collection
is replaced in a docs collection (importing the same file again is safe)
and refused by a log. The summary counts the records written, new and
replaced, and the lines skipped.

When nothing is written, a collection (or a database file) the import
created is removed again. A progress bar shows on stderr when it is a
terminal (--quiet turns it off).`,
		Example: `  storh import events events.jsonl
  storh export events | storh import --db copy.db events -
  storh import --on-duplicate=last --skip-invalid pages pages.jsonl
  mongoexport --collection=users --out=users.json && storh import --mongo users users.json`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := keepInvalidUTF8(o.invalidUTF8); err != nil {
				return err
			}
			switch o.onDuplicate {
			case "fail", "last", "skip":
			default:
				return usagef("--on-duplicate %q: want fail (the default), last or skip", o.onDuplicate)
			}
			if a.url != "" {
				if err := o.overHTTP(); err != nil {
					return err
				}
			}
			return a.runImport(args[0], args[1], o)
		},
	}
	cmd.Flags().BoolVar(&o.mongo, "mongo", false, "read mongoexport output (Extended JSON; ObjectID _id → UUIDv7 id, kept as _oid)")
	cmd.Flags().BoolVar(&o.asLog, "log", false, "create the collection as an append-only log if it does not exist")
	cmd.Flags().BoolVar(&o.skipInvalid, "skip-invalid", false, "skip lines that cannot be imported, and list them, instead of stopping")
	addInvalidUTF8Flag(cmd, &o.invalidUTF8)
	cmd.Flags().StringVar(&o.onDuplicate, "on-duplicate", "fail", "a line whose id an earlier line of the import has: `fail` stops, naming both lines; last writes it over the earlier one (docs only); skip keeps the earlier one")
	return cmd
}

// importStats is the summary of an import (printed with --json).
type importStats struct {
	Collection string `json:"collection"`
	Kind       string `json:"kind"`
	Created    bool   `json:"created"`
	Source     string `json:"source"`
	Lines      int64  `json:"lines"`
	// Imported counts the records written: Inserted new ones, and Replaced
	// ones that replaced a record with the same id (stored before the
	// import, or, with --on-duplicate=last, written by an earlier line).
	Imported int64 `json:"imported"`
	Inserted int64 `json:"inserted"`
	Replaced int64 `json:"replaced"`
	// Skipped counts the lines not written: Invalid ones (--skip-invalid)
	// and, with --on-duplicate=skip, lines whose id an earlier line has.
	Skipped int64 `json:"skipped"`
	Invalid int64 `json:"invalid"`
	// Duplicates counts the lines whose id an earlier line has: skipped
	// (skip) or written over the earlier one (last).
	Duplicates int64 `json:"duplicates"`
	ForeignIDs int64 `json:"foreign_ids,omitempty"`
	// RemovedFile: the import created the database file and, having
	// imported nothing, removed it again.
	RemovedFile bool    `json:"removed_file,omitempty"`
	Seconds     float64 `json:"seconds"`
}

// overHTTP refuses, with --url, a flag the API's import endpoint cannot
// honour: it reads plain JSON lines (no Extended JSON of mongoexport, no
// binary for bad UTF-8) and stops at the first bad line or repeated id.
func (o importOpts) overHTTP() error {
	var flag string
	switch {
	case o.mongo:
		flag = "--mongo"
	case o.skipInvalid:
		flag = "--skip-invalid"
	case o.invalidUTF8 == "binary":
		flag = "--invalid-utf8=binary"
	case o.onDuplicate != "fail":
		flag = "--on-duplicate=" + o.onDuplicate
	default:
		return nil
	}
	return usagef("import %s works on a database file only, not over HTTP: the server's import endpoint reads plain JSON lines and stops at the first bad line or repeated id; drop %s, or pass --db PATH", flag, flag)
}

func (a *app) runImport(name, src string, o importOpts) error {
	in, size, closeIn, err := a.openInput(src)
	if err != nil {
		return err
	}
	defer closeIn()
	s, err := a.openStore(true)
	if err != nil {
		return err
	}
	defer s.close()
	st0, err := s.stats()
	if err != nil {
		s.discard(name, false)
		return err
	}
	kind, created, err := writerKind(st0, name, o.asLog)
	if err != nil {
		s.discard(name, false)
		return err
	}
	if kind == "log" && o.onDuplicate == "last" {
		s.discard(name, false)
		return usagef("--on-duplicate=last: %s is a log, whose records cannot be replaced; use fail or skip", qname(name))
	}
	im := &importer{a: a, o: o, src: src, created: created}
	prog := a.startProgress("importing", size, true)
	start := time.Now()
	rep, removedFile, err := s.importLines(a.ctx, name, kind, created, in, im, prog)
	prog.stop()
	im.rep = rep
	st := importStats{Collection: name, Kind: kind, Source: src, Seconds: time.Since(start).Seconds(),
		Lines: int64(rep.Lines), Imported: int64(rep.Imported), Inserted: int64(rep.Inserted), Replaced: int64(rep.Replaced),
		Skipped: int64(rep.Skipped), Invalid: int64(rep.Invalid), Duplicates: int64(rep.Duplicates), ForeignIDs: int64(rep.ForeignIDs)}
	if im.mongoLike {
		a.diag("storh: note: %s looks like mongoexport output (an ObjectID _id); import --mongo would make the ObjectIDs the record ids", src)
	}
	if err != nil {
		im.removedFile = removedFile
		return im.explain(err, name, kind)
	}
	st.Created = created
	st.RemovedFile = removedFile
	return a.importSummary(st)
}

// openInput opens FILE or stdin ("-") and returns its size (-1: unknown).
func (a *app) openInput(src string) (io.Reader, int64, func(), error) {
	if src == "-" {
		if isTerminal(a.stdin) {
			return nil, 0, nil, usagef("stdin is a terminal: pipe JSON lines in (… | storh import COLL -) or name a file")
		}
		return a.stdin, -1, func() {}, nil
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("cannot read %s: %w", src, errors.Unwrap(err))
	}
	size := int64(-1)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	return f, size, func() { f.Close() }, nil
}

func (a *app) importSummary(st importStats) error {
	if a.jsonOut {
		return a.printJSON(st)
	}
	rate := ""
	if st.Seconds > 0 && st.Imported > 0 {
		rate = fmt.Sprintf(", %s records/s", shortCount(float64(st.Imported)/st.Seconds))
	}
	into := qname(st.Collection)
	if st.Created {
		into = fmt.Sprintf("the new %s collection %s", st.Kind, qname(st.Collection))
	}
	a.diag("storh: imported %s into %s from %s in %s%s", plural(st.Imported, "record"), into, st.Source,
		time.Duration(st.Seconds*float64(time.Second)).Round(time.Millisecond), rate)
	if st.Replaced > 0 {
		a.diag("storh: %s", replacedNote(st))
	}
	if st.Invalid > 0 {
		a.diag("storh: skipped %s (--skip-invalid)", plural(st.Invalid, "invalid line"))
	}
	if st.Skipped > st.Invalid {
		a.diag("storh: skipped %s whose id an earlier line has (--on-duplicate=skip kept the earlier ones)", plural(st.Skipped-st.Invalid, "line"))
	}
	if st.RemovedFile {
		a.diag("storh: nothing was imported, so the database %s, created for the import, was removed again", a.dbPath)
	}
	if st.ForeignIDs > 0 {
		had := "documents had an _id that is not an ObjectID: it is kept as the field _id and the records got new ids"
		if st.ForeignIDs == 1 {
			had = "document had an _id that is not an ObjectID: it is kept as the field _id and the record got a new id"
		}
		a.diag("storh: %s %s, so importing them again adds copies", commas(st.ForeignIDs), had)
	}
	return nil
}

// replacedNote says how many of the records written replaced a record with
// the same id, and whose: stored before the import, or an earlier line's.
func replacedNote(st importStats) string {
	var fromFile int64
	if st.Skipped == st.Invalid { // not --on-duplicate=skip
		fromFile = st.Duplicates
	}
	before := st.Replaced - fromFile
	var whose []string
	if before > 0 {
		whose = append(whose, fmt.Sprintf("%s stored before the import", commas(before)))
	}
	if fromFile > 0 {
		whose = append(whose, fmt.Sprintf("%s written by an earlier line (--on-duplicate=last)", commas(fromFile)))
	}
	return fmt.Sprintf("%s new, %s replaced a record with the same id: %s", commas(st.Inserted), commas(st.Replaced), strings.Join(whose, ", "))
}

// importer runs one import through jsonl.Import: the options that give
// the command's flags, and the messages.
type importer struct {
	a       *app
	o       importOpts
	src     string
	rep     jsonl.ImportReport
	created bool // the import created the collection

	skipsShown  int
	mongoLike   bool // line 1 looks like mongoexport output (set by the reading goroutine)
	removedFile bool // the import created the database file, and removed it again
}

// options are the jsonl.Import options of the command's flags.
func (im *importer) options(prog *progress) []jsonl.ImportOption {
	opts := []jsonl.ImportOption{
		jsonl.OnSkip(im.listSkip),
		jsonl.WithLineFunc(im.checkLine),
		jsonl.WithProgress(1024, 100*time.Millisecond, func(p jsonl.Progress) {
			prog.records.Store(int64(p.Records))
			prog.bytes.Store(p.Bytes)
		}),
	}
	if im.o.mongo {
		opts = append(opts, jsonl.Mongo())
	}
	if im.o.skipInvalid {
		opts = append(opts, jsonl.SkipInvalid())
	}
	if keep, _ := keepInvalidUTF8(im.o.invalidUTF8); keep {
		opts = append(opts, jsonl.InvalidUTF8AsBinary())
	}
	switch im.o.onDuplicate {
	case "last":
		opts = append(opts, jsonl.OnDuplicate(jsonl.DuplicateLast))
	case "skip":
		opts = append(opts, jsonl.OnDuplicate(jsonl.DuplicateSkip))
	}
	return opts
}

// checkLine adds to a line the decoder refused what to do about it, and
// notes whether line 1 looks like mongoexport output.
func (im *importer) checkLine(line int, text []byte, row jsonl.Row, err error) (jsonl.Row, error) {
	if line == 1 {
		im.mongoLike = !im.o.mongo && looksLikeMongo(text)
	}
	if err != nil {
		err = importHint(text, err, im.o.mongo, im.src)
	}
	return row, err
}

// listSkip lists a skipped line, up to skipShown of them.
func (im *importer) listSkip(line int, err error) {
	if im.skipsShown < skipShown {
		var de *jsonl.DuplicateError
		if errors.As(err, &de) {
			err = fmt.Errorf("%w (--on-duplicate=skip keeps the earlier row)", de)
		}
		im.a.diag("storh: line %d skipped: %s", line, libMsg(err))
	} else if im.skipsShown == skipShown {
		im.a.diag("storh: (more skipped lines are counted, not listed)")
	}
	im.skipsShown++
}

// explain turns an import failure into a message that says what is
// committed and how to go on.
func (im *importer) explain(err error, name, kind string) error {
	var b strings.Builder
	src, imported, committedLine := im.src, im.rep.Imported, im.rep.CommittedLine
	var le *jsonl.LineError
	switch {
	case errors.As(err, &le):
		fmt.Fprintf(&b, "import %s stopped at %s line %d: %s", qname(name), src, le.Line, libMsg(le.Err))
	case im.a.ctx.Err() != nil && errors.Is(err, im.a.ctx.Err()):
		fmt.Fprintf(&b, "import %s interrupted", qname(name))
	default:
		fmt.Fprintf(&b, "import %s failed: %s", qname(name), libMsg(err))
	}
	if imported == 0 {
		b.WriteString("\n  nothing was written")
	} else {
		are := "are"
		if imported == 1 {
			are = "is"
		}
		fmt.Fprintf(&b, "\n  %s from lines 1-%d %s committed; nothing after line %d was written",
			plural(imported, "record"), committedLine, are, committedLine)
	}
	var de *jsonl.DuplicateError
	if im.a.url != "" && le != nil {
		// Over HTTP: all or nothing, and no --skip-invalid or --on-duplicate.
		b.WriteString("\n  fix the line and run the import again (over --url the import is all or nothing; --skip-invalid and --on-duplicate work on a database file only)")
	} else if errors.As(err, &de) {
		fmt.Fprintf(&b, "\n  choose the row to keep: --on-duplicate=last keeps line %d, --on-duplicate=skip keeps line %d", le.Line, de.First)
		if committedLine > 0 && src != "-" {
			fmt.Fprintf(&b, "\n  then import the rest: tail -n +%d %s | storh import --on-duplicate=last %s -", committedLine+1, shellQuote(src), shellQuote(name))
		}
	} else if le != nil && committedLine > 0 {
		next := committedLine + 1
		if src == "-" {
			fmt.Fprintf(&b, "\n  fix the line, then import the rest: lines %d on (or pass --skip-invalid)", next)
		} else {
			fmt.Fprintf(&b, "\n  fix the line, then import the rest: tail -n +%d %s | storh import %s - (or pass --skip-invalid)", next, src, name)
		}
	} else if le != nil {
		b.WriteString("\n  fix the line and run the import again, or pass --skip-invalid to skip bad lines")
	}
	if im.o.mongo && kind == "docs" && imported > 0 {
		b.WriteString("\n  (re-running the whole --mongo import is also safe: ObjectID ids replace the same records)")
	}
	if im.rep.Skipped > 0 {
		fmt.Fprintf(&b, "\n  %s lines were skipped before", commas(im.rep.Skipped))
	}
	switch {
	case im.removedFile:
		fmt.Fprintf(&b, "\n  (the database %s, created for the import, was removed again)", im.a.dbPath)
	case im.created && imported == 0:
		fmt.Fprintf(&b, "\n  (the collection %s, created for the import, was removed again)", qname(name))
	}
	return errors.New(b.String())
}

// addInvalidUTF8Flag adds --invalid-utf8, shared by put and import.
func addInvalidUTF8Flag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "invalid-utf8", "error", "a string value that is not valid UTF-8: `error` stops and names the line and byte offset; binary stores its bytes as binary data ({\"$binary\":…})")
}

// keepInvalidUTF8 reads the value of --invalid-utf8.
func keepInvalidUTF8(mode string) (bool, error) {
	switch mode {
	case "error":
		return false, nil
	case "binary":
		return true, nil
	}
	return false, usagef("--invalid-utf8 %q: want error (the default) or binary", mode)
}
