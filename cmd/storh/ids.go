package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

const maxNewIDs = 1_000_000

func (a *app) uuidCmd() *cobra.Command {
	cmd := groupCmd("uuid", "Make, inspect and bound UUIDv7 record ids",
		a.uuidNewCmd(), a.uuidInspectCmd(), a.uuidBoundsCmd())
	cmd.Long = `UUIDv7s are the record ids: 48 bits of Unix milliseconds, then random bits,
so ids sort by creation time. new makes ids (now, or at a chosen time),
inspect tells whether ids are valid and when they were made, bounds gives the
smallest and largest id of a time window.`
	cmd.Example = `  storh uuid new -n 3
  storh uuid inspect 0190a4f4-5c3b-7def-8123-456789abcdef
  storh uuid bounds --from -1h`
	return cmd
}

func (a *app) uuidNewCmd() *cobra.Command {
	var n int
	var at string
	cmd := &cobra.Command{
		Use:   "new",
		Short: "Print new UUIDv7s (strictly increasing)",
		Long: `New prints N new UUIDv7s, one per line, strictly increasing; N is 1 to
1,000,000 (default 1).

Without --at they carry the current time. Within one millisecond the 74 bits
after the timestamp count up by one, so the ids of one run never repeat or go
backwards, even if the clock steps back (they then keep the last millisecond
until the clock catches up). Ids made one after another are guessable from
each other: never use them as secrets.

--at T gives them the creation time T instead, for fixtures and backfills:
every id carries exactly T's millisecond (finer digits are dropped), still
strictly increasing. T must lie between 1970-01-01 and the year 10889, the
range of the 48-bit millisecond field. Times are RFC 3339, a date (UTC), Unix
milliseconds, now, or relative to now (-15m).

Ids from different runs or processes are not ordered against each other
within a millisecond; their uniqueness rests on the random bits. With --json
each line is {"id":…,"time":…}.`,
		Example: `  storh uuid new
  storh uuid new -n 3 --at 2024-05-01T12:00:00Z
  storh --json uuid new --at -1h`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 || n > maxNewIDs {
				return usagef("-n %d: must be 1 to %d", n, maxNewIDs)
			}
			ids := make([]uuidv7.UUID, n)
			if at == "" {
				uuidv7.NewBatch(ids)
			} else {
				t, err := parseTime(at, a.now())
				if err != nil {
					return usagef("--at: %v", err)
				}
				for i := range ids {
					if ids[i], err = uuidv7.NewAt(t.UnixMilli()); err != nil {
						return usagef("--at %s: %s", at, libMsg(err))
					}
				}
			}
			w := bufio.NewWriter(a.stdout)
			for _, id := range ids {
				if a.jsonOut {
					fmt.Fprintf(w, `{"id":"%s","time":"%s"}`+"\n", id, fmtTime(id.Time()))
				} else {
					fmt.Fprintln(w, id)
				}
			}
			return w.Flush()
		},
	}
	cmd.Flags().IntVarP(&n, "count", "n", 1, "how many `N` (1 to 1,000,000)")
	cmd.Flags().StringVar(&at, "at", "", "with this creation time `T` instead of now (RFC 3339, Unix ms, relative)")
	return cmd
}

// uuidInfo is what inspect tells about one id.
type uuidInfo struct {
	Input   string `json:"input"`
	Valid   bool   `json:"valid"`
	ID      string `json:"id,omitempty"`
	Version int    `json:"version,omitempty"`
	UnixMs  int64  `json:"unix_ms,omitempty"`
	UTC     string `json:"utc,omitempty"`
	Local   string `json:"local,omitempty"`
	Error   string `json:"error,omitempty"`
}

func inspectUUID(s string) uuidInfo {
	info := uuidInfo{Input: s}
	id, err := uuidv7.Parse(s)
	if err != nil {
		info.Error = strings.TrimPrefix(err.Error(), "uuidv7: ")
		var pe *uuidv7.ParseError
		if errors.As(err, &pe) && pe.Reason == uuidv7.ReasonVersion {
			fmt.Sscanf(s[14:15], "%x", &info.Version)
			info.Error = fmt.Sprintf("a version %d UUID, not a UUIDv7: it carries no creation time", info.Version)
		}
		return info
	}
	t := id.Time()
	info.Valid, info.ID, info.Version = true, id.String(), id.Version()
	info.UnixMs = id.TimestampMs()
	info.UTC = fmtTime(t)
	info.Local = t.Local().Format(jsonl.TimeLayout + " MST")
	return info
}

func (i uuidInfo) valid() (bool, string) { return i.Valid, i.Error }

func (i uuidInfo) describe(w io.Writer) {
	fmt.Fprintf(w, "%s  valid UUIDv7 (version 7, RFC 9562 variant)\n", i.ID)
	fmt.Fprintf(w, "  unix ms  %d\n  utc      %s\n  local    %s\n", i.UnixMs, i.UTC, i.Local)
}

