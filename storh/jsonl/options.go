package jsonl

import (
	"time"
)

// ExportOption configures Export: WithoutTime, WithProgress.
type ExportOption interface{ applyExport(*exportConfig) }

// ImportOption configures Import: Mongo, OnDuplicate, SkipInvalid, OnSkip,
// InvalidUTF8AsBinary, WithLineFunc, WithProgress.
type ImportOption interface{ applyImport(*importConfig) }

// Option configures both Export and Import: WithProgress.
type Option interface {
	ExportOption
	ImportOption
}

type exportOption func(*exportConfig)

func (o exportOption) applyExport(c *exportConfig) { o(c) }

type importOption func(*importConfig)

func (o importOption) applyImport(c *importConfig) { o(c) }

// Progress is what a progress function (WithProgress) is told.
type Progress struct {
	// Records counts, for Export, the records written so far; for Import,
	// the rows read that go to the collection (written, or in the
	// transaction being written; the report counts what is committed).
	Records int
	// Bytes counts, for Export, the bytes written so far (some may still be
	// in Export's buffer); for Import, the bytes read from the input.
	Bytes int64
}

// progress calls a progress function at most every so many records or so
// much time.
type progress struct {
	fn       func(Progress)
	every    int
	interval time.Duration

	lastRecords int
	lastTime    time.Time
	ticks       int
}

// WithProgress calls fn with the counts so far whenever every more records
// have passed since the last call, or interval has passed since then,
// whichever comes first (a value of 0 or less turns that trigger off), and
// once when the export or import ends, whether or not it failed. The time
// is checked every 64 records (for Import, every 64 lines), so a trigger
// on time alone is as late as the slowest 64 of them.
//
// fn runs on the goroutine that called Export or Import, so it slows the
// transfer by what it takes: a progress bar should store the counts and
// draw elsewhere.
func WithProgress(every int, interval time.Duration, fn func(Progress)) Option {
	return progressOption{every, interval, fn}
}

type progressOption struct {
	every    int
	interval time.Duration
	fn       func(Progress)
}

func (o progressOption) hook() *progress {
	if o.fn == nil {
		return nil
	}
	return &progress{fn: o.fn, every: o.every, interval: o.interval, lastTime: time.Now()}
}

func (o progressOption) applyExport(c *exportConfig) { c.progress = o.hook() }
func (o progressOption) applyImport(c *importConfig) { c.progress = o.hook() }

// tick is called for each record (or line) with the counts; it calls the
// function when a trigger is due.
func (p *progress) tick(records int, bytes int64) {
	if p == nil {
		return
	}
	due := p.every > 0 && records-p.lastRecords >= p.every
	if !due && p.interval > 0 {
		if p.ticks++; p.ticks&63 == 0 && time.Since(p.lastTime) >= p.interval {
			due = true
		}
	}
	if due {
		p.call(records, bytes)
	}
}

func (p *progress) call(records int, bytes int64) {
	if p == nil {
		return
	}
	p.lastRecords, p.lastTime = records, time.Now()
	p.fn(Progress{Records: records, Bytes: bytes})
}
