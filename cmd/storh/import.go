package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
)

// maxLine bounds one input line. A record is at most storh.MaxRecordSize
// encoded; its JSON (base64 bytes, escapes) can be larger.
const maxLine = 4*storh.MaxRecordSize + 1<<20

// chunkRows is how many decoded rows the reader hands over at once.
const chunkRows = 256

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

func (a *app) runImport(name, src string, o importOpts) error {
	im := &importer{}
	in, size, closeIn, err := a.openInput(src)
	if err != nil {
		return err
	}
	defer closeIn()
	db, err := a.open(true)
	if err != nil {
		return err
	}
	defer db.Close()
	w, kind, created, err := a.writer(db, name, o.asLog)
	if err != nil {
		a.removeIfNew(db)
		return err
	}
	if kind == "log" && o.onDuplicate == "last" {
		a.removeIfNew(db)
		return usagef("--on-duplicate=last: %s is a log, whose records cannot be replaced; use fail or skip", qname(name))
	}
	var before int64
	if !created {
		before = count(w)
	}
	im.created = created
	prog := a.startProgress("importing", size, true)
	im.a, im.o, im.w, im.prog, im.st = a, o, w, prog, importStats{Collection: name, Source: src, Kind: kind}
	start := time.Now()
	err = im.run(countingReader{in, prog})
	prog.stop()
	im.st.Seconds = time.Since(start).Seconds()
	// What was written, from the collection's counter (no scan): the
	// records it gained are new, the rest of the rows written replaced one.
	im.st.Inserted = min(im.st.Imported, max(0, count(w)-before))
	im.st.Replaced = im.st.Imported - im.st.Inserted
	im.st.Invalid = im.st.Skipped - im.st.Duplicates
	if im.o.onDuplicate == "last" {
		im.st.Duplicates = im.dupsWritten
	}
	if im.mongoLike {
		a.diag("storh: note: %s looks like mongoexport output (an ObjectID _id); import --mongo would make the ObjectIDs the record ids", src)
	}
	if err != nil {
		dropIfEmpty(db, name, created)
		im.removedFile = a.removeIfNew(db)
		return im.explain(err, src, name, kind)
	}
	im.st.Created = created
	if im.st.Imported == 0 {
		// Nothing valid: keep no empty collection, nor an empty new file.
		dropIfEmpty(db, name, created)
		im.st.RemovedFile = a.removeIfNew(db)
	}
	return a.importSummary(im.st)
}

// count is the number of records in w's collection, 0 when it has none
// or does not exist yet.
func count(w writer) int64 {
	n, err := w.Count()
	if err != nil {
		return 0
	}
	return int64(n)
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

// rowItem is one decoded input line.
type rowItem struct {
	line  int64
	entry storh.Entry
	err   error // the line cannot be imported
	fatal bool  // err is about the input stream, not this line: no skipping
	dupOf int64 // with --on-duplicate=last, the earlier line with the same id
}

// importer streams rows into a collection. A reader goroutine decodes lines
// while the caller's goroutine encodes and writes them, which keeps both
// cores busy.
//
// Rows are staged one transaction's worth (storh.StreamBatch) at a time and
// handed to the library only once all of them decoded and none repeats an
// id: a bad line stops the import before any row of its batch is written.
// A row the library refuses rolls its transaction back; the library also
// ends a transaction early when its records pass a few MiB, so each staged
// batch is one PutStream call, whose count says exactly which of its rows
// are committed.
type importer struct {
	a    *app
	o    importOpts
	w    writer
	prog *progress
	st   importStats

	rows chan []rowItem
	quit chan struct{}

	// ids holds the line of every id the import has staged, to find an id
	// given twice: memory grows with the rows that carry ids.
	ids idIndex

	committedLine int64 // every good line up to here is committed
	dupsWritten   int64 // committed rows that replaced an earlier line's (--on-duplicate=last)
	dupsHanded    int64 // such rows handed to the current PutStream call
	skipsShown    int
	skips         []skipNote // skipped lines of the batch being written, listed once it is done
	created       bool       // the import created the collection
	removedFile   bool       // the import created the database file, and removed it again
	mongoLike     bool       // set by the reader: line 1 looks like mongoexport output
}

// lineError is a bad line that stopped the import.
type lineError struct {
	line int64
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, libMsg(e.err)) }
func (e *lineError) Unwrap() error { return e.err }

