package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

func (a *app) changesCmd() *cobra.Command {
	var after uint64
	var follow, asJSON bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "changes COLL",
		Short: "Print a collection's change feed: puts and deletes, in commit order",
		Long: `Changes prints the changes of COLL's change feed (a collection a program opened
with storh.WithChangeFeed) after the change numbered --after, in commit order:
one line per change with its Seq, put or delete, the record's id and, for a
put, the record's data as JSON, separated by tabs. --json prints each change
as the HTTP API sends it instead, {"seq":…,"op":…,"id":…,"time":…,"data":…}.

With -f it then keeps printing changes as they commit, until interrupted
(Ctrl-C, exit code 0); without --after it starts from the last change, so
only new ones show. Note the Seq of the last change handled: --after with
it goes on from there, missing and repeating nothing. --after 0 starts from
the first change; once the feed has trimmed changes after --after (it keeps
only the last ones), changes fails and says so.

On PostgreSQL (--db postgres://…) -f keeps the store open and is woken by
the commits of any process. On a file, bbolt keeps other processes out while
it is open, so -f opens it read-only for a moment each --interval, as tail -f
does. With --url (or $STORH_URL) changes reads a running program's storh/web
handler or a storh serve, and -f follows its changes stream, connecting again
after the last Seq when the stream drops.`,
		Example: `  storh changes events --after 0
  storh changes events -f
  storh changes events --after 4182 -f --json
  storh changes events -f --url http://127.0.0.1:7070`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hasAfter := cmd.Flags().Changed("after")
			if !hasAfter && !follow {
				return usagef("give --after N (0: from the first change), or -f to follow the changes from now on")
			}
			if interval <= 0 {
				return usagef("--interval %v: must be positive", interval)
			}
			var from *uint64
			if hasAfter {
				from = &after
			}
			p := &changePrinter{p: a.newPrinter(), json: asJSON}
			if a.url != "" {
				return a.changesHTTP(args[0], from, follow, interval, p)
			}
			return a.changesLocal(args[0], from, follow, interval, p)
		},
	}
	cmd.Flags().Uint64Var(&after, "after", 0, "print the changes after the one numbered `SEQ` (0: from the first)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing changes as they commit until interrupted")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each change as a JSON object")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "with -f, how often to look on a file; over HTTP, the wait before connecting again")
	return cmd
}

// changePrinter prints changes, as tab-separated lines or as JSON.
type changePrinter struct {
	p    *recordPrinter
	json bool
	buf  []byte
}

// print prints a change whose JSON line (the API's, with a newline) is
// line and whose record data, for a put, is data.
func (cp *changePrinter) print(seq uint64, op, id string, data, line []byte) error {
	if cp.json {
		return cp.p.printLine(line)
	}
	b := strconv.AppendUint(cp.buf[:0], seq, 10)
	b = append(b, '\t')
	b = append(b, op...)
	b = append(b, '\t')
	b = append(b, id...)
	if op == "put" {
		b = append(b, '\t')
		b = append(b, data...)
	}
	cp.buf = append(b, '\n')
	return cp.p.printLine(cp.buf)
}

// printEvent prints a change read from a database.
func (cp *changePrinter) printEvent(ev storh.ChangeEvent) error {
	line, err := web.AppendChange(nil, ev)
	if err != nil {
		return fmt.Errorf("change %d, record %s: %w", ev.Seq, ev.ID, err)
	}
	var data []byte
	if ev.Op == storh.OpPut && !cp.json {
		if data, err = jsonl.AppendPayload(nil, ev.Record.Raw()); err != nil {
			return fmt.Errorf("change %d, record %s: %w", ev.Seq, ev.ID, err)
		}
	}
	return cp.print(ev.Seq, ev.Op.String(), ev.ID.String(), data, line)
}

// feeder is a collection with a change feed's methods: *storh.Docs and
// *storh.Log.
type feeder interface {
	Feed() (storh.FeedInfo, error)
	Changes(ctx context.Context, after uint64) iter.Seq2[storh.ChangeEvent, error]
}

