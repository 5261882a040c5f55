package jsonl

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/storhdb/storh-go/internal/linereader"
	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/jsonv"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// MaxLine bounds one line of Import's input. A record is at most
// storh.MaxRecordSize encoded; its JSON (base64 bytes, escapes) can be
// larger. A longer line is an invalid line (ErrLineTooLong), and memory
// stays bounded whatever the input.
const MaxLine = 4*storh.MaxRecordSize + 1<<20

// ErrLineTooLong is the error of a line longer than MaxLine.
var ErrLineTooLong = fmt.Errorf("jsonl: the line is longer than %.1f MiB", float64(MaxLine)/(1<<20))

const (
	chunkRows       = 256 // decoded rows the reading goroutine hands over at once
	readBlock       = 64 << 10
	maxPendingSkips = 4096 // skipped lines held back to report them in line order
)

// Duplicates says what Import does with a line whose id an earlier line of
// the same import has.
type Duplicates int

const (
	// DuplicateFail stops the import at the later line (a *DuplicateError),
	// before anything of its batch is written. It is the default.
	DuplicateFail Duplicates = iota
	// DuplicateLast writes the rows in input order, so the later row
	// replaces the earlier one. A docs collection only: a log cannot
	// replace a record, and Import refuses the option for one.
	DuplicateLast
	// DuplicateSkip keeps the earlier row and skips the later ones (they are
	// counted in Skipped and passed to the OnSkip function).
	DuplicateSkip
)

func (d Duplicates) String() string {
	switch d {
	case DuplicateFail:
		return "fail"
	case DuplicateLast:
		return "last"
	case DuplicateSkip:
		return "skip"
	}
	return fmt.Sprintf("Duplicates(%d)", int(d))
}

type importConfig struct {
	mongo       bool
	dup         Duplicates
	skipInvalid bool
	onSkip      func(line int, err error)
	keepBad     bool
	lineFn      func(line int, text []byte, row Row, err error) (Row, error)
	progress    *progress
}

// Mongo reads the lines as mongoexport output (Decoder.DecodeMongo): an
// ObjectID _id becomes the record id (objectid.ObjectID.UUIDv7, so
// importing the same file again replaces the same records) and is kept as
// the field "_oid"; a document with another kind of _id gets a new id, and
// ForeignIDs counts them.
func Mongo() ImportOption { return importOption(func(c *importConfig) { c.mongo = true }) }

// OnDuplicate says what to do with a line whose id an earlier line of the
// import has (see Duplicates); the default is DuplicateFail. An id that is
// in the collection before the import is not a duplicate: a docs collection
// replaces the record, a log refuses the row.
func OnDuplicate(d Duplicates) ImportOption {
	return importOption(func(c *importConfig) { c.dup = d })
}

// SkipInvalid skips the lines that cannot be imported instead of stopping:
// lines that are not valid JSON or not a valid row, longer than MaxLine,
// and rows the collection refuses (storh.ErrInvalidData,
// storh.ErrInvalidID, storh.ErrExists, storh.ErrUniqueViolation,
// storh.ErrSchema: a row its JSON Schema refuses). A row
// the collection refuses rolls its transaction back; Import then writes
// the other rows of that transaction again, so every good row is written
// once, in input order. Skipped lines are counted in Invalid (and
// Skipped), and passed to the OnSkip function. Repeated ids are not
// invalid: OnDuplicate decides about them.
func SkipInvalid() ImportOption { return importOption(func(c *importConfig) { c.skipInvalid = true }) }

// OnSkip calls fn for each line Import skips (SkipInvalid, DuplicateSkip),
// with the line number (1-based, blank lines included) and why: the
// decoding *Error (or what the WithLineFunc function returned),
// ErrLineTooLong, a *DuplicateError, or the collection's error for the row.
// Lines are reported in line order, batch by batch, once the rows around
// them are written (when more than 4,096 skipped lines gather in one
// transaction's worth of rows, they are reported early, and a row the
// collection then refuses may come after later lines). fn runs on the
// goroutine that called Import.
func OnSkip(fn func(line int, err error)) ImportOption {
	return importOption(func(c *importConfig) { c.onSkip = fn })
}

// InvalidUTF8AsBinary stores a string value that is not valid UTF-8 as a
// []byte of its bytes (exported as {"$binary":…}) instead of refusing the
// line (Decoder.KeepInvalidUTF8).
func InvalidUTF8AsBinary() ImportOption {
	return importOption(func(c *importConfig) { c.keepBad = true })
}

