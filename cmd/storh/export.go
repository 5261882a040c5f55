package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
)

func (a *app) exportCmd() *cobra.Command {
	var f queryFlags
	cmd := &cobra.Command{
		Use:   "export COLL [FILE|-]",
		Short: "Write a collection as JSON lines, to a file or stdout",
		Long: `Export writes the records of COLL as JSON lines {"id":"…","data":{…}}, oldest
first, to FILE or to stdout (- or no FILE). Importing the file into an empty
collection gives back the same ids and data, and exporting that gives the
same bytes: values JSON has no type for are written as Extended JSON wrappers
({"$date":…}, {"$binary":…}, {"$numberDouble":"NaN"}); floats always carry a
fraction or exponent (1.0) so they stay floats (docs/bulk-data.md).

It streams: memory stays flat, and the database is read in short transactions,
so writers in this process are never held up. A FILE is written under a
temporary name and renamed when complete. The selection flags of 'storh query'
pick part of the collection (--after for incremental exports).`,
		Example: `  storh export events events.jsonl
  storh export events --from 2024-05-01 --until 2024-05-31T23:59:59.999Z > may.jsonl
  storh export events | gzip > events.jsonl.gz`,
		Args: args(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := f.build(a.now())
			if err != nil {
				return err
			}
			var prog *progress
			out := "-"
			if len(args) == 2 {
				out = args[1]
			}
			s, cs, err := a.openStoreReader(args[0])
			if err != nil {
				return err
			}
			defer s.close()
			rows := func(w io.Writer) (int64, error) { return s.export(a.ctx, cs.Name, &f, q, w, prog) }
			total := cs.Records
			if f.selective() {
				total = -1
			}
			st := exportStats{Collection: cs.Name, Target: out}
			start := time.Now()
			prog = a.startProgress("exporting", int64(total), false)
			if out == "-" {
				st.Exported, err = rows(a.stdout)
			} else {
				dbPath := a.dbPath
				if a.url != "" {
					dbPath = ""
				}
				st.Exported, st.Bytes, err = exportFile(rows, out, dbPath)
			}
			prog.stop()
			st.Seconds = time.Since(start).Seconds()
			if err != nil {
				err = f.runError(err, cs.Name)
				return fmt.Errorf("export %s: %s (after %s)", qname(cs.Name), libMsg(err), plural(st.Exported, "record"))
			}
			if a.jsonOut && out != "-" {
				return a.printJSON(st)
			}
			rate := ""
			if st.Seconds > 0 && st.Exported > 0 {
				rate = fmt.Sprintf(", %s records/s", shortCount(float64(st.Exported)/st.Seconds))
			}
			where := "stdout"
			if out != "-" {
				where = fmt.Sprintf("%s (%s)", out, humanBytes(st.Bytes))
			}
			a.diag("storh: exported %s from %s to %s in %s%s", plural(st.Exported, "record"), qname(cs.Name), where,
				time.Since(start).Round(time.Millisecond), rate)
			return nil
		},
	}
	f.register(cmd.Flags(), false)
	return cmd
}

type exportStats struct {
	Collection string  `json:"collection"`
	Target     string  `json:"target"`
	Exported   int64   `json:"exported"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
}

// exportFile writes the rows to a temporary file next to path and renames
// it into place when complete, so path never holds a partial export.
func exportFile(rows func(io.Writer) (int64, error), path, dbPath string) (n, size int64, err error) {
	if fi, err := os.Stat(path); err == nil && dbPath != "" {
		if dbi, err := os.Stat(dbPath); err == nil && os.SameFile(fi, dbi) {
			return 0, 0, fmt.Errorf("%s is the database itself: choose another output file", path)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if n, err = rows(tmp); err != nil {
		return n, 0, err
	}
	if err = tmp.Sync(); err != nil {
		return n, 0, err
	}
	fi, err := tmp.Stat()
	if err != nil {
		return n, 0, err
	}
	if err = tmp.Close(); err != nil {
		return n, 0, err
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return n, 0, err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return n, 0, err
	}
	// The rename lasts through a power cut only once the directory that
	// holds the new name is synced.
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return n, 0, err
	}
	defer dir.Close()
	return n, fi.Size(), dir.Sync()
}

// exportRows writes the rows q selects to w with jsonl.Export, in the
// compact form {"id":…,"data":…}, transcoding each record's stored msgpack
// straight to JSON.
func exportRows(ctx context.Context, r reader, q query.Query, w io.Writer, prog *progress) (int64, error) {
	rep, err := jsonl.Export(ctx, w, r, q, jsonl.WithoutTime(),
		jsonl.WithProgress(1024, 100*time.Millisecond, func(p jsonl.Progress) { prog.records.Store(int64(p.Records)) }))
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = errors.New("interrupted")
	}
	return int64(rep.Records), err
}
