package main

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// followLockWait is how long one poll of tail -f waits for the lock: short,
// so a writer holding the file only delays the poll, and the next tries.
const followLockWait = 100 * time.Millisecond

func (a *app) tailCmd() *cobra.Command {
	var n int
	var follow bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "tail COLL",
		Short: "Print the newest records; with -f, keep printing new ones",
		Long: `Tail prints the last N records of COLL, oldest of them first. With -f it then
polls for records with ids after the last one printed and prints them as they
come, until interrupted (Ctrl-C, exit code 0).

bbolt locks the file: a process that has the database open for writing keeps
every other process out, readers included. So -f does not hold the database
open: each poll opens it read-only for a moment, reads, and closes it. Records
written by short-lived writers (storh put, storh import, a program that opens,
writes and closes) show up at the next poll; while a long-running program
keeps the file open, polls wait and new records show up once it closes it.
Started while such a program runs, -f waits too (it says so once), and
prints the last N records once it can open the file. Ids are compared, not times: a writer whose clock runs behind may write ids
below the last one printed, and those are not shown.

On PostgreSQL (--db postgres://…) nothing locks readers out: -f keeps the
store open and polls it every --interval, and commits of any process show
up at the next poll.

With --url (or $STORH_URL), tail reads a running program's storh/web handler
or a storh serve instead: -f then follows the server's live tail, which
sends each record as it commits, and --interval is the wait before it
reconnects after the stream drops.

A collection with a change feed (a program opened it with
storh.WithChangeFeed) is followed through its feed instead, on PostgreSQL
and with --url: no polling, and every put shows, in commit order, a Docs
record written again and records with older ids included, across dropped
connections. Its deletes show with 'storh changes -f'. On a file, -f polls
by id as above.`,
		Example: `  storh tail events
  storh tail events -n 50
  storh tail events -f --interval 250ms
  storh tail events -f --url http://127.0.0.1:7070`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 0 {
				return usagef("-n %d: must be 0 or more", n)
			}
			if interval <= 0 {
				return usagef("--interval %v: must be positive", interval)
			}
			// A change feed, followed over HTTP or on PostgreSQL, starts
			// at the Seq it had before the last records were read.
			var feedOn bool
			var tf tailFeed
			if follow {
				var err error
				if feedOn, tf.from, err = a.feedSeq(args[0]); err != nil {
					return err
				}
			}
			var read func() error
			if feedOn {
				read = func() (err error) {
					_, tf.until, err = a.feedSeq(args[0])
					return err
				}
			}
			s, last, err := a.tailLastThen(args[0], n, read)
			if follow && errors.Is(err, storh.ErrLocked) {
				s, last, err = a.tailLastWhenFree(args[0], n, interval)
			}
			if err != nil || !follow || s == nil {
				return err
			}
			if feedOn {
				tf.last = last
				return a.followFeed(args[0], tf, interval, a.newPrinter())
			}
			return s.follow(a.ctx, args[0], last, interval, a.newPrinter())
		},
	}
	cmd.Flags().IntVarP(&n, "lines", "n", 10, "print the last `N` records")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new records until interrupted")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "with -f, how often to look for new records")
	return cmd
}

// tailLast prints the last n records and returns the newest id of the
// collection (zero when empty), where following starts. The store is
// closed on return: -f does not hold the database open.
func (a *app) tailLast(name string, n int) (store, uuidv7.UUID, error) {
	return a.tailLastThen(name, n, nil)
}

// tailLastThen is tailLast that calls read, if not nil, once it has read
// the records and before it prints them: tail -f on a change feed takes
// the feed's Seq there, so that nothing it prints is committed after it.
func (a *app) tailLastThen(name string, n int, read func() error) (store, uuidv7.UUID, error) {
	s, cs, err := a.openStoreReader(name)
	if err != nil {
		return nil, uuidv7.UUID{}, err
	}
	defer s.close()
	if n == 0 {
		if read != nil {
			err = read()
		}
		return s, cs.LastID, err
	}
	recs, err := s.last(a.ctx, cs.Name, n)
	if err == nil && read != nil {
		err = read()
	}
	if err != nil {
		return nil, uuidv7.UUID{}, err
	}
	p := a.newPrinter()
	for _, rec := range recs {
		if err := p.printLine(rec.Line); err != nil {
			return nil, uuidv7.UUID{}, err
		}
	}
	last := cs.LastID
	if len(recs) > 0 && recs[len(recs)-1].ID.Compare(last) > 0 {
		last = recs[len(recs)-1].ID
	}
	return s, last, p.flush()
}