// WithLineFunc calls fn for each line with what was decoded from it, or
// why it was not, before Import does anything else with it; what fn
// returns takes their place. fn may change the row (add or drop fields,
// set the id), reject the line with an error of its own, or return a more
// helpful error (one that says what the file looks like), and ForeignID
// may be set. line is the 1-based line number; text is the line without
// its line end, valid only during the call. Blank lines and lines longer
// than MaxLine are not passed.
//
// fn runs on Import's reading goroutine, which decodes ahead of the writes:
// one line at a time, never after Import returns.
func WithLineFunc(fn func(line int, text []byte, row Row, err error) (Row, error)) ImportOption {
	return importOption(func(c *importConfig) { c.lineFn = fn })
}

// ImportReport counts what Import did. The counts are exact when Import
// fails too, except Inserted and Replaced while other writers change the
// collection during the import (they come from its record count before and
// after).
type ImportReport struct {
	// Lines counts the input lines Import went through, blank ones
	// included: all of them, unless it stopped early.
	Lines int
	// Imported counts the records written (committed): Inserted new ones,
	// and Replaced ones that replaced a record with the same id, stored
	// before the import or, with DuplicateLast, written by an earlier line.
	Imported, Inserted, Replaced int
	// Skipped counts the lines not written: Invalid ones (SkipInvalid) and,
	// with DuplicateSkip, lines whose id an earlier line has.
	Skipped, Invalid int
	// Duplicates counts the lines whose id an earlier line has: skipped
	// (DuplicateSkip), or committed over the earlier row (DuplicateLast).
	Duplicates int
	// ForeignIDs counts, with Mongo, the documents whose _id is not an
	// ObjectID: they got new ids, so importing them again adds copies.
	ForeignIDs int
	// CommittedLine is the last line whose row is committed: every good
	// line up to it is. 0 when nothing is committed.
	CommittedLine int
}

// LineError is the error of a line that stopped Import. Err is the
// decoding *Error (or what the WithLineFunc function returned),
// ErrLineTooLong, a *DuplicateError, or the collection's error for the row
// (it wraps storh.ErrInvalidData, storh.ErrExists, …).
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// DuplicateError is a line whose id an earlier line of the import has
// (see Duplicates). It comes inside a *LineError, or to the OnSkip
// function.
type DuplicateError struct {
	ID    uuidv7.UUID
	OID   string // with Mongo, the ObjectID _id (hex) that ID comes from
	First int    // the earlier line
}

func (e *DuplicateError) Error() string {
	id := "id " + e.ID.String()
	if e.OID != "" {
		id = fmt.Sprintf("_id %s (record id %s)", e.OID, e.ID)
	}
	return fmt.Sprintf("%s is also on line %d: an import writes each id once", id, e.First)
}

// idError is a row the collection refused, named by its id.
type idError struct {
	id  string
	err error
}

func (e *idError) Error() string {
	return "id " + e.id + ": " + strings.TrimPrefix(e.err.Error(), "storh: ")
}
func (e *idError) Unwrap() error { return e.err }

