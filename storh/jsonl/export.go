package jsonl

import (
	"context"
	"fmt"
	"io"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/jsonv"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// exportBuffer is how many bytes of lines Export gathers before it writes
// them to w, in one Write.
const exportBuffer = 256 << 10

type exportConfig struct {
	withoutTime bool
	progress    *progress
}

// WithoutTime makes Export write the compact line {"id":"…","data":{…}}
// (AppendRow), which `storh export` writes, instead of the record's JSON
// with its time. Import reads both the same: the id carries the time.
func WithoutTime() ExportOption {
	return exportOption(func(c *exportConfig) { c.withoutTime = true })
}

// ExportReport counts what Export wrote.
type ExportReport struct {
	// Records counts the records written, one line each.
	Records int
	// Bytes counts the bytes written to w.
	Bytes int64
}

// Export writes the records q selects from c to w, one line each, in the
// query's order (query.All() is the whole collection, oldest first). A line
// is the record's JSON (json.Marshal of the storh.Record, AppendRecord) and
// a newline, or the compact form with WithoutTime. Import of the output
// into an empty collection gives back the same ids and data, and exporting
// that gives the same bytes.
//
// Export streams: it reads c in chunks of short read transactions
// (StreamContext), so it never holds up writers, transcodes each record's
// stored bytes straight to JSON, and writes to w in blocks of whole lines
// (256 KiB), so it needs no buffering of its own around w.
//
// It stops when ctx is done, checked before each record, with an error
// wrapping ctx.Err(). On any error but a failed write to w, the lines of
// the records done so far are written first, so w holds exactly
// Records whole lines, and the report says so; when w fails, the report
// counts what w accepted, the last line possibly in part.
func Export(ctx context.Context, w io.Writer, c storh.Collection, q query.Query, opts ...ExportOption) (ExportReport, error) {
	var cfg exportConfig
	for _, o := range opts {
		o.applyExport(&cfg)
	}
	var rep ExportReport
	buf := make([]byte, 0, exportBuffer+exportBuffer/8)
	pending := 0 // records in buf
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		n, err := w.Write(buf)
		rep.Bytes += int64(n)
		if err == nil && n < len(buf) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return err
		}
		rep.Records += pending
		pending = 0
		if cap(buf) > 4*exportBuffer {
			buf = make([]byte, 0, exportBuffer+exportBuffer/8) // after a huge record
		} else {
			buf = buf[:0]
		}
		return nil
	}
	fail := func(err error) (ExportReport, error) {
		if ferr := flush(); ferr != nil {
			err = ferr
		}
		cfg.progress.call(rep.Records, rep.Bytes)
		return rep, err
	}
	withTime := !cfg.withoutTime
	// The bytes are lent: each record is written into buf before the next.
	var flushErr error // already reported with progress: returned as is
	err := c.ScanRawContext(ctx, q, func(id uuidv7.UUID, raw []byte) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("jsonl: export %q: %w", c.Name(), err)
		}
		var err error
		if buf, err = jsonv.AppendObject(buf, id, raw, withTime); err != nil {
			return fmt.Errorf("record %s: %w", id, err)
		}
		buf = append(buf, '\n')
		pending++
		if len(buf) >= exportBuffer {
			if err := flush(); err != nil {
				flushErr = err
				return err
			}
		}
		cfg.progress.tick(rep.Records+pending, rep.Bytes+int64(len(buf)))
		return nil
	})
	switch {
	case flushErr != nil:
		cfg.progress.call(rep.Records, rep.Bytes)
		return rep, flushErr
	case err != nil:
		return fail(err)
	}
	if err := flush(); err != nil {
		cfg.progress.call(rep.Records, rep.Bytes)
		return rep, err
	}
	cfg.progress.call(rep.Records, rep.Bytes)
	return rep, nil
}