func (a *app) uuidInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect ID...",
		Short: "Tell whether ids are valid UUIDv7s, and when they were made",
		Long: `Inspect prints, for each ID, whether it is a valid UUIDv7 (36 characters, any
case, version 7, RFC 9562 variant), its canonical lowercase form and the
creation time it carries: Unix milliseconds, UTC and local time. The exit code
is 1 when any ID is invalid.`,
		Example: `  storh uuid inspect 0190a4f4-5c3b-7def-8123-456789abcdef`,
		Args:    args(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.inspectEach(args, func(s string) idInfo { return inspectUUID(s) }, "id", "is not a valid UUIDv7", "are not valid UUIDv7s")
		},
	}
}

func (a *app) uuidBoundsCmd() *cobra.Command {
	var from, until string
	cmd := &cobra.Command{
		Use:   "bounds --from T [--until T]",
		Short: "Print the smallest and largest UUIDv7 of a time window",
		Long: `Bounds prints the smallest possible UUIDv7 of the first millisecond of the
window and the largest of the last: every record created in the window has
an id between them, inclusive. --until defaults to now.`,
		Example: `  storh uuid bounds --from 2024-05-01T12:00:00Z --until 2024-05-01T12:59:59.999Z
  storh uuid bounds --from -1h`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return usagef("missing --from T: the start of the window")
			}
			now := a.now()
			ft, err := parseTime(from, now)
			if err != nil {
				return usagef("--from: %v", err)
			}
			ut := now
			if until != "" {
				if ut, err = parseTime(until, now); err != nil {
					return usagef("--until: %v", err)
				}
			}
			lo, hi := ft.UnixMilli(), ut.UnixMilli()
			if lo < 0 || hi > maxTimeMs {
				return usagef("the window must lie between 1970 and the year 10889 (UUIDv7's 48-bit milliseconds)")
			}
			if lo > hi {
				return usagef("--from %s is after --until %s", from, until)
			}
			min, max := uuidv7.MinForTimestampMs(lo), uuidv7.MaxForTimestampMs(hi)
			if a.jsonOut {
				return a.printJSON(map[string]any{"from": fmtTime(ft), "until": fmtTime(ut), "from_ms": lo, "until_ms": hi,
					"min": min.String(), "max": max.String()})
			}
			_, err = fmt.Fprintf(a.stdout, "min  %s  %s\nmax  %s  %s\n", min, fmtTime(ft), max, fmtTime(ut))
			return err
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "start of the window `T`, inclusive (RFC 3339, Unix ms, relative)")
	cmd.Flags().StringVar(&until, "until", "", "end of the window `T`, inclusive (default now)")
	return cmd
}

func (a *app) objectidCmd() *cobra.Command {
	cmd := groupCmd("objectid", "Make and inspect MongoDB ObjectIDs, and map them to UUIDv7",
		a.objectidNewCmd(), a.objectidInspectCmd(), a.objectidToUUIDCmd())
	cmd.Long = `MongoDB ObjectIDs are 12 bytes, written as 24 hex digits: 4 bytes of Unix
seconds, a 5-byte random value per process and a 3-byte counter. new makes a
batch as a driver would, inspect shows the parts and the UUIDv7 that
'storh import --mongo' gives the document, to-uuid prints just that UUIDv7.`
	cmd.Example = `  storh objectid new -n 3
  storh objectid inspect 65a1b2c3d4e5f60718293a4b
  storh get users $(storh objectid to-uuid 5e0be232153bcf7c10df5e93)`
	return cmd
}

func (a *app) objectidNewCmd() *cobra.Command {
	var n int
	cmd := &cobra.Command{
		Use:   "new",
		Short: "Print new ObjectIDs: one batch with a shared random value and consecutive counters",
		Long: `New prints one batch of N ObjectIDs (1 to 100, default 1), as a driver makes
them for a bulk insert: the current second, one random value, and
consecutive counters. With --json each line also carries the time.`,
		Example: `  storh objectid new
  storh objectid new -n 3
  storh --json objectid new -n 2`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 || n > objectid.MaxBatch {
				return usagef("-n %d: a batch is 1 to %d ObjectIDs", n, objectid.MaxBatch)
			}
			ids, err := objectid.NewBatch(n)
			if err != nil {
				return err
			}
			w := bufio.NewWriter(a.stdout)
			for _, id := range ids {
				if a.jsonOut {
					fmt.Fprintf(w, `{"objectid":"%s","time":"%s"}`+"\n", id.Hex(), id.Timestamp().UTC().Format(time.RFC3339))
				} else {
					fmt.Fprintln(w, id.Hex())
				}
			}
			return w.Flush()
		},
	}
	cmd.Flags().IntVarP(&n, "count", "n", 1, "how many `N` (1 to 100)")
	return cmd
}

type oidInfo struct {
	Input   string `json:"input"`
	Valid   bool   `json:"valid"`
	Hex     string `json:"objectid,omitempty"`
	Time    string `json:"time,omitempty"`
	Unix    uint32 `json:"unix,omitempty"`
	Random  uint64 `json:"random,omitempty"`
	Counter uint32 `json:"counter"`
	UUIDv7  string `json:"uuidv7,omitempty"`
	Error   string `json:"error,omitempty"`
}