// tailLastWhenFree is tailLast for tail -f started while a writer holds
// the file: it says once that it waits, tries again each interval, and
// prints the last n records once the file can be opened. Interrupted while
// it waits, it returns no store and no error: tail -f ends there, exit 0.
func (a *app) tailLastWhenFree(name string, n int, interval time.Duration) (store, uuidv7.UUID, error) {
	a.diag(lockedWait, a.dbPath)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return nil, uuidv7.UUID{}, nil
		case <-t.C:
		}
		s, last, err := a.tailLast(name, n)
		if !errors.Is(err, storh.ErrLocked) {
			return s, last, err
		}
	}
}

// lockedWait is what tail -f says, once, while it waits for the file. Its
// opens are read-only, which only an exclusive lock keeps out: the holder
// is a writer.
const lockedWait = "storh: %s is locked by a writer; waiting for it to close the file"

// last gives the last n records, oldest of them first.
func (s *localStore) last(ctx context.Context, coll string, n int) ([]recLine, error) {
	r, err := s.reader(coll)
	if err != nil {
		return nil, err
	}
	var recs []recLine
	for rec, err := range r.Stream(query.All().Reverse().Limit(n)) {
		var line []byte
		if err == nil {
			line, err = recordLine(rec)
		}
		if err != nil {
			return nil, err
		}
		recs = append(recs, recLine{ID: rec.ID, Line: line})
	}
	slices.Reverse(recs)
	return recs, nil
}

// follow polls for records after last until the context ends. It does not
// use s.db, closed by tailLast: on a file each poll opens it for a moment;
// on PostgreSQL, where no lock keeps writers out, it opens the store once
// and polls that.
func (s *localStore) follow(ctx context.Context, name string, last uuidv7.UUID, interval time.Duration, p *recordPrinter) error {
	a := s.a
	poll := a.poll
	if isURL(a.dbPath) {
		db, err := a.open(false)
		if err != nil {
			return err
		}
		defer db.Close()
		poll = func(ctx context.Context, name string, last uuidv7.UUID, p *recordPrinter) (uuidv7.UUID, error) {
			return a.pollDB(ctx, db, name, last, p)
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	toldLocked := false
	for {
		select {
		case <-ctx.Done():
			return p.flush()
		case <-t.C:
		}
		next, err := poll(ctx, name, last, p)
		if errors.Is(err, storh.ErrLocked) {
			if !toldLocked {
				a.diag(lockedWait, a.dbPath)
				toldLocked = true
			}
			continue
		}
		if err != nil {
			p.flush()
			return err
		}
		toldLocked = false
		last = next
		if err := p.flush(); err != nil {
			return err
		}
	}
}

// poll opens the database file briefly and prints what is new after last.
func (a *app) poll(ctx context.Context, name string, last uuidv7.UUID, p *recordPrinter) (uuidv7.UUID, error) {
	db, err := storh.Open(a.dbPath, storh.WithReadOnly(), storh.WithLockTimeout(min(followLockWait, a.timeout)))
	if err != nil {
		return last, err
	}
	defer db.Close()
	return a.pollDB(ctx, db, name, last, p)
}

// pollDB prints what db holds after last in the collection name.
func (a *app) pollDB(ctx context.Context, db *storh.DB, name string, last uuidv7.UUID, p *recordPrinter) (uuidv7.UUID, error) {
	r, _, err := a.reader(db, name)
	if err != nil {
		return last, err
	}
	q := query.All()
	if !last.IsZero() {
		q = q.After(last)
	}
	for rec, err := range r.Stream(q) {
		if err != nil {
			return last, err
		}
		if err := p.print(rec); err != nil {
			return last, err
		}
		last = rec.ID
		if ctx.Err() != nil {
			break
		}
	}
	return last, nil
}