// Import reads JSON lines from r into c. A line is {"id":"…","data":{…}}
// (with "time" or not: the record keeps its id; a docs collection replaces
// a record it has, a log refuses it), {"data":{…}} or a bare object (a new
// id); with Mongo it is mongoexport output. Blank lines are skipped, and a
// byte order mark before the first line.
//
// Rows are written in transactions of storh.StreamBatch (fewer when they
// are large), through c.PutStreamContext, and streaming: memory stays flat
// for any input, but for the ids seen (about 20 bytes a row that has one,
// in ascending order; 60 out of order), kept to find an id given twice.
// One goroutine reads and decodes lines while the calling one writes.
//
// A transaction's worth of rows is handed to c only once all of them are
// decoded and none repeats an id, so a bad line stops the import before
// any row of its batch is written: the error is a *LineError, and
// everything before the batch is committed (ImportReport.CommittedLine). A
// row c refuses rolls its transaction back; when large rows made the batch
// two transactions, the first may be committed, and CommittedLine says so.
// SkipInvalid skips bad lines instead; OnDuplicate decides about ids given
// twice.
//
// Import stops when ctx is done, checked before each line and (by
// PutStreamContext) before each row it writes, with an error wrapping
// ctx.Err(): the batches committed before stay, the one in progress is
// dropped, and the report counts what is committed. It then returns
// without waiting for a Read of r that blocks (a pipe with no data); that
// Read is the last one Import makes.
func Import(ctx context.Context, r io.Reader, c storh.Collection, opts ...ImportOption) (ImportReport, error) {
	var cfg importConfig
	for _, o := range opts {
		o.applyImport(&cfg)
	}
	switch {
	case cfg.dup < DuplicateFail || cfg.dup > DuplicateSkip:
		return ImportReport{}, fmt.Errorf("jsonl: import: %v is not a Duplicates value", cfg.dup)
	case cfg.dup == DuplicateLast && c.Kind() == "log":
		return ImportReport{}, fmt.Errorf("jsonl: import: DuplicateLast: %q is a log, whose records cannot be replaced; use DuplicateFail or DuplicateSkip", c.Name())
	}
	before := count(c)
	im := &importer{cfg: cfg, c: c, totalLines: -1}
	err := im.run(ctx, r)
	rep := im.rep
	rep.Lines = im.lastLine
	if err == nil && im.totalLines >= 0 {
		rep.Lines = im.totalLines
	}
	rep.ForeignIDs = im.foreign
	// What was written, from the collection's counter (no scan): the
	// records it gained are new, the rest of the rows written replaced one.
	rep.Inserted = min(rep.Imported, max(0, count(c)-before))
	rep.Replaced = rep.Imported - rep.Inserted
	rep.Invalid = rep.Skipped - rep.Duplicates
	if cfg.dup == DuplicateLast {
		rep.Duplicates = im.dupsWritten
	}
	cfg.progress.call(im.records, im.bytes.Load())
	return rep, err
}

// count is the number of records in c, 0 when it has none or does not
// exist yet.
func count(c storh.Collection) int {
	n, err := c.Count()
	if err != nil {
		return 0
	}
	return n
}

// rowItem is one decoded input line.
type rowItem struct {
	line  int
	entry storh.Entry
	err   error // the line cannot be imported
	fatal bool  // err is about the input stream, not this line: no skipping
	dupOf int   // with DuplicateLast, the earlier line with the same id
}

// importer streams rows into a collection. A reading goroutine decodes
// lines while the caller's goroutine encodes and writes them, which keeps
// both cores busy.
//
// Rows are staged one transaction's worth (storh.StreamBatch) at a time and
// handed to the collection only once all of them decoded and none repeats
// an id: a bad line stops the import before any row of its batch is
// written. A row the collection refuses rolls its transaction back; the
// library also ends a transaction early when its records pass a few MiB,
// so each staged batch is one PutStreamContext call, whose count says
// exactly which of its rows are committed.
type importer struct {
	cfg importConfig
	c   storh.Collection
	rep ImportReport

	rows chan []rowItem
	quit chan struct{}

	// ids holds the line of every id the import has staged, to find an id
	// given twice: memory grows with the rows that carry ids.
	ids idIndex

	records     int // rows handed to the collection, for progress
	lastLine    int // the last line the writing side took
	dupsWritten int // committed rows that replaced an earlier line's (DuplicateLast)
	dupsHanded  int // such rows handed to the current PutStreamContext call
	skips       []skipNote

	// Set by the reading goroutines; read once they end (or atomic).
	bytes      atomic.Int64
	totalLines int // the input's lines, once all are read; -1 before
	foreign    int
}

// skipNote is a skipped line waiting to be reported.
type skipNote struct {
	line int
	err  error
}