func inspectObjectID(s string) oidInfo {
	info := oidInfo{Input: s}
	id, err := objectid.Parse(s)
	if err != nil {
		info.Error = strings.TrimPrefix(err.Error(), "objectid: ")
		return info
	}
	info.Valid, info.Hex = true, id.Hex()
	info.Time, info.Unix = id.Timestamp().UTC().Format(time.RFC3339), id.Seconds()
	info.Random, info.Counter = id.Random(), id.Counter()
	info.UUIDv7 = uuidv7.UUID(id.UUIDv7()).String()
	return info
}

func (i oidInfo) valid() (bool, string) { return i.Valid, i.Error }

func (i oidInfo) describe(w io.Writer) {
	fmt.Fprintf(w, "%s  valid ObjectID\n", i.Hex)
	fmt.Fprintf(w, "  time     %s (unix %d)\n", i.Time, i.Unix)
	fmt.Fprintf(w, "  random   0x%010x (%d)\n", i.Random, i.Random)
	fmt.Fprintf(w, "  counter  %d (0x%06x)\n", i.Counter, i.Counter)
	fmt.Fprintf(w, "  uuidv7   %s\n", i.UUIDv7)
}

func (a *app) objectidInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect HEX...",
		Short: "Show an ObjectID's time, random value and counter, and its UUIDv7",
		Long: `Inspect prints, for each 24-hex-digit ObjectID, the creation second it carries,
the 40-bit per-process random value, the 24-bit counter, and the UUIDv7 that
'storh import --mongo' gives the document. The exit code is 1 when any HEX is
invalid.`,
		Example: `  storh objectid inspect 65a1b2c3d4e5f60718293a4b
  storh --json objectid inspect 65a1b2c3d4e5f60718293a4b 5e0be232153bcf7c10df5e93`,
		Args: args(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.inspectEach(args, func(s string) idInfo { return inspectObjectID(s) }, "", "is not a valid ObjectID", "are not valid ObjectIDs")
		},
	}
}

func (a *app) objectidToUUIDCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "to-uuid HEX...",
		Short: "Print the UUIDv7 derived from each ObjectID (what import --mongo uses)",
		Long: `To-uuid maps each ObjectID to its UUIDv7: the same creation second (as whole
milliseconds), with the random value and counter kept, so the mapping is
deterministic and keeps ObjectID order. It is the id 'storh import --mongo'
gives the document with that _id.`,
		Example: `  storh objectid to-uuid 65a1b2c3d4e5f60718293a4b`,
		Args:    args(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := make([]objectid.ObjectID, len(args))
			for i, s := range args {
				id, err := objectid.Parse(s)
				if err != nil {
					return usagef("%q is not an ObjectID (24 hex digits): %s", s, strings.TrimPrefix(err.Error(), "objectid: "))
				}
				ids[i] = id
			}
			w := bufio.NewWriter(a.stdout)
			for _, id := range ids {
				u := uuidv7.UUID(id.UUIDv7())
				if a.jsonOut {
					fmt.Fprintf(w, `{"objectid":"%s","uuidv7":"%s"}`+"\n", id.Hex(), u)
				} else {
					fmt.Fprintln(w, u)
				}
			}
			return w.Flush()
		},
	}
}

// idInfo is what an inspect subcommand tells about one argument.
type idInfo interface {
	valid() (ok bool, why string)
	describe(w io.Writer) // the text form of a valid id
}

// inspectEach prints what inspect tells about each argument: its JSON with
// --json, else the description of a valid id or "ARG  invalid: WHY". Any
// invalid argument makes it fail with "N of M [noun(s)] is/are not …":
// isNot for one, areNot for more.
func (a *app) inspectEach(args []string, inspect func(string) idInfo, noun, isNot, areNot string) error {
	bad := 0
	w := bufio.NewWriter(a.stdout)
	for _, s := range args {
		info := inspect(s)
		ok, why := info.valid()
		if !ok {
			bad++
		}
		if a.jsonOut {
			if err := a.printJSON(info); err != nil {
				return err
			}
			continue
		}
		if !ok {
			fmt.Fprintf(w, "%s  invalid: %s\n", s, why)
			continue
		}
		info.describe(w)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if bad > 0 {
		of := fmt.Sprint(len(args))
		if noun != "" {
			of = strings.TrimPrefix(plural(int64(len(args)), noun), "1 ")
			if len(args) == 1 {
				of = "1 " + of
			}
		}
		verb := areNot
		if bad == 1 {
			verb = isNot
		}
		return fmt.Errorf("%d of %s %s", bad, of, verb)
	}
	return nil
}

// groupCmd makes a command that only holds subcommands.
func groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, RunE: groupRun}
	cmd.AddCommand(subs...)
	return cmd
}

// groupRun runs a command that only groups subcommands: help without
// arguments, a usage error for an unknown subcommand.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usagef("%s", msg)
}
