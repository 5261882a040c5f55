package storh

import (
	"context"
	"iter"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// FeedInfo describes a collection's change feed (WithChangeFeed).
type FeedInfo struct {
	// Keep is how many changes the feed keeps at least; 0: the
	// collection has no feed, and Changes yields ErrNotFound. A
	// collection not created yet has the feed its handle asks for
	// (WithChangeFeed), which its first write gives it.
	Keep int
	// LastSeq is the Seq of the collection's last change (0 before its
	// first), as Docs.LastSeq. Changes after it yields only changes to
	// come, and a reader that stops at it has read every change committed
	// before Feed returned.
	LastSeq uint64
}

// Feed reports whether the collection has a change feed, what it keeps
// and its last Seq (as LastSeq, which on PostgreSQL waits for the
// collection's commits in flight). A surface that offers the feed when
// there is one and falls back to Watch otherwise (storh tail -f, the web
// page's live tail) asks it first, since Changes of a collection with a
// feed and nothing new blocks.
func (d *Docs) Feed() (FeedInfo, error) { return d.coll.feedInfo() }

// Feed is Docs.Feed of a log.
func (l *Log) Feed() (FeedInfo, error) { return l.coll.feedInfo() }

func (c *coll) feedInfo() (FeedInfo, error) {
	var fi FeedInfo
	err := c.read(func(etx *engine.Tx, ec *engine.Coll) error {
		if ec == nil {
			// Created by its first write, with the feed this handle asks.
			fi.Keep = int(c.h.Feed)
			return nil
		}
		on, keep := etx.FeedOn(ec)
		if !on {
			return nil
		}
		fi = FeedInfo{Keep: int(keep)}
		return nil
	})
	if err == nil && fi.Keep > 0 {
		fi.LastSeq, err = c.settledLastSeq()
	}
	return fi, opErr(c.opName("feed"), c.name, "", -1, err)
}

// ChangeOf is one change of a typed collection's feed: a ChangeEvent
// whose record is decoded into T.
type ChangeOf[T any] struct {
	// Seq, Op and ID are the ChangeEvent's.
	Seq uint64
	Op  ChangeOp
	ID  uuidv7.UUID
	// Value is the record as the change committed it, decoded into T;
	// the zero T for OpDelete.
	Value T
}

// Item returns the change's record as an Item (meaningful for OpPut).
func (ch ChangeOf[T]) Item() Item[T] { return Item[T]{ID: ch.ID, Value: ch.Value} }

// Changes yields the collection's changes after after with their records
// decoded into T, as Docs.Changes yields them (same order, waiting and
// errors). A record that does not fit T is yielded with ErrTypeMismatch
// and its change's Seq, Op and ID, so a reader can note it and go on:
// the changes after it follow if the loop continues, as they do after a
// damaged record's (ErrCorrupt).
func (t typed[T]) Changes(ctx context.Context, after uint64) iter.Seq2[ChangeOf[T], error] {
	return func(yield func(ChangeOf[T], error) bool) {
		for ev, err := range t.c.changes(ctx, after) {
			ch := ChangeOf[T]{Seq: ev.Seq, Op: ev.Op, ID: ev.ID}
			if err != nil {
				if ev.Seq == 0 {
					yield(ChangeOf[T]{}, err)
					return
				}
				if !yield(ch, err) { // a change whose record is damaged
					return
				}
				continue
			}
			if ev.Op == OpPut {
				if err := t.tc.Decode(ev.Record.payload, &ch.Value); err != nil {
					var zero T
					ch.Value = zero
					if !yield(ch, opErr(t.c.opName("changes"), t.c.name, ev.ID.String(), -1, err)) {
						return
					}
					continue
				}
			}
			if !yield(ch, nil) {
				return
			}
		}
	}
}

// LastSeq returns the Seq of the collection's last change (see
// Docs.LastSeq).
func (t typed[T]) LastSeq() (uint64, error) { return t.c.lastSeq() }

// Feed reports the collection's change feed (see Docs.Feed).
func (t typed[T]) Feed() (FeedInfo, error) { return t.c.feedInfo() }

// Watch yields the records committed after from decoded into T, as
// Docs.Watch yields them: the light, in-memory way to follow new records
// (no deletes, nothing kept across restarts; Changes is the durable one).
// A record that does not fit T is yielded with ErrTypeMismatch and its
// id, and the watch goes on if the loop does.
func (t typed[T]) Watch(ctx context.Context, from uuidv7.UUID) iter.Seq2[Item[T], error] {
	return t.WatchReady(ctx, from, nil)
}

// WatchReady is Watch that calls ready once it has subscribed (see
// Docs.WatchReady): records committed after ready returns are delivered.
func (t typed[T]) WatchReady(ctx context.Context, from uuidv7.UUID, ready func()) iter.Seq2[Item[T], error] {
	return func(yield func(Item[T], error) bool) {
		for rec, err := range t.c.WatchReady(ctx, from, ready) {
			if err != nil {
				yield(Item[T]{}, err)
				return
			}
			it := Item[T]{ID: rec.ID}
			if err := t.tc.Decode(rec.payload, &it.Value); err != nil {
				if !yield(Item[T]{ID: rec.ID}, opErr(t.c.opName("watch"), t.c.name, rec.ID.String(), -1, err)) {
					return
				}
				continue
			}
			if !yield(it, nil) {
				return
			}
		}
	}
}
