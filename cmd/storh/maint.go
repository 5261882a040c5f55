package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
)

func (a *app) statsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stats [COLL]",
		Short: "Show the database and its collections: kinds, record counts, sizes, time spans",
		Long: `Stats shows the file size and, for each collection (or only COLL), its kind,
number of records, stored bytes and the creation times of its oldest and
newest records. It reads stored counters and the first and last keys: it costs
the same for any size.

A new database file is 16 MiB long: bbolt grows the file in steps of up to
16 MiB, and the file is sparse, so stats also shows the space it takes on
disk (what du shows) when that is less.`,
		Example: `  storh stats
  storh stats events
  storh --json stats`,
		Args: args(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, found, err := a.openStoreExisting(false, args...)
			if err != nil {
				return err
			}
			defer s.close()
			st, err := s.stats()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				st.Collections = found
			}
			if a.jsonOut {
				return a.printJSON(statsJSON(st))
			}
			return a.printStats(st)
		},
	}
}

type collJSON struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Records   int64  `json:"records"`
	Bytes     int64  `json:"bytes"`
	FirstID   string `json:"first_id,omitempty"`
	LastID    string `json:"last_id,omitempty"`
	FirstTime string `json:"first_time,omitempty"`
	LastTime  string `json:"last_time,omitempty"`
}

func statsJSON(st storh.Stats) any {
	cols := make([]collJSON, 0, len(st.Collections))
	for _, c := range st.Collections {
		cj := collJSON{Name: c.Name, Kind: c.Kind, Records: int64(c.Records), Bytes: c.Bytes}
		if !c.FirstID.IsZero() {
			cj.FirstID, cj.LastID = c.FirstID.String(), c.LastID.String()
			cj.FirstTime, cj.LastTime = fmtTime(c.FirstTime()), fmtTime(c.LastTime())
		}
		cols = append(cols, cj)
	}
	return struct {
		Path           string     `json:"path"`
		FileSize       int64      `json:"file_size"`
		FreeBytes      int64      `json:"free_bytes"`
		DirectReadsOff string     `json:"direct_reads_off,omitempty"`
		Collections    []collJSON `json:"collections"`
	}{st.Path, st.FileSize, st.FreeBytes, st.DirectReadsOff, cols}
}

// fileSizes gives a database file's size and, when it differs, the space it
// takes on disk: bbolt grows the file in steps of up to 16 MiB, and the file
// is sparse, so a new database is 16 MiB long but takes only the pages
// written.
func fileSizes(path string, size int64) string {
	fi, err := os.Stat(path)
	if err != nil {
		return humanBytes(size)
	}
	disk := onDisk(fi)
	if disk >= size || humanBytes(disk) == humanBytes(size) {
		return humanBytes(size)
	}
	return fmt.Sprintf("%s long, %s on disk", humanBytes(size), humanBytes(disk))
}

func fmtTime(t time.Time) string { return t.UTC().Format(jsonl.TimeLayout) }

func (a *app) printStats(st storh.Stats) error {
	fmt.Fprintf(a.stdout, "database %s: %s, %s\n", st.Path, fileSizes(st.Path, st.FileSize), plural(int64(len(st.Collections)), "collection"))
	if st.DirectReadsOff != "" {
		fmt.Fprintf(a.stdout, "reads go through bbolt's buckets, not straight to the file's pages (slower, the same answers): %s\n", st.DirectReadsOff)
	}
	if len(st.Collections) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tRECORDS\tDATA\tOLDEST\tNEWEST")
	for _, c := range st.Collections {
		first, last := "-", "-"
		if !c.FirstID.IsZero() {
			first, last = fmtTime(c.FirstTime()), fmtTime(c.LastTime())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Kind, commas(c.Records), humanBytes(c.Bytes), first, last)
	}
	return tw.Flush()
}

// problemJSON is one verify finding in --json output.
type problemJSON struct {
	Kind       string `json:"kind"`
	Collection string `json:"collection,omitempty"`
	ID         string `json:"id,omitempty"`
	Detail     string `json:"detail"`
}

func toProblemJSON(p storh.Problem) problemJSON {
	pj := problemJSON{Kind: string(p.Kind), Collection: p.Collection, Detail: p.Detail}
	if !p.ID.IsZero() {
		pj.ID = p.ID.String()
	}
	return pj
}

// problemLog takes what verify and repair find: each problem is printed on
// stdout as it comes, after label, or with --json kept for the summary.
type problemLog struct {
	a     *app
	label string
	list  []problemJSON
}

func (l *problemLog) add(p storh.Problem) {
	if l.a.jsonOut {
		l.list = append(l.list, toProblemJSON(p))
		return
	}
	fmt.Fprintln(l.a.stdout, l.label, p.String())
}

