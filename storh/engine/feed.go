package engine

import (
	"encoding/binary"
	"fmt"

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
//	        "feedSeq"   the last seq given (8-byte big-endian)
//	        "f"/        the feed's settings: "keep" → how many changes to keep
//
// The stored value is the record's, header and checksum included (empty for
// a delete), so a change reads back checked as its record does. The
// settings live in a bucket made afresh when they change, never written in
// place: on a store whose buckets have an identity (kv.Identifier), a
// writer finds them in the DB's cache by that identity without a read, as
// it finds a schema.
//
// On a file the transaction gives the numbers itself (one writer at a
// time). On a store whose writers run at once (kv.Sequencer: PostgreSQL)
// the backend gives them at commit, from the counter row, in the statement
// that stores the changes and right before the COMMIT: the counter's row
// lock is held only for the end of the commit, writers of one collection
// are not serialised before it, and changes become visible in the order
// of their numbers.
//
// Each commit that records changes also trims the feed to keep, deleting at
// most a bounded number of the oldest changes beyond it (feedTrimStep), so
// a lowered keep costs no single commit more than a step.
var (
	bucketFeed     = []byte("f")
	bucketFeedConf = []byte("f")
	keyFeedSeq     = []byte("feedSeq")
	keyFeedKeep    = []byte("keep")
)

// Operations a change records.
const (
	FeedPut    byte = 1
	FeedDelete byte = 2
)

// feedTrimStep bounds, with twice the changes a commit records, how many
// old changes one commit trims.
const feedTrimStep = 64

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
	keep   int64
	seq    int64 // the last seq given, when seqr is nil (read on first use)
	n      int   // changes this transaction recorded
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
	f.keep = t.feedKeep(c)
	if s, ok := f.bucket.(kv.Sequencer); ok && t.ktx.Writable() {
		f.seqr = s
	}
}

// feedKeep reads the keep of c's feed settings, from the DB's cache by
// the settings bucket's identity where it has one.
func (t *Tx) feedKeep(c *Coll) int64 {
	conf := c.meta.Bucket(bucketFeedConf)
	if conf == nil {
		return 0
	}
	ider, ok := conf.(kv.Identifier)
	if !ok || t.db == nil {
		return getInt(conf, keyFeedKeep)
	}
	if k, ok := t.db.feedKeeps.Load(ider.ID()); ok {
		return k.(int64)
	}
	keep := getInt(conf, keyFeedKeep)
	if t.failure() == nil && keep > 0 {
		t.db.feedKeeps.Store(ider.ID(), keep)
	}
	return keep
}

// FeedOn reports whether c has a change feed, and its keep.
func (t *Tx) FeedOn(c *Coll) (bool, int64) {
	t.loadFeed(c)
	return c.feed.bucket != nil, c.feed.keep
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
	// A key and value of their own, in one allocation: the backend keeps
	// them until the transaction ends.
	buf := make([]byte, 8+feedEntryHead+len(stored))
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
	if f.seqr != nil {
		return mapStoreErr(f.seqr.TrimSequence(f.keep, step))
	}
	if err := c.putMeta(keyFeedSeq, f.seq); err != nil {
		return err
	}
	bound := f.seq - f.keep
	if bound <= 0 {
		return nil
	}
	var old [][]byte
	cur := f.bucket.Cursor()
	for k, _ := cur.First(); k != nil && len(old) < step; k, _ = cur.Next() {
		if len(k) != 8 || int64(binary.BigEndian.Uint64(k)) > bound {
			break
		}
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		if err := f.bucket.Delete(k); err != nil {
			return mapStoreErr(err)
		}
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
	if !on {
		if _, err := c.root.CreateBucket(bucketFeed); err != nil {
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
	}
	if c.meta.Bucket(bucketFeedConf) != nil {
		if err := c.meta.DeleteBucket(bucketFeedConf); err != nil {
			return mapStoreErr(err)
		}
	}
	conf, err := c.meta.CreateBucket(bucketFeedConf)
	if err != nil {
		return mapStoreErr(err)
	}
	if err := putInt(conf, keyFeedKeep, keep); err != nil {
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

// LastSeq returns the last seq c's feed gave (0 for none, or no feed).
func (t *Tx) LastSeq(c *Coll) (uint64, error) {
	if c == nil {
		return 0, nil
	}
	n := c.getMeta(keyFeedSeq)
	return uint64(n), t.failure()
}

// ReadChanges reads up to max changes of c's feed after seq after, in seq
// order. It fails with ErrChangesTrimmed when changes after after are no
// longer kept, and with ErrNotFound when c has no feed. A nil c (a
// collection not created yet) has none yet.
func (t *Tx) ReadChanges(c *Coll, after uint64, max int) ([]FeedEntry, error) {
	if c == nil {
		return nil, nil
	}
	t.loadFeed(c)
	if c.feed.bucket == nil {
		if err := t.failure(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: collection %q has no change feed; open it with WithChangeFeed", errs.ErrNotFound, c.Name)
	}
	cur := c.feed.bucket.Cursor()
	if ra, ok := cur.(kv.ReadAhead); ok {
		ra.ReadAhead(max + 1)
	}
	var k8 [8]byte
	// The oldest change kept: past after+1, the changes between were
	// trimmed (the numbers have no gaps: a rolled-back transaction's
	// numbers are rolled back with it).
	if k, _ := cur.First(); k != nil && binary.BigEndian.Uint64(k) > after+1 {
		if err := t.failure(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: changes after %d are gone; the oldest kept is %d", errs.ErrChangesTrimmed, after, binary.BigEndian.Uint64(k))
	}
	var out []FeedEntry
	for k, v := cur.Seek(seqKey(&k8, after+1)); k != nil && len(out) < max; k, v = cur.Next() {
		e, err := decodeFeedEntry(k, v)
		if err != nil {
			return out, fmt.Errorf("collection %q, change %x: %w", c.Name, k, err)
		}
		out = append(out, e)
	}
	return out, t.failure()
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