// dupError is a line whose id an earlier line of the import has.
type dupError struct {
	id    string // as the input wrote it: the record id, or the _id with --mongo
	first int64  // the earlier line
}

func (e *dupError) Error() string {
	return fmt.Sprintf("%s is also on line %d: an import writes each id once", e.id, e.first)
}

var errInterrupted = errors.New("interrupted")

func (im *importer) run(in io.Reader) error {
	im.rows = make(chan []rowItem, 8)
	im.quit = make(chan struct{})
	decode := (*jsonl.Decoder).DecodeRow
	if im.o.mongo {
		decode = (*jsonl.Decoder).DecodeMongo
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		im.produce(in, decode)
	}()
	defer func() {
		close(im.quit)
		<-readerDone
	}()

	var (
		pending []rowItem // handed over by the reader, not yet staged
		replay  []rowItem // staged rows to write again after a skipped one
		eof     bool
		stopErr error // why staging stopped early (a bad line, an interrupt)
	)
	next := func() (rowItem, bool) {
		if len(replay) > 0 {
			it := replay[0]
			replay = replay[1:]
			return it, true
		}
		for len(pending) == 0 {
			if eof {
				return rowItem{}, false
			}
			select {
			case chunk, ok := <-im.rows:
				if !ok {
					eof = true
				}
				pending = chunk
			case <-im.a.ctx.Done():
				stopErr = errInterrupted
				return rowItem{}, false
			}
		}
		it := pending[0]
		pending = pending[1:]
		return it, true
	}
	staged := make([]rowItem, 0, storh.StreamBatch)
	handed := newHandedRing()
	for {
		// One PutStream call for the whole input (its batch buffers are
		// reused), until the library refuses a row and the rows after the
		// last commit are handed over again without it.
		handed.reset()
		var leftover []rowItem // staged rows the library stopped before taking
		seq := func(yield func(any) bool) {
			for {
				// Stage one transaction's worth before handing any of it over.
				staged = staged[:0]
				for len(staged) < storh.StreamBatch {
					it, ok := next()
					if !ok {
						break
					}
					if it.err != nil {
						if it.fatal || !im.o.skipInvalid {
							stopErr = &lineError{it.line, it.err}
							break
						}
						im.skip(it.line, it.err)
						continue
					}
					keep, err := im.checkID(&it)
					if err != nil {
						stopErr = err
						break
					}
					if keep {
						staged = append(staged, it)
					}
				}
				if stopErr != nil || len(staged) == 0 {
					return // nothing of this batch is handed over
				}
				for k, it := range staged {
					handed.push(it)
					if it.dupOf != 0 {
						im.dupsHanded++
					}
					if !yield(it.entry) {
						leftover = append(leftover, staged[k+1:]...)
						return
					}
				}
				im.prog.records.Add(int64(len(staged)))
				if len(staged) < storh.StreamBatch {
					return // the end of the input: PutStream commits this last batch
				}
				im.listSkips()
				if im.a.ctx.Err() != nil {
					stopErr = errInterrupted
					return
				}
			}
		}
		n, err := im.w.PutStream(seq)
		im.committed(handed, n)
		if err == nil {
			im.listSkips()
			return stopErr
		}
		// The library refused a row: the rows it had not committed are in
		// handed, after the first n.
		var e *storh.Error
		if !errors.As(err, &e) || e.Index < n || e.Index >= handed.n || !skippable(err) || !handed.has(n) {
			im.listSkips()
			return err
		}
		bad := handed.at(e.Index)
		if !bad.entry.ID.IsZero() {
			im.ids.remove(bad.entry.ID, bad.line) // never written: a later row may have the id
		}
		reason := e.Err
		if e.ID != "" {
			reason = fmt.Errorf("id %s: %s", e.ID, libMsg(e.Err))
		}
		if !im.o.skipInvalid {
			im.listSkips()
			return &lineError{bad.line, reason}
		}
		im.skip(bad.line, reason)
		again := make([]rowItem, 0, handed.n-n+len(leftover)+len(replay))
		for i := n; i < handed.n; i++ {
			if i != e.Index {
				again = append(again, handed.at(i))
			}
		}
		im.prog.records.Add(-int64(handed.n - n - len(staged) + len(leftover)))
		replay = append(append(again, leftover...), replay...)
	}
}