// openFeed opens db's collection name, which must have a change feed.
func (a *app) openFeed(db *storh.DB, name string) (feeder, storh.FeedInfo, error) {
	r, _, err := a.reader(db, name)
	if err != nil {
		return nil, storh.FeedInfo{}, err
	}
	f := r.(feeder)
	fi, err := f.Feed()
	if err == nil && fi.Keep == 0 {
		err = noFeed(name)
	}
	return f, fi, err
}

func noFeed(name string) error {
	return fmt.Errorf("collection %s has no change feed: a program turns one on by opening it with storh.WithChangeFeed(keep); 'storh tail -f %s' follows its new records", qname(name), shellQuote(name))
}

// changesUpTo prints f's changes after after up to until (which the feed
// has reached: none of them is waited for) and returns the last Seq
// printed.
func changesUpTo(ctx context.Context, f feeder, after, until uint64, p *changePrinter) (uint64, error) {
	if after >= until {
		return after, nil
	}
	for ev, err := range f.Changes(ctx, after) {
		if err != nil {
			return after, err
		}
		if err := p.printEvent(ev); err != nil {
			return after, err
		}
		after = ev.Seq
		if after >= until {
			break
		}
	}
	return after, nil
}

// changesLocal prints the changes of a database file or PostgreSQL store.
func (a *app) changesLocal(name string, from *uint64, follow bool, interval time.Duration, p *changePrinter) error {
	db, err := a.open(false)
	if err != nil {
		return err
	}
	f, fi, err := a.openFeed(db, name)
	if err != nil {
		db.Close()
		return err
	}
	last := fi.LastSeq
	if from != nil {
		if *from > fi.LastSeq {
			db.Close()
			return usagef("--after %d: the feed of %s has come only to %d", *from, qname(name), fi.LastSeq)
		}
		last, err = changesUpTo(a.ctx, f, *from, fi.LastSeq, p)
		if ferr := p.p.flush(); err == nil {
			err = ferr
		}
	}
	if err != nil || !follow {
		db.Close()
		return err
	}
	if isURL(a.dbPath) {
		// PostgreSQL: no lock keeps writers out, and Changes is woken by
		// any process's commits.
		defer db.Close()
		for ev, err := range f.Changes(a.ctx, last) {
			if err != nil {
				if a.ctx.Err() != nil {
					return nil
				}
				return err
			}
			if err := p.printEvent(ev); err != nil {
				return err
			}
			if err := p.p.flush(); err != nil {
				return err
			}
		}
		return nil
	}
	// A file: open it read-only for a moment each interval.
	db.Close()
	t := time.NewTicker(interval)
	defer t.Stop()
	toldLocked := false
	for {
		select {
		case <-a.ctx.Done():
			return nil
		case <-t.C:
		}
		next, err := a.pollChanges(name, last, p)
		if errors.Is(err, storh.ErrLocked) {
			if !toldLocked {
				a.diag(lockedWait, a.dbPath)
				toldLocked = true
			}
			continue
		}
		if ferr := p.p.flush(); err == nil {
			err = ferr
		}
		if err != nil {
			return err
		}
		toldLocked = false
		last = next
	}
}

// pollChanges opens the database file briefly and prints the changes
// after last.
func (a *app) pollChanges(name string, last uint64, p *changePrinter) (uint64, error) {
	db, err := storh.Open(a.dbPath, storh.WithReadOnly(), storh.WithLockTimeout(min(followLockWait, a.timeout)))
	if err != nil {
		return last, err
	}
	defer db.Close()
	f, fi, err := a.openFeed(db, name)
	if err != nil {
		return last, err
	}
	return changesUpTo(a.ctx, f, last, fi.LastSeq, p)
}

// changesHTTP prints the changes of the server of --url, connecting again
// after the last Seq when a followed stream drops.
func (a *app) changesHTTP(name string, from *uint64, follow bool, interval time.Duration, p *changePrinter) error {
	s := a.newHTTPStore()
	if s.err != nil {
		return usagef("--url %s: %v", a.url, s.err)
	}
	defer s.close()
	var after string
	if from != nil {
		after = strconv.FormatUint(*from, 10)
	} else {
		// From now: the last Seq, so that a connection that drops before
		// the first change resumes from there too.
		c, err := s.client.Collection(a.ctx, name)
		if err != nil {
			return s.fail(a.ctx, err)
		}
		if c.FeedKeep == 0 {
			return noFeed(name)
		}
		after = strconv.FormatUint(c.LastSeq, 10)
	}
	return s.reconnecting(a.ctx, "the changes", follow, interval, p.p.flush, func() (bool, error) {
		return s.client.Changes(a.ctx, name, after, follow, func(ch web.Change, line json.RawMessage, more bool) error {
			if err := p.print(ch.Seq, ch.Op, ch.ID, ch.Data, line); err != nil {
				return err
			}
			after = strconv.FormatUint(ch.Seq, 10)
			if !more {
				return p.p.flush()
			}
			return nil
		})
	})
}

