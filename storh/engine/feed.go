package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The change feed. A collection with a feed (WithChangeFeed) records every
// put and delete of a record, in the transaction that makes it, under the
// next number of a counter of the collection:
//
//	<collection>/
//	    "f"/        the feed: 8-byte big-endian seq → op ‖ id ‖ stored value
//	    "m"/
//	        "feedSeq"   the last seq given (8-byte big-endian); on a store
//	                    that numbers at commit, the highest seq trimmed
//	        "f"/        the feed's settings: "keep" → how many changes to
//	                    keep, "numbered" → 1: the backend numbers them
//
// The stored value is the record's, header and checksum included (empty for
// a delete), so a change reads back checked as its record does. The
// settings live in a bucket made afresh when they change, never written in
// place: on a store whose buckets have an identity (kv.Identifier), a
// writer finds them in the DB's cache by that identity without a read, as
// it finds a schema.
//
// On a file the transaction gives the numbers itself (one writer at a
// time), and they have no gaps. On a store whose writers run at once
// (kv.Sequencer: PostgreSQL) the backend draws them at commit from a
// counter of its own (a sequence), in the statement that stores the
// changes, right before the COMMIT and without a lock, so writers of one
// collection commit side by side. A change can then become visible after
// one with a greater number, whose writer committed first, and a rolled
// back or lost commit leaves its numbers unused: a reader delivers in
// number order and stops at a gap until it is settled (kv.Settler: the
// writers that could still fill it have ended), so it never delivers a
// number after a greater one, nor misses one. Such a feed is "numbered"
// in its settings, and its counter key holds the trim floor instead, which
// tells a reader behind the trim (gaps make "the oldest kept" say
// nothing). A feed made before, on such a store, is numbered by the first
// writer of this build that records a change in it (numberFeed).
//
// A commit that records changes also trims the feed to keep, once it holds
// more than a slack beyond it (feedTrimSlack), deleting at most a bounded
// number of the oldest changes (feedTrimStep), so a lowered keep costs no
// single commit more than a step.
var (
	bucketFeed     = []byte("f")
	bucketFeedConf = []byte("f")
	keyFeedSeq     = []byte("feedSeq")
	keyFeedKeep    = []byte("keep")
	keyFeedNumbers = []byte("numbered")
	keyFeedID      = []byte("id")
)

// Operations a change records.
const (
	FeedPut    byte = 1
	FeedDelete byte = 2
)

// feedTrimStep bounds, with twice the changes a commit records, how many
// old changes one commit trims.
const feedTrimStep = 64

// feedTrimSlack is how many changes past keep a feed holds before a commit
// trims it: an eighth of keep, at most 4,096. A trim then deletes a step
// at once where it would delete as many changes as each commit adds, so
// most commits leave the oldest changes, and on PostgreSQL the floor row,
// untouched (a single Put rewrote a page of each, or a row, every time).
func feedTrimSlack(keep int64) int64 { return min(keep/8, 4096) }

// feedEntryHead is the op and the id in front of a change's stored value.
const feedEntryHead = 1 + 16

// FeedEntry is one change read back from a feed.
type FeedEntry struct {
	Seq     uint64
	Op      byte
	ID      uuidv7.UUID
	Payload []byte // the record's payload (nil for a delete); owned by the caller
}

// feedState is what a transaction knows of one collection's feed.
type feedState struct {
	read   bool
	bucket kv.Bucket    // nil: the collection has no feed
	seqr   kv.Sequencer // the backend numbers changes at commit; nil: this transaction does
	feedConf
	seq int64 // the last seq given, when seqr is nil (read on first use)
	n   int   // changes this transaction recorded
}

// feedConf are a feed's settings.
type feedConf struct {
	keep     int64
	numbered bool   // the backend numbers the changes (kv.Sequencer)
	id       uint64 // drawn when the feed is made; 0 for a feed made before ids
}