func (a *app) verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify [COLL...]",
		Short: "Check the file and every record; exit 1 when anything is wrong",
		Long: `Verify checks bbolt's own page consistency (when no collection is named), each
collection's layout, every record's key, checksum and encoding, and the stored
counters against the records. Each problem is printed on stdout; the exit code
is 1 when there is any. It reads one consistent snapshot.`,
		Example: `  storh verify
  storh verify pages events
  storh --json verify`,
		Args: args(0, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, _, err := a.openStoreExisting(false, args...)
			if err != nil {
				return err
			}
			defer st.close()
			problems := &problemLog{a: a, label: "problem:"}
			rep, err := st.verify(a.ctx, args, problems.add)
			if err != nil {
				return interrupted(err, fmt.Sprintf("verify stopped after %s, %s", plural(rep.Records, "record"), plural(int64(rep.Problems), "problem")))
			}
			if a.jsonOut {
				if err := a.printJSON(map[string]any{"ok": rep.Problems == 0, "collections": rep.Collections,
					"records": rep.Records, "problems": problems.list}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "verified %s, %s: %s\n", plural(int64(rep.Collections), "collection"), plural(rep.Records, "record"), plural(int64(rep.Problems), "problem"))
			}
			if rep.Problems > 0 {
				return fmt.Errorf("verify found %s in %s: 'storh repair' quarantines bad records and fixes counters; damage to the file itself needs a backup", plural(int64(rep.Problems), "problem"), st.where())
			}
			return nil
		},
	}
}

func (a *app) repairCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "repair [COLL...]",
		Short: "Quarantine records that fail verification and fix counters",
		Long: `Repair moves every record that fails verification out of its collection into
the collection's quarantine (kept in the file for manual recovery) and rewrites
counters that disagree with the records, in one transaction. Then it verifies
again: the exit code is 1 when problems remain (damage to bbolt's own pages
cannot be repaired in place: restore a backup, or compact what is readable).
Take a backup first.`,
		Example: `  storh backup before-repair.db && storh repair
  storh repair pages`,
		Args: args(0, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, _, err := a.openExisting(true, args...)
			if err != nil {
				return err
			}
			defer db.Close()
			problems := &problemLog{a: a, label: "found:"}
			rep, err := db.RepairContext(a.ctx, problems.add, args...)
			if err != nil {
				return interrupted(err, "nothing was repaired")
			}
			after, err := db.VerifyContext(a.ctx, nil, args...)
			if err != nil {
				return interrupted(err, "the repair is committed; run 'storh verify' to check it")
			}
			if a.jsonOut {
				if err := a.printJSON(map[string]any{"found": rep.Problems, "quarantined": rep.Quarantined,
					"recounted": rep.Recounted, "remaining": after.Problems, "problems": problems.list}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "repaired: %s found, %s quarantined, %s rewritten; %s\n",
					plural(int64(rep.Problems), "problem"), plural(int64(rep.Quarantined), "record"),
					plural(int64(rep.Recounted), "collection counter"), remain(after.Problems))
			}
			if after.Problems > 0 {
				return fmt.Errorf("%s after repair ('storh verify' lists them): restore a backup, or 'storh compact' what is readable", remain(after.Problems))
			}
			return nil
		},
	}
}

func (a *app) compactCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "compact --out NEW",
		Short: "Copy the live data into a fresh, smaller file",
		Long: `Compact copies the live data of the database into the new file NEW, leaving
the pages freed by deletes behind, and says how much disk space that
reclaimed. The database file never shrinks by itself; compacting is how to
get the space back. It opens the database read-only, so no process may have
it open for writing; replace the original with the copy while nothing uses
it.

For both files it shows the space on disk (what du shows), the live data
(the pages holding records rather than free space) and the file size (what
ls shows). bbolt grows a file in steps of up to 16 MiB and the file is
sparse, so a new database is 16 MiB long but takes only the pages written:
the file size says little, and the reclaimed space is the difference on
disk, never negative (a small sparse file can take less room than its
packed copy).`,
		Example: `  storh compact --out storh.compact.db && mv storh.compact.db storh.db
  storh --json compact --out /tmp/copy.db`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("missing --out NEW: the file to write the compacted copy to")
			}
			if _, err := os.Stat(a.dbPath); errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no database at %s: pass --db PATH or set %s", a.dbPath, envDB)
			}
			if _, err := os.Stat(out); err == nil {
				return fmt.Errorf("%s already exists: compact never overwrites; remove it or choose another name", out)
			}
			rep, err := storh.CompactContext(a.ctx, a.dbPath, out, storh.WithLockTimeout(a.timeout))
			if err != nil && a.ctx.Err() != nil {
				return interrupted(err, out+" was removed; "+a.dbPath+" is unchanged")
			}
			if errors.Is(err, storh.ErrLocked) {
				return fmt.Errorf("database %s is open for writing in another process (waited %v): compact needs it closed", a.dbPath, a.timeout)
			}
			if err != nil {
				return a.openError(err)
			}
			return a.compactReport(rep, out)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the compacted copy to `NEW` (must not exist)")
	return cmd
}