// tailFeed is where tail -f follows a collection's change feed: the Seq
// its feed had before tail read its last records, and the id of the last
// it printed. Changes up to the Seq the feed had after that read (until)
// may hold what tail printed: their records with ids up to last are left
// out.
type tailFeed struct {
	from, until uint64
	last        uuidv7.UUID
}

// feedSeq reads the collection's feed: on (it has one) and its last Seq.
// Over HTTP from the collection's statistics; on PostgreSQL from the
// store. A file is not asked: tail -f polls it by id, as it cannot hold
// it open.
func (a *app) feedSeq(name string) (on bool, seq uint64, err error) {
	if a.url != "" {
		s := a.newHTTPStore()
		if s.err != nil {
			return false, 0, usagef("--url %s: %v", a.url, s.err)
		}
		defer s.close()
		c, err := s.client.Collection(a.ctx, name)
		if err != nil {
			return false, 0, s.fail(a.ctx, err)
		}
		return c.FeedKeep > 0, c.LastSeq, nil
	}
	if !isURL(a.dbPath) {
		return false, 0, nil
	}
	db, err := a.open(false)
	if err != nil {
		return false, 0, err
	}
	defer db.Close()
	r, _, err := a.reader(db, name)
	if err != nil {
		return false, 0, err
	}
	fi, err := r.(feeder).Feed()
	return fi.Keep > 0, fi.LastSeq, err
}

// followFeed is tail -f on a collection with a change feed: it prints the
// record of each put after tf.from as it commits (rewrites of a Docs
// record and records with older ids included; deletes are changes'
// business), until interrupted.
func (a *app) followFeed(name string, tf tailFeed, interval time.Duration, p *recordPrinter) error {
	skip := func(seq uint64, id uuidv7.UUID) bool { return seq <= tf.until && id.Compare(tf.last) <= 0 }
	if a.url != "" {
		s := a.newHTTPStore()
		defer s.close()
		after := tf.from
		return s.reconnecting(a.ctx, "the changes", true, interval, p.flush, func() (bool, error) {
			return s.client.Changes(a.ctx, name, strconv.FormatUint(after, 10), true, func(ch web.Change, _ json.RawMessage, more bool) error {
				after = ch.Seq
				id, err := uuidv7.Parse(ch.ID)
				if err != nil {
					return fmt.Errorf("%w: change %d: %v", web.ErrAnswer, ch.Seq, err)
				}
				if ch.Op != "put" || skip(ch.Seq, id) {
					return nil
				}
				line := make([]byte, 0, len(ch.ID)+len(ch.Time)+len(ch.Data)+32)
				line = append(line, `{"id":"`...)
				line = append(line, ch.ID...)
				line = append(line, `","time":"`...)
				line = append(line, ch.Time...)
				line = append(line, `","data":`...)
				line = append(line, ch.Data...)
				line = append(line, "}\n"...)
				if err := p.printLine(line); err != nil {
					return err
				}
				if !more {
					return p.flush()
				}
				return nil
			})
		})
	}
	db, err := a.open(false)
	if err != nil {
		return err
	}
	defer db.Close()
	f, _, err := a.openFeed(db, name)
	if err != nil {
		return err
	}
	for ev, err := range f.Changes(a.ctx, tf.from) {
		if err != nil {
			if a.ctx.Err() != nil {
				return p.flush()
			}
			p.flush()
			return err
		}
		if ev.Op != storh.OpPut || skip(ev.Seq, ev.ID) {
			continue
		}
		if err := p.print(ev.Record); err != nil {
			return err
		}
		if err := p.flush(); err != nil {
			return err
		}
	}
	return nil
}