func seqKey(k *[8]byte, seq uint64) []byte {
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

// loadFeed finds c's feed, once per transaction.
func (t *Tx) loadFeed(c *Coll) {
	f := &c.feed
	if f.read {
		return
	}
	f.read = true
	f.bucket = c.root.Bucket(bucketFeed)
	if f.bucket == nil {
		return
	}
	f.feedConf = t.readFeedConf(c)
	if !t.ktx.Writable() {
		return
	}
	// Changes arrive in seq order, at the feed's end: pages packed full,
	// as the records' are, where bbolt's default split leaves each half
	// empty and a PutMany wrote twice the pages it needed.
	f.bucket.SetFillPercent(appendFillPercent)
	if s, ok := f.bucket.(kv.Sequencer); ok {
		f.seqr = s
	}
}

// readFeedConf reads c's feed settings, from the DB's cache by the
// settings bucket's identity where it has one.
func (t *Tx) readFeedConf(c *Coll) feedConf {
	conf := c.meta.Bucket(bucketFeedConf)
	if conf == nil {
		return feedConf{}
	}
	read := func() feedConf {
		return feedConf{keep: getInt(conf, keyFeedKeep), numbered: getInt(conf, keyFeedNumbers) == 1, id: uint64(getInt(conf, keyFeedID))}
	}
	ider, ok := conf.(kv.Identifier)
	if !ok || t.db == nil {
		return read()
	}
	if k, ok := t.db.feedConfs.Load(ider.ID()); ok {
		return k.(feedConf)
	}
	fc := read()
	if t.failure() == nil && fc.keep > 0 {
		t.db.feedConfs.Store(ider.ID(), fc)
	}
	return fc
}

// writeFeedConf stores c's feed settings in a settings bucket made afresh.
func (t *Tx) writeFeedConf(c *Coll, fc feedConf) error {
	if c.meta.Bucket(bucketFeedConf) != nil {
		if err := c.meta.DeleteBucket(bucketFeedConf); err != nil {
			return mapStoreErr(err)
		}
	}
	conf, err := c.meta.CreateBucket(bucketFeedConf)
	if err != nil {
		return mapStoreErr(err)
	}
	if err := putInt(conf, keyFeedKeep, fc.keep); err != nil {
		return err
	}
	if fc.numbered {
		if err := putInt(conf, keyFeedNumbers, 1); err != nil {
			return err
		}
	}
	if fc.id != 0 {
		if err := putInt(conf, keyFeedID, int64(fc.id)); err != nil {
			return err
		}
	}
	return nil
}

// numberFeed hands the numbering of c's feed to the backend (see
// kv.Sequencer), which goes on from the feed's counter, and raises the
// store's format: a storh from before would number from the counter
// still, which now holds the trim floor.
func (t *Tx) numberFeed(c *Coll) error {
	t.holdAlone(c)
	if err := c.feed.seqr.StartSequence(c.meta, keyFeedSeq); err != nil {
		return mapStoreErr(err)
	}
	fc := c.feed.feedConf
	fc.numbered = true
	if err := t.writeFeedConf(c, fc); err != nil {
		return err
	}
	c.feed.numbered = true
	return t.needFormat(formatNumbered)
}

// FeedID returns the identity of c's feed, drawn when it was made: a
// collection dropped and made again has a feed of another (0: c is nil,
// has no feed, or has one made before feeds had identities).
func (t *Tx) FeedID(c *Coll) uint64 {
	if c == nil {
		return 0
	}
	t.loadFeed(c)
	return c.feed.id
}

// FeedOn reports whether c has a change feed, and its keep.
func (t *Tx) FeedOn(c *Coll) (bool, int64) {
	t.loadFeed(c)
	return c.feed.bucket != nil, c.feed.keep
}

// feedEntry returns n bytes of their own for a change's key and value,
// which the backend keeps until the transaction ends. They are cut from
// blocks that double with each change a transaction records (up to 256
// KiB): a single Put makes one allocation, as it did, and a PutMany of
// 1000 a dozen rather than one per change.
func (t *Tx) feedEntry(n int) []byte {
	if cap(t.feedBuf)-len(t.feedBuf) < n {
		t.feedBuf = make([]byte, 0, max(n, min(2*cap(t.feedBuf), 256<<10)))
	}
	b := t.feedBuf[len(t.feedBuf) : len(t.feedBuf)+n : len(t.feedBuf)+n]
	t.feedBuf = t.feedBuf[:len(t.feedBuf)+n]
	return b
}

// recordChange records a put (stored: the record's stored value) or a
// delete (stored nil) of id in c's feed, if it has one. Every write of a
// record goes through here, whoever makes it.
func (t *Tx) recordChange(c *Coll, op byte, id uuidv7.UUID, stored []byte) error {
	t.loadFeed(c)
	f := &c.feed
	if f.bucket == nil {
		return nil
	}
	buf := t.feedEntry(8 + feedEntryHead + len(stored))
	key, v := buf[:8], buf[8:]
	v[0] = op
	copy(v[1:], id[:])
	copy(v[feedEntryHead:], stored)
	f.n++
	if t.fed == nil {
		t.fed = map[string]struct{}{}
	}
	t.fed[c.Name] = struct{}{}
	if op == FeedDelete && t.shared != nil {
		// Puts announce their ids already (noteChange): readers of the
		// feed in other processes wake on the commit's notice.
		c.key = id
		t.shared.Announce(c.Name, c.key[:])
	}
	if f.seqr != nil {
		if !f.numbered {
			if err := t.numberFeed(c); err != nil {
				return err
			}
		}
		return mapStoreErr(f.seqr.Sequence(c.meta, keyFeedSeq, v))
	}
	if f.seq == 0 {
		f.seq = c.getMeta(keyFeedSeq)
	}
	f.seq++
	binary.BigEndian.PutUint64(key, uint64(f.seq))
	return mapStoreErr(f.bucket.Put(key, v))
}

// flushFeed writes the counter of the changes this transaction numbered
// and trims the feed by a step; a backend that numbers them at commit is
// told how to trim instead.
func (c *Coll) flushFeed() error {
	f := &c.feed
	if f.bucket == nil || f.n == 0 {
		return nil
	}
	step := feedTrimStep + 2*f.n
	slack := feedTrimSlack(f.keep)
	if f.seqr != nil {
		return mapStoreErr(f.seqr.TrimSequence(f.keep, slack, step))
	}
	if err := c.putMeta(keyFeedSeq, f.seq); err != nil {
		return err
	}
	bound := f.seq - f.keep
	if bound <= slack {
		return nil
	}
	// Deleted through the one cursor that walks them: a Delete of the
	// bucket seeks afresh with a cursor of its own, and those cursors were
	// most of a PutMany's allocations.
	cur := f.bucket.Cursor()
	k, _ := cur.First()
	if len(k) == 8 && int64(binary.BigEndian.Uint64(k))-1 >= bound-slack {
		return nil // no more than slack changes past keep
	}
	for range step {
		if len(k) != 8 || int64(binary.BigEndian.Uint64(k)) > bound {
			break
		}
		if err := cur.Delete(); err != nil {
			return mapStoreErr(err)
		}
		k, _ = cur.Next()
	}
	return nil
}

// EnsureFeed gives c a change feed that keeps keep changes, or sets the
// keep of the one it has: the latest handle opened with WithChangeFeed
// decides it for every writer, as the settings are stored with the
// collection. A feed turned on starts at the next number of the counter
// (1 for a collection that never had one). Nothing is written when the
// feed is already so.
func (t *Tx) EnsureFeed(c *Coll, keep int64) error {
	if keep <= 0 {
		return nil
	}
	on, has := t.FeedOn(c)
	if err := t.failure(); err != nil {
		return err
	}
	if on && has == keep {
		return nil
	}
	if !t.ktx.Writable() {
		return fmt.Errorf("%w: collection %q needs its change feed set to keep %d, and a read-only database cannot", errs.ErrReadOnly, c.Name, keep)
	}
	t.holdAlone(c)
	fc := c.feed.feedConf
	fc.keep = keep
	if !on {
		// A reader tells this feed from one of a collection dropped and
		// made again under the same name by it.
		fc.id = rand.Uint64() | 1
		b, err := c.root.CreateBucket(bucketFeed)
		if err != nil {
			return mapStoreErr(err)
		}
		if c.meta.Get(keyFeedSeq) == nil {
			if err := putInt(c.meta, keyFeedSeq, 0); err != nil {
				return err
			}
		}
		if err := t.needFormat(formatFeed); err != nil {
			return err
		}
		if s, ok := b.(kv.Sequencer); ok {
			if err := s.StartSequence(c.meta, keyFeedSeq); err != nil {
				return mapStoreErr(err)
			}
			if err := t.needFormat(formatNumbered); err != nil {
				return err
			}
			fc.numbered = true
		}
	}
	if err := t.writeFeedConf(c, fc); err != nil {
		return err
	}
	c.feed = feedState{}
	return nil
}

// EnsureFeed is Tx.EnsureFeed of h's collection in a transaction of its
// own, when h asks for a feed the collection does not have as asked. A
// collection not created yet is created now, with its feed: the feed is
// the collection's, so a write through another handle (one of a
// transaction, another process's) records its changes too.
func (db *DB) EnsureFeed(h Handle) error {
	if h.Feed <= 0 {
		return nil
	}
	same := false
	err := db.ViewSafe(func(tx *Tx) error {
		c, err := tx.Use(h, false)
		if err != nil || c == nil {
			same = false
			return err
		}
		on, keep := tx.FeedOn(c)
		same = on && keep == h.Feed
		return tx.failure()
	})
	if err != nil || same {
		return err
	}
	if db.opts.ReadOnly {
		return fmt.Errorf("%w: collection %q needs its change feed set to keep %d, and a read-only database cannot", errs.ErrReadOnly, h.Name, h.Feed)
	}
	return db.UpdateSafe(func(tx *Tx) error {
		c, err := tx.Use(h, true)
		if err != nil {
			return err
		}
		return tx.EnsureFeed(c, h.Feed)
	})
}

// LastSeq returns the seq of c's last change (0 for none, or no feed).
// On a numbered feed that is the greatest seq at or below settled that
// the feed holds (the floor, when it holds none): given a settled seq
// (SettleFeed, in a transaction begun before this one), no change at or
// below it can commit after, so a reader that starts from the answer
// misses nothing committed later, and a reader that stops at it has read
// every change committed before.
func (t *Tx) LastSeq(c *Coll, settled uint64) (uint64, error) {
	if c == nil {
		return 0, nil
	}
	t.loadFeed(c)
	n := uint64(c.getMeta(keyFeedSeq))
	if !c.feed.numbered {
		return n, t.failure()
	}
	cur := c.feed.bucket.Cursor()
	var k []byte
	if settled == math.MaxUint64 {
		k, _ = cur.Last()
	} else {
		var k8 [8]byte
		if k, _ = cur.Seek(seqKey(&k8, settled+1)); k != nil {
			k, _ = cur.Prev()
		} else {
			k, _ = cur.Last()
		}
	}
	if len(k) == 8 && binary.BigEndian.Uint64(k) > n {
		n = binary.BigEndian.Uint64(k)
	}
	return n, t.failure()
}

// SettleFeed waits until no writer can still commit a change of c's
// numbered feed at or below the seq it returns (kv.Settler), which is the
// greatest given then. A writable transaction, which may hold the
// collection itself, cannot wait for its writers: it returns
// math.MaxUint64 (everything it sees is all it can know). On a feed the
// transaction numbers itself every change is visible as it is numbered:
// it returns the last given.
func (t *Tx) SettleFeed(ctx context.Context, c *Coll) (uint64, error) {
	if c == nil {
		return 0, nil
	}
	t.loadFeed(c)
	s, ok := c.feed.bucket.(kv.Settler)
	switch {
	case !c.feed.numbered || !ok:
		n := c.getMeta(keyFeedSeq)
		return uint64(n), t.failure()
	case t.ktx.Writable():
		return math.MaxUint64, t.failure()
	}
	if err := t.failure(); err != nil {
		return 0, err
	}
	n, err := s.SettleSequence(ctx, c.meta, keyFeedSeq)
	return n, mapStoreErr(err)
}

// ReadChanges reads up to max changes of c's feed after seq after, in seq
// order. It fails with ErrChangesTrimmed when changes after after are no
// longer kept, and with ErrNotFound when c has no feed. A nil c (a
// collection not created yet) has none yet.
//
// On a numbered feed it stops at a gap, a seq missing before one it
// found, unless the gap is at or below settled (a seq SettleFeed
// returned: what is missing there was trimmed or never committed), and
// reports it: the reader settles it, and reads again.
func (t *Tx) ReadChanges(c *Coll, after, settled uint64, max int) (out []FeedEntry, gap bool, err error) {
	if c == nil {
		return nil, false, nil
	}
	t.loadFeed(c)
	if c.feed.bucket == nil {
		if err := t.failure(); err != nil {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("%w: collection %q has no change feed; open it with WithChangeFeed", errs.ErrNotFound, c.Name)
	}
	cur := c.feed.bucket.Cursor()
	if ra, ok := cur.(kv.ReadAhead); ok {
		ra.ReadAhead(max + 1)
	}
	var k8 [8]byte
	if c.feed.numbered {
		if floor := uint64(c.getMeta(keyFeedSeq)); after < floor {
			if err := t.failure(); err != nil {
				return nil, false, err
			}
			return nil, false, fmt.Errorf("%w: changes after %d are gone; the feed is trimmed up to %d", errs.ErrChangesTrimmed, after, floor)
		}
	} else if k, _ := cur.First(); k != nil && binary.BigEndian.Uint64(k) > after+1 {
		// The oldest change kept: past after+1, the changes between were
		// trimmed (the numbers have no gaps: a rolled-back transaction's
		// numbers are rolled back with it).
		if err := t.failure(); err != nil {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("%w: changes after %d are gone; the oldest kept is %d", errs.ErrChangesTrimmed, after, binary.BigEndian.Uint64(k))
	}
	prev := after
	for k, v := cur.Seek(seqKey(&k8, after+1)); k != nil && len(out) < max; k, v = cur.Next() {
		e, err := decodeFeedEntry(k, v)
		if err != nil {
			return out, false, fmt.Errorf("collection %q, change %x: %w", c.Name, k, err)
		}
		if c.feed.numbered && e.Seq != prev+1 && e.Seq > settled {
			gap = true
			break
		}
		out = append(out, e)
		prev = e.Seq
	}
	return out, gap, t.failure()
}

// decodeFeedEntry checks and decodes one change.
func decodeFeedEntry(k, v []byte) (FeedEntry, error) {
	if len(k) != 8 || len(v) < feedEntryHead || (v[0] != FeedPut && v[0] != FeedDelete) {
		return FeedEntry{}, fmt.Errorf("%w: a malformed change (%d-byte key, %d-byte value)", errs.ErrCorrupt, len(k), len(v))
	}
	e := FeedEntry{Seq: binary.BigEndian.Uint64(k), Op: v[0]}
	copy(e.ID[:], v[1:feedEntryHead])
	if e.Op == FeedDelete {
		if len(v) != feedEntryHead {
			return FeedEntry{}, fmt.Errorf("%w: a delete's change holds a value", errs.ErrCorrupt)
		}
		return e, nil
	}
	payload, err := Payload(e.ID[:], v[feedEntryHead:])
	if err != nil {
		return FeedEntry{}, err
	}
	e.Payload = append([]byte(nil), payload...)
	return e, nil
}

// FeedSignal returns a channel closed by the next commit of this process
// that records changes of collection name: a reader takes it before it
// reads, so a commit between its read and its wait is never lost.
func (db *DB) FeedSignal(name string) <-chan struct{} { return db.feedSignals.wait(name) }

// FeedFollower wakes, on a store other processes write to (kv.Shared),
// the readers of one collection's feed in this process on those
// processes' commits: their writers announce each change, and the DB's
// listener closes the channel of FeedSignal when it hears one. On a file
// it does nothing: every commit is this process's.
type FeedFollower struct {
	db   *DB
	name string
	l    kv.Listener
}

// FollowFeed starts a FeedFollower of collection name. Start it before
// the first read: a commit announced after it returns wakes the reader,
// and one before is in every snapshot taken after. Stop it.
func (db *DB) FollowFeed(name string) (*FeedFollower, error) {
	f := &FeedFollower{db: db, name: name}
	return f, f.follow()
}

func (f *FeedFollower) follow() error {
	l, err := f.db.listen()
	if err != nil || l == nil {
		return err
	}
	f.db.feedFollowers.Add(1)
	if err := l.Watch(f.name); err != nil {
		f.db.feedFollowers.Add(-1)
		return fmt.Errorf("%w: %w", errs.ErrWatchLost, mapStoreErr(err))
	}
	f.l = l
	return nil
}

// Check makes sure the follower still hears other processes' commits: a
// listener that failed (a lost connection) is replaced by a new one,
// watched before the reader's next read, which then finds whatever the
// old one missed.
func (f *FeedFollower) Check() error {
	if f.l == nil {
		return nil
	}
	f.db.watch.listenMu.Lock()
	current := f.db.watch.listener == f.l
	f.db.watch.listenMu.Unlock()
	if current {
		return nil
	}
	f.Stop()
	return f.follow()
}

// Stop ends the follower.
func (f *FeedFollower) Stop() {
	if f.l != nil {
		f.l.Unwatch(f.name)
		f.db.feedFollowers.Add(-1)
		f.l = nil
	}
}

// heardFeed wakes the readers of a feed of topic, whose writer announced
// a commit there, and all of them when the listener failed (topic "").
func (db *DB) heardFeed(topic string) {
	if db.feedFollowers.Load() == 0 {
		return
	}
	if topic == "" {
		db.feedSignals.wakeAll()
		return
	}
	db.feedSignals.wake(topic)
}
