package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
)

func (a *app) migrateCmd() *cobra.Command {
	var batch int
	cmd := &cobra.Command{
		Use:   "migrate SRC DST",
		Short: "Copy a whole database between a file and PostgreSQL, resumably, and verify the copy",
		Long: `Migrate copies the whole database SRC into DST, each a database file or a
postgres:// URL: a file to PostgreSQL, back, or between two of either.
Everything comes across as stored: collections of every kind, their records
and ids, indexes, queue jobs with their states, and the counters.

DST must be empty (a new file, an empty schema). The copy streams, in
transactions of --batch keys, and each transaction records how far it got:
when a migration stops (Ctrl-C, a lost connection, a killed process), the
same command run again resumes where it stopped. At the end every key of
both databases is compared, and the collections' counts; the summary gives
the SHA-256 of the content.

SRC must not be written while it is migrated. A file is opened read-only,
which keeps writers in other processes out; on PostgreSQL, stop the writers.
If the comparison finds a difference, empty DST and migrate again. --db is
not used: SRC and DST name both databases.`,
		Example: `  storh migrate app.db 'postgres://app@db.internal/app?search_path=storh'
  storh migrate 'postgres://app@db.internal/app?search_path=storh' app-copy.db
  storh --json migrate app.db other.db`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.dbGiven {
				return usagef("migrate takes its databases as SRC and DST, not --db")
			}
			if batch <= 0 {
				return usagef("--batch %d: a transaction holds at least one key", batch)
			}
			return a.migrate(args[0], args[1], batch)
		},
	}
	cmd.Flags().IntVar(&batch, "batch", 1000, "keys per transaction of DST (also the most a resumed run copies again)")
	return cmd
}

type migrateStats struct {
	Source      string  `json:"source"`
	Destination string  `json:"destination"`
	ResumedAt   string  `json:"resumed_at,omitempty"`
	Collections int     `json:"collections"`
	Records     int64   `json:"records"`
	Keys        int64   `json:"keys"`
	Buckets     int64   `json:"buckets"`
	Bytes       int64   `json:"bytes"`
	Copied      int64   `json:"copied_records"`
	Batches     int     `json:"batches"`
	SHA256      string  `json:"sha256"`
	Seconds     float64 `json:"seconds"`
}

func (a *app) migrate(src, dst string, batch int) error {
	if !isURL(src) {
		if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("migrate: no database at %s", src)
		}
	}
	var prog *progress
	phase := ""
	start := time.Now()
	rep, err := storh.Migrate(a.ctx, src, dst,
		storh.WithMigrateLockTimeout(a.timeout),
		storh.WithMigrateBatch(batch, 4<<20),
		storh.WithMigrateProgress(func(p storh.MigrateProgress) {
			if string(p.Phase) != phase {
				prog.stopIfAny()
				phase = string(p.Phase)
				verb := "migrating"
				if phase == "verify" {
					verb = "verifying"
				}
				prog = a.startProgress(verb, p.TotalRecords, false)
			}
			done := p.Records
			if phase != "verify" {
				done += p.ResumedRecords
			}
			prog.records.Store(done)
			prog.bytes.Store(p.Bytes)
		}))
	prog.stopIfAny()
	st := migrateStats{Source: rep.Source, Destination: rep.Destination, ResumedAt: rep.ResumedAt,
		Collections: rep.Collections, Records: rep.Records, Keys: rep.Keys, Buckets: rep.Buckets, Bytes: rep.Bytes,
		Copied: rep.Copied.Records, Batches: rep.Copied.Batches, Seconds: time.Since(start).Seconds()}
	if err != nil {
		return migrateError(err, src, dst, rep)
	}
	st.SHA256 = hex.EncodeToString(rep.Checksum[:])
	if a.jsonOut {
		return a.printJSON(st)
	}
	if rep.ResumedAt != "" {
		a.diag("storh: resumed the migration after %s", rep.ResumedAt)
	}
	rate := ""
	if st.Seconds > 0 && st.Copied > 0 {
		rate = fmt.Sprintf(", %s records/s", shortCount(float64(st.Copied)/st.Seconds))
	}
	a.diag("storh: migrated %s in %s (%s, %s keys) from %s to %s in %s%s",
		plural(st.Records, "record"), plural(st.Collections, "collection"), humanBytes(st.Bytes), commas(st.Keys),
		rep.Source, rep.Destination, time.Since(start).Round(time.Millisecond), rate)
	a.diag("storh: verified: both hold the same keys and values (sha256 %s)", st.SHA256[:16])
	return nil
}

// stopIfAny stops the bar of a phase, if one started.
func (p *progress) stopIfAny() {
	if p != nil {
		p.stop()
	}
}

// migrateError says what stopped a migration, in the command's terms, and
// what to do next.
func migrateError(err error, src, dst string, rep storh.MigrateReport) error {
	from, to := storh.Redact(src), storh.Redact(dst)
	var mm *storh.MigrateMismatch
	switch {
	case errors.Is(err, storh.ErrInvalidOption):
		return usagef("migrate %s to %s: %s", from, to, reason(err))
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("migrate %s to %s: interrupted after %s of this run; run the same command again to resume",
			from, to, plural(rep.Copied.Records, "record"))
	case errors.Is(err, storh.ErrLocked):
		return fmt.Errorf("migrate %s to %s: %s", from, to, libMsg(err))
	case errors.As(err, &mm):
		return fmt.Errorf("migrate %s to %s: the %s; the source was written during the migration, or %s was: empty %s and migrate again with the source's writers stopped",
			from, to, strings.TrimPrefix(mm.Error(), errorPrefix), to, to)
	case errors.Is(err, storh.ErrNotEmpty):
		return fmt.Errorf("migrate %s to %s: %s is not empty: %s (migrate copies into an empty database, or resumes its own unfinished migration from the same source)",
			from, to, to, reason(err))
	}
	return fmt.Errorf("migrate %s to %s: %s", from, to, strings.TrimPrefix(libMsg(err), "migrate: "))
}

// reason is what a library error says after its sentinel's own words.
func reason(err error) string {
	var se *storh.Error
	msg := libMsg(err)
	if errors.As(err, &se) && se.Err != nil {
		msg = strings.TrimPrefix(se.Err.Error(), errorPrefix)
	}
	_, after, found := strings.Cut(msg, ": ")
	if !found {
		return msg
	}
	return after
}

// isURL tells a PostgreSQL URL from a file path, as storh.Open does.
func isURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}