// handedRing keeps the rows handed to one PutStream call that the library
// may not have committed yet: it holds at most storh.StreamBatch rows
// uncommitted, so the last twice that many are enough.
type handedRing struct {
	rows []rowItem
	n    int // rows handed over in this call
}

func newHandedRing() *handedRing { return &handedRing{rows: make([]rowItem, 2*storh.StreamBatch)} }

func (r *handedRing) reset()          { clear(r.rows); r.n = 0 }
func (r *handedRing) push(it rowItem) { r.rows[r.n%len(r.rows)] = it; r.n++ }

// has reports whether row i of the call (and every one after it) is kept.
func (r *handedRing) has(i int) bool { return i >= 0 && i <= r.n && r.n-i <= len(r.rows) }

func (r *handedRing) at(i int) rowItem { return r.rows[i%len(r.rows)] }

// committed counts the rows the library committed: the first n handed over
// in this call.
func (im *importer) committed(handed *handedRing, n int) {
	n = max(n, 0)
	im.st.Imported += int64(n)
	if n > 0 && handed.has(n-1) {
		im.committedLine = handed.at(n - 1).line
	}
	// Rows that replaced an earlier line's (--on-duplicate=last): counted as
	// handed over, less those not committed.
	for i := max(0, handed.n-len(handed.rows)); i < handed.n; i++ {
		if it := handed.at(i); it.dupOf != 0 && i >= n {
			im.dupsHanded--
		}
	}
	im.dupsWritten += im.dupsHanded
	im.dupsHanded = 0
}

// checkID looks for the row's id among the ids the import has staged. A
// repeated id stops the import (--on-duplicate=fail), is skipped (skip), or
// is written after the earlier row, replacing it (last). keep is false for
// a skipped row.
func (im *importer) checkID(it *rowItem) (keep bool, err error) {
	id := it.entry.ID
	if id.IsZero() {
		return true, nil // a new id, made by the database
	}
	first, dup := im.ids.get(id)
	if !dup || first == it.line { // first == line: written again after a skipped row
		if !dup {
			im.ids.add(id, it.line)
		}
		it.dupOf = 0
		return true, nil
	}
	d := &dupError{id: "id " + id.String(), first: first}
	if oid, ok := it.entry.Data.(map[string]any)["_oid"].(string); ok && im.o.mongo {
		d.id = fmt.Sprintf("_id %s (record id %s)", oid, id)
	}
	switch im.o.onDuplicate {
	case "skip":
		im.st.Duplicates++
		im.skip(it.line, fmt.Errorf("%w (--on-duplicate=skip keeps the earlier row)", d))
		return false, nil
	case "last":
		it.dupOf = first
		return true, nil
	}
	return false, &lineError{it.line, d}
}

// skippable reports whether the library rejected the row itself (its data
// or id) rather than failed as a whole.
func skippable(err error) bool {
	return errors.Is(err, storh.ErrInvalidData) || errors.Is(err, storh.ErrInvalidID) || errors.Is(err, storh.ErrExists) ||
		errors.Is(err, storh.ErrUniqueViolation) // a value a unique index already holds
}

// skipNote is a skipped line waiting to be listed.
type skipNote struct {
	line int64
	err  error
}

// skip counts a skipped line. Lines the decoder rejects are found before
// the ones the database rejects in the same batch, so the notes are listed
// in line order once the batch is done (listSkips).
func (im *importer) skip(line int64, err error) {
	im.st.Skipped++
	im.skips = append(im.skips, skipNote{line, err})
}

func (im *importer) listSkips() {
	slices.SortFunc(im.skips, func(a, b skipNote) int { return cmp.Compare(a.line, b.line) })
	for _, s := range im.skips {
		if im.skipsShown < skipShown {
			im.a.diag("storh: line %d skipped: %s", s.line, libMsg(s.err))
		} else if im.skipsShown == skipShown {
			im.a.diag("storh: (more skipped lines are counted, not listed)")
		}
		im.skipsShown++
	}
	im.skips = im.skips[:0]
}