func (im *importer) run(ctx context.Context, in io.Reader) error {
	im.rows = make(chan []rowItem, 8)
	im.quit = make(chan struct{})
	src, stopReading := im.readAhead(in)
	decode := (*jsonv.Decoder).DecodeRow
	if im.cfg.mongo {
		decode = (*jsonv.Decoder).DecodeMongo
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		im.produce(src, decode)
	}()
	defer func() {
		stopReading()
		close(im.quit)
		<-readerDone
	}()

	var (
		pending []rowItem // handed over by the reader, not yet staged
		replay  []rowItem // staged rows to write again after a skipped one
		eof     bool
		stopErr error // why staging stopped early (a bad line, ctx)
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
			case <-ctx.Done():
				stopErr = fmt.Errorf("jsonl: import: %w", ctx.Err())
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
		// One PutStreamContext call for the whole input (its batch buffers
		// are reused), until the collection refuses a row and the rows
		// after the last commit are handed over again without it.
		handed.reset()
		var leftover []rowItem // staged rows the collection stopped before taking
		seq := func(yield func(any) bool) {
			for {
				// Stage one transaction's worth before handing any of it over.
				staged = staged[:0]
				for len(staged) < storh.StreamBatch {
					if err := ctx.Err(); err != nil {
						stopErr = fmt.Errorf("jsonl: import: %w", err)
						break
					}
					it, ok := next()
					if !ok {
						break
					}
					im.lastLine = max(im.lastLine, it.line)
					im.cfg.progress.tick(im.records+len(staged), im.bytes.Load())
					if it.err != nil {
						if it.fatal || !im.cfg.skipInvalid {
							stopErr = &LineError{it.line, it.err}
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
				im.records += len(staged)
				if len(staged) < storh.StreamBatch {
					return // the end of the input: PutStreamContext commits this last batch
				}
				im.listSkips()
			}
		}
		n, err := im.c.PutStreamContext(ctx, seq)
		im.committed(handed, n)
		if err == nil {
			im.listSkips()
			return stopErr
		}
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			im.listSkips()
			return fmt.Errorf("jsonl: import: %w", cerr)
		}
		// The collection refused a row: the rows it had not committed are
		// in handed, after the first n.
		var e *storh.Error
		if !errors.As(err, &e) || e.Index < n || e.Index >= handed.n || !skippable(err) || !handed.has(n) {
			im.listSkips()
			return err
		}
		bad := handed.at(e.Index)
		if !bad.entry.ID.IsZero() {
			im.ids.remove(bad.entry.ID, int64(bad.line)) // never written: a later row may have the id
		}
		reason := e.Err
		if e.ID != "" {
			reason = &idError{e.ID, e.Err}
		}
		if !im.cfg.skipInvalid {
			im.listSkips()
			return &LineError{bad.line, reason}
		}
		im.skip(bad.line, reason)
		again := make([]rowItem, 0, handed.n-n+len(leftover)+len(replay))
		for i := n; i < handed.n; i++ {
			if i != e.Index {
				again = append(again, handed.at(i))
			}
		}
		im.records -= handed.n - n - len(staged) + len(leftover)
		replay = append(append(again, leftover...), replay...)
	}
}

// handedRing keeps the rows handed to one PutStreamContext call that the
// collection may not have committed yet: it holds at most
// storh.StreamBatch rows uncommitted, so the last twice that many are
// enough.
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

// committed counts the rows the collection committed: the first n handed
// over in this call.
func (im *importer) committed(handed *handedRing, n int) {
	n = max(n, 0)
	im.rep.Imported += n
	if n > 0 && handed.has(n-1) {
		im.rep.CommittedLine = handed.at(n - 1).line
	}
	// Rows that replaced an earlier line's (DuplicateLast): counted as
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
// repeated id stops the import (DuplicateFail), is skipped (DuplicateSkip),
// or is written after the earlier row, replacing it (DuplicateLast). keep
// is false for a skipped row.
func (im *importer) checkID(it *rowItem) (keep bool, err error) {
	id := it.entry.ID
	if id.IsZero() {
		return true, nil // a new id, made by the database
	}
	first, dup := im.ids.get(id)
	if !dup || first == int64(it.line) { // first == line: written again after a skipped row
		if !dup {
			im.ids.add(id, int64(it.line))
		}
		it.dupOf = 0
		return true, nil
	}
	d := &DuplicateError{ID: id, First: int(first)}
	if oid, ok := it.entry.Data.(map[string]any)["_oid"].(objectid.ObjectID); ok && im.cfg.mongo {
		d.OID = oid.Hex()
	}
	switch im.cfg.dup {
	case DuplicateSkip:
		im.rep.Duplicates++
		im.skip(it.line, d)
		return false, nil
	case DuplicateLast:
		it.dupOf = int(first)
		return true, nil
	}
	return false, &LineError{it.line, d}
}

// skippable reports whether the collection refused the row itself (its
// data or id) rather than failed as a whole.
func skippable(err error) bool {
	return errors.Is(err, storh.ErrInvalidData) || errors.Is(err, storh.ErrInvalidID) || errors.Is(err, storh.ErrExists) ||
		errors.Is(err, storh.ErrUniqueViolation) || // a value a unique index already holds
		errors.Is(err, storh.ErrSchema) // a row the collection's schema refuses
}

// skip counts a skipped line. Lines the decoder rejects are found before
// the ones the collection rejects in the same batch, so the notes are
// reported in line order once the batch is done (listSkips).
func (im *importer) skip(line int, err error) {
	im.rep.Skipped++
	if im.cfg.onSkip == nil {
		return
	}
	im.skips = append(im.skips, skipNote{line, err})
	if len(im.skips) >= maxPendingSkips {
		im.listSkips()
	}
}

func (im *importer) listSkips() {
	slices.SortFunc(im.skips, func(a, b skipNote) int { return cmp.Compare(a.line, b.line) })
	for _, s := range im.skips {
		im.cfg.onSkip(s.line, s.err)
	}
	clear(im.skips)
	im.skips = im.skips[:0]
}

// produce reads and decodes lines, handing them over in chunks, until the
// input ends or quit closes.
func (im *importer) produce(in io.Reader, decode func(*jsonv.Decoder, []byte) (jsonv.Row, error)) {
	defer close(im.rows)
	lr := linereader.New(in, MaxLine)
	var dec jsonv.Decoder
	dec.KeepInvalidUTF8 = im.cfg.keepBad
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
		b, n, ok, tooLong, err := lr.Next()
		lineNo := int(n)
		if !ok {
			if err == errStopped {
				return
			}
			if err != io.EOF {
				chunk = append(chunk, rowItem{line: lineNo + 1, err: fmt.Errorf("reading the input: %w", err), fatal: true})
			} else {
				im.totalLines = lineNo
			}
			if len(chunk) > 0 {
				send()
			}
			return
		}
		it := rowItem{line: lineNo}
		switch {
		case tooLong:
			it.err = ErrLineTooLong
		case len(bytes.TrimSpace(b)) == 0:
			continue // a blank line
		default:
			jr, derr := decode(&dec, b)
			r := row(jr)
			if im.cfg.lineFn != nil {
				r, derr = im.cfg.lineFn(lineNo, b, r, derr)
			}
			if derr != nil {
				it.err = derr
			} else {
				it.entry = storh.Entry{ID: r.ID, Data: r.Data}
				if r.ForeignID {
					im.foreign++ // read by the writing side only after the reader ends
				}
			}
		}
		chunk = append(chunk, it)
		if len(chunk) == chunkRows && !send() {
			return
		}
	}
}

// errStopped ends the reading of the input when Import returns.
var errStopped = errors.New("jsonl: import stopped")

// readAhead reads in on a goroutine of its own, so that the decoding
// goroutine, which Import waits for, never blocks in a Read: Import
// returns promptly when ctx is done while the input has nothing to read.
// stop makes the reads end without waiting for them: the Read under way (or
// about to start) is the last one.
func (im *importer) readAhead(in io.Reader) (r io.Reader, stop func()) {
	type block struct {
		b   []byte
		err error
	}
	blocks := make(chan block, 4)
	free := make(chan []byte, 6)
	quit := make(chan struct{})
	var mu sync.Mutex
	stopped := false
	go func() {
		for {
			var buf []byte
			select {
			case buf = <-free:
			default:
				buf = make([]byte, readBlock)
			}
			mu.Lock()
			if stopped {
				mu.Unlock()
				return
			}
			mu.Unlock()
			n, err := in.Read(buf)
			im.bytes.Add(int64(n))
			if n == 0 && err == nil {
				continue
			}
			select {
			case blocks <- block{buf[:n], err}:
			case <-quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	cr := &blockReader{}
	cr.next = func() ([]byte, error) {
		select {
		case b := <-blocks:
			return b.b, b.err
		case <-quit:
			return nil, errStopped
		}
	}
	cr.done = func(b []byte) {
		select {
		case free <- b[:cap(b)]:
		default:
		}
	}
	return cr, func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		close(quit)
	}
}

// blockReader is an io.Reader over the blocks that readAhead reads.
type blockReader struct {
	next func() ([]byte, error)
	done func([]byte) // hands a block back for reuse
	cur  []byte
	off  int
	err  error
}

func (r *blockReader) Read(p []byte) (int, error) {
	for r.off == len(r.cur) {
		if r.err != nil {
			return 0, r.err
		}
		if r.cur != nil {
			r.done(r.cur)
		}
		r.cur, r.err = r.next()
		r.off = 0
	}
	n := copy(p, r.cur[r.off:])
	r.off += n
	return n, nil
}