// compactSide is one file of a compaction in --json output: bytes, and the
// same in human units.
type compactSide struct {
	Path          string `json:"path"`
	OnDisk        int64  `json:"on_disk"`
	LiveData      int64  `json:"live_data"`
	FileSize      int64  `json:"file_size"`
	OnDiskHuman   string `json:"on_disk_human"`
	LiveDataHuman string `json:"live_data_human"`
	FileSizeHuman string `json:"file_size_human"`
}

func newCompactSide(path string, size, allocated, inUse int64) compactSide {
	size, allocated, inUse = max(0, size), max(0, allocated), max(0, inUse)
	return compactSide{Path: path, OnDisk: allocated, LiveData: inUse, FileSize: size,
		OnDiskHuman: humanBytes(allocated), LiveDataHuman: humanBytes(inUse), FileSizeHuman: humanBytes(size)}
}

// compactReport says what compact did: the disk space reclaimed (the
// difference in allocated space, never negative), and for both files the
// space on disk, the live data and the file size.
func (a *app) compactReport(rep storh.CompactReport, out string) error {
	src := newCompactSide(a.dbPath, rep.SrcSize, rep.SrcAllocated, rep.SrcInUse)
	dst := newCompactSide(out, rep.DstSize, rep.DstAllocated, rep.DstInUse)
	reclaimed := max(0, rep.Reclaimed())
	pct := 0.0
	if src.OnDisk > 0 {
		pct = 100 * float64(reclaimed) / float64(src.OnDisk)
	}
	if a.jsonOut {
		return a.printJSON(struct {
			Src              compactSide `json:"src"`
			Dst              compactSide `json:"dst"`
			Reclaimed        int64       `json:"reclaimed"`
			ReclaimedHuman   string      `json:"reclaimed_human"`
			ReclaimedPercent float64     `json:"reclaimed_percent"`
		}{src, dst, reclaimed, humanBytes(reclaimed), math.Round(pct*10) / 10})
	}
	if reclaimed > 0 {
		fmt.Fprintf(a.stdout, "compacted %s into %s: reclaimed %s of disk space (%.0f%%)\n", src.Path, dst.Path, humanBytes(reclaimed), pct)
	} else {
		fmt.Fprintf(a.stdout, "compacted %s into %s: reclaimed no disk space (the original had no free pages worth giving back)\n", src.Path, dst.Path)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tON DISK\tLIVE DATA\tFILE SIZE")
	for _, f := range []compactSide{src, dst} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Path, f.OnDiskHuman, f.LiveDataHuman, f.FileSizeHuman)
	}
	return tw.Flush()
}

func (a *app) backupCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE|-",
		Short: "Write a consistent copy of the database to FILE (or stdout)",
		Long: `Backup writes a consistent copy of the whole database, from one read
transaction, to FILE (atomically: FILE holds the complete copy or what it held
before) or to stdout (-).

bbolt's file lock allows one writing process at a time, and no reader beside
it: a backup taken by this command waits for (up to --timeout) and then fails
while another process has the database open for writing. A program that keeps
the database open should take its backups itself, with DB.Backup or
DB.BackupFile: they copy while the program goes on writing.`,
		Example: `  storh backup storh-$(date +%F).db
  storh backup - | gzip > storh.db.gz`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := a.open(false)
			if err != nil {
				return err
			}
			defer db.Close()
			var n int64
			if args[0] == "-" {
				if isTerminal(a.stdout) {
					return usagef("stdout is a terminal: redirect the backup (storh backup - > copy.db) or name a file")
				}
				n, err = db.BackupContext(a.ctx, a.stdout)
				if err != nil {
					return interrupted(err, "the backup on stdout is incomplete: do not use it")
				}
			} else {
				n, err = db.BackupFileContext(a.ctx, args[0])
				if err != nil {
					return interrupted(err, args[0]+" was left as it was")
				}
			}
			if a.jsonOut && args[0] != "-" {
				return a.printJSON(map[string]any{"src": a.dbPath, "dst": args[0], "bytes": n})
			}
			a.diag("storh: backed up %s to %s (%s)", a.dbPath, args[0], humanBytes(n))
			return nil
		},
	}
}

// interrupted turns an error from a maintenance command cancelled by Ctrl-C
// (or SIGTERM) into "interrupted: <what was kept>"; other errors pass.
func interrupted(err error, kept string) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted: %s", kept)
	}
	return err
}

// remain says how many problems remain: "1 problem remains", "0 problems remain".
func remain(n int) string {
	if n == 1 {
		return "1 problem remains"
	}
	return plural(int64(n), "problem") + " remain"
}