// produce reads and decodes lines, handing them over in chunks, until the
// input ends or quit closes.
func (im *importer) produce(in io.Reader, decode func(*jsonl.Decoder, []byte) (jsonl.Row, error)) {
	defer close(im.rows)
	lines := newLineReader(in)
	var dec jsonl.Decoder
	dec.KeepInvalidUTF8, _ = keepInvalidUTF8(im.o.invalidUTF8)
	chunk := make([]rowItem, 0, chunkRows)
	send := func() bool {
		select {
		case im.rows <- chunk:
			chunk = make([]rowItem, 0, chunkRows)
			return true
		case <-im.quit:
			return false
		}
	}
	for {
		b, lineNo, ok, tooLong, err := lines.next()
		if !ok {
			if err != io.EOF {
				chunk = append(chunk, rowItem{line: lineNo + 1, err: fmt.Errorf("reading the input: %w", err), fatal: true})
			}
			im.st.Lines = lineNo
			if len(chunk) > 0 {
				send()
			}
			return
		}
		if lineNo == 1 {
			im.mongoLike = !im.o.mongo && looksLikeMongo(b)
		}
		it := rowItem{line: lineNo}
		switch {
		case tooLong:
			it.err = fmt.Errorf("the line is longer than %s", humanBytes(maxLine))
		case len(bytes.TrimSpace(b)) == 0:
			continue // a blank line
		default:
			row, derr := decode(&dec, b)
			if derr != nil {
				it.err = importHint(b, derr, im.o.mongo, im.st.Source)
			} else {
				it.entry = storh.Entry{ID: row.ID, Data: row.Data}
				if row.ForeignID {
					im.st.ForeignIDs++ // read by the consumer only after the reader ends
				}
			}
		}
		chunk = append(chunk, it)
		if len(chunk) == chunkRows && !send() {
			return
		}
	}
}

// explain turns an import failure into a message that says what is
// committed and how to go on.
func (im *importer) explain(err error, src, name, kind string) error {
	var b strings.Builder
	var le *lineError
	switch {
	case errors.As(err, &le):
		fmt.Fprintf(&b, "import %s stopped at %s line %d: %s", qname(name), src, le.line, libMsg(le.err))
	case errors.Is(err, errInterrupted):
		fmt.Fprintf(&b, "import %s interrupted", qname(name))
	default:
		fmt.Fprintf(&b, "import %s failed: %s", qname(name), libMsg(err))
	}
	if im.st.Imported == 0 {
		b.WriteString("\n  nothing was written")
	} else {
		are := "are"
		if im.st.Imported == 1 {
			are = "is"
		}
		fmt.Fprintf(&b, "\n  %s from lines 1-%d %s committed; nothing after line %d was written",
			plural(im.st.Imported, "record"), im.committedLine, are, im.committedLine)
	}
	var de *dupError
	if errors.As(err, &de) {
		fmt.Fprintf(&b, "\n  choose the row to keep: --on-duplicate=last keeps line %d, --on-duplicate=skip keeps line %d", le.line, de.first)
		if im.committedLine > 0 && src != "-" {
			fmt.Fprintf(&b, "\n  then import the rest: tail -n +%d %s | storh import --on-duplicate=last %s -", im.committedLine+1, shellQuote(src), shellQuote(name))
		}
	} else if le != nil && im.committedLine > 0 {
		next := im.committedLine + 1
		if src == "-" {
			fmt.Fprintf(&b, "\n  fix the line, then import the rest: lines %d on (or pass --skip-invalid)", next)
		} else {
			fmt.Fprintf(&b, "\n  fix the line, then import the rest: tail -n +%d %s | storh import %s - (or pass --skip-invalid)", next, src, name)
		}
	} else if le != nil {
		b.WriteString("\n  fix the line and run the import again, or pass --skip-invalid to skip bad lines")
	}
	if im.o.mongo && kind == "docs" && im.st.Imported > 0 {
		b.WriteString("\n  (re-running the whole --mongo import is also safe: ObjectID ids replace the same records)")
	}
	if im.st.Skipped > 0 {
		fmt.Fprintf(&b, "\n  %s lines were skipped before", commas(im.st.Skipped))
	}
	switch {
	case im.removedFile:
		fmt.Fprintf(&b, "\n  (the database %s, created for the import, was removed again)", im.a.dbPath)
	case im.created && im.st.Imported == 0:
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
