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
//	    "f"/        the feed: 8-byte big-endian seq → changes from seq on
//	    "b"/        before-images: id ‖ 8-byte big-endian seq → the stored
//	                value id had before the change seq replaced or
//	                deleted it
//	    "m"/
//	        "feedSeq"   the last seq given (8-byte big-endian); on a store
//	                    that numbers at commit, the highest seq trimmed
//	        "feedFloor" on a file, the highest seq trimmed, when a trim
//	                    ended inside a block or the tail
//	        "feedTail"  on a file, the newest changes, not yet a block:
//	                    the seq of the first ‖ op ‖ id each
//	        "f"/        the feed's settings: "keep" → how many changes to
//	                    keep, "numbered" → 1: the backend numbers them,
//	                    "id" → its identity (see writeFeedConf)
//	        "feedKeep", "feedID"  on a file, the settings
//
// On a file the transaction gives the numbers itself (one writer at a
// time), and they have no gaps. The changes are op ‖ id each
// (feedEntryHead), kept in blocks under the seq of their first: the
// newest in the feed's tail, a key of the metadata, which every commit
// writes anyway, and once it holds feedTailMax, in blocks of up to
// feedBlockMax in the feed's bucket (flushTail), each tagged feedBlock.
// A change holds no record: the change that put a record reads it from
// the records, and the change that replaces or deletes it later stores
// the value it overwrites, under id ‖ its own seq, in "b". The value of
// id as the put numbered s committed it is then the first before-image
// of id after s, or, when there is none, the record: every change after a
// put of id replaces or deletes id, and stores one. So an insert, which
// most writes of an append-oriented store are, costs the feed 17 bytes,
// no copy and, most of the time, no page: a change each, holding a copy
// of its record, cost a durable Put 3 pages (12 KiB) more, and a PutMany
// of 1,000 twice the bytes and 1.8 times the time of one without a feed.
// A trim deletes a block whole, with the before-images its changes
// stored (feedHadBefore); every put they served is in that block or an
// older one. A feed from before blocks holds a change each, op ‖ id ‖
// stored value, read as they were, and trimmed as blocks of one.
//
// On a store whose writers run at once (kv.Sequencer: PostgreSQL) a
// commit's changes are one run of the same entries, with the same
// before-images, as a file's block; the backend draws their numbers at
// commit from a counter of its own (a sequence), in the statement that
// stores them, right before the COMMIT, under a lock held for the draw
// alone, so writers of one collection commit side by side, and keys each
// before-image by the
// number its change drew. A change can then become visible after one
// with a greater number, whose writer committed first, and a rolled back
// or lost commit leaves its numbers unused: a reader delivers in number
// order and stops at a gap until it is settled (kv.Settler: the writers
// that could still fill it have ended), so it never delivers a number
// after a greater one, nor misses one. A before-image is as exact there
// as on a file: a writer replaces or deletes a record it read with its
// row locked (Coll.current), so two writes of one id commit, and draw
// their numbers, one after the other. Such a feed is "numbered" and holds
// "runs" in its settings, and its counter key holds the trim floor
// instead, which tells a reader behind the trim (gaps make "the oldest
// kept" say nothing). A feed made before, on such a store, a change each
// with a copy of its record, goes on in runs from the first writer of
// this build that records a change in it (numberFeed); its changes read
// on as they were.
//
// On a store whose buckets have an identity (kv.Identifier), the
// settings live in a bucket made afresh when they change, never written
// in place: a writer finds them in the DB's cache by that identity
// without a read, as it finds a schema. On a file they are keys of the
// metadata (see writeFeedConf).
//
// A commit that records changes also trims the feed to keep, once it holds
// more than a slack beyond it (feedTrimSlack), deleting at most a bounded
// number of the oldest changes (feedTrimStep, and always a whole block),
// so a lowered keep costs no single commit more than a step.
var (
	bucketFeed       = []byte("f")
	bucketFeedBefore = []byte("b")
	bucketFeedConf   = []byte("f")
	keyFeedSeq       = []byte("feedSeq")
	keyFeedFloor     = []byte("feedFloor")
	keyFeedTail      = []byte("feedTail")
	keyFeedKeepMeta  = []byte("feedKeep")
	keyFeedIDMeta    = []byte("feedID")
	keyFeedKeep      = []byte("keep")
	keyFeedNumbers   = []byte("numbered")
	keyFeedRuns      = []byte("runs")
	keyFeedID        = []byte("id")
)

// Operations a change records.
const (
	FeedPut    byte = 1
	FeedDelete byte = 2
)

// A block's first byte, and the flag of a change in it that stored a
// before-image (a replacement or a delete).
const (
	feedBlock     byte = 0x80
	feedHadBefore byte = 0x10
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

// feedEntryHead is the op and the id of a change: in front of its stored
// value in a change of its own, and all of it in a block.
const feedEntryHead = 1 + 16

// FeedEntry is one change read back from a feed.
type FeedEntry struct {
	Seq     uint64
	Op      byte
	ID      uuidv7.UUID
	Payload []byte // the record's payload (nil for a delete); owned by the caller
	// Err is set, wrapping ErrCorrupt, when the record of a put cannot be
	// read back checked (Payload is then nil): the change is there, its
	// record is not. The changes after it read on.
	Err error
}

// feedState is what a transaction knows of one collection's feed.
type feedState struct {
	read   bool
	bucket kv.Bucket    // nil: the collection has no feed
	seqr   kv.Sequencer // the backend numbers changes at commit; nil: this transaction does
	feedConf
	seq   int64  // the last seq given, when seqr is nil (read on first use)
	n     int    // changes this transaction recorded
	block []byte // the changes, op ‖ id each, numbered from first (by the backend: from its next)
	first uint64
	// With seqr: the values the changes of block that replace or delete
	// a record overwrite (sides), by place in block (sideOf).
	sideOf []int
	sides  [][]byte
}

// feedConf are a feed's settings.
type feedConf struct {
	keep     int64
	numbered bool   // the backend numbers the changes (kv.Sequencer)
	runs     bool   // numbered: a commit's changes are a run (kv.Sequencer), with no copies
	id       uint64 // drawn when the feed is made; 0 for a feed made before ids
	inMeta   bool   // read from keys of the metadata: a file's feed of blocks
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
		return feedConf{keep: c.getMeta(keyFeedKeepMeta), id: uint64(c.getMeta(keyFeedIDMeta)), inMeta: true}
	}
	read := func() feedConf {
		return feedConf{keep: getInt(conf, keyFeedKeep), numbered: getInt(conf, keyFeedNumbers) == 1,
			runs: getInt(conf, keyFeedRuns) == 1, id: uint64(getInt(conf, keyFeedID))}
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

// writeFeedConf stores c's feed settings: in a settings bucket made
// afresh, on a store whose buckets have an identity to cache them by, and
// on a file as keys of the metadata, replacing a settings bucket a build
// before made there. A bucket in it would keep the metadata out of its
// parent's page, where bbolt keeps a small bucket without buckets of its
// own, which every commit writes anyway: a page more for every Put.
func (t *Tx) writeFeedConf(c *Coll, fc feedConf) error {
	if c.meta.Bucket(bucketFeedConf) != nil {
		if err := c.meta.DeleteBucket(bucketFeedConf); err != nil {
			return mapStoreErr(err)
		}
	}
	if _, ok := c.meta.(kv.Identifier); !ok && !fc.numbered {
		// A build before blocks reads the settings from the bucket
		// only: it would find no feed, and write without one.
		if err := t.needFormat(formatFeedBlocks); err != nil {
			return err
		}
		if err := c.putMeta(keyFeedKeepMeta, fc.keep); err != nil {
			return err
		}
		return c.putMeta(keyFeedIDMeta, int64(fc.id))
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
	if fc.runs {
		if err := putInt(conf, keyFeedRuns, 1); err != nil {
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
// still, which now holds the trim floor, and one from before runs would
// misread them. A feed numbered by a build before runs, a change each
// with a copy of its record, goes on in runs; its changes read on.
//
// A feed a file wrote, copied here (storh migrate), holds its changes in
// blocks whose newest are in a tail of the metadata, which the backend's
// runs do not know: the numbered feed starts after its last change
// instead, and a reader behind it resyncs (ErrChangesTrimmed). Its
// changes, tail and before-images go now.
func (t *Tx) numberFeed(c *Coll) error {
	t.holdAlone(c)
	fc := c.feed.feedConf
	if !fc.numbered {
		last := c.getMeta(keyFeedSeq)
		if err := c.feed.seqr.StartSequence(c.meta, keyFeedSeq); err != nil {
			return mapStoreErr(err)
		}
		if fc.inMeta {
			if err := t.dropFileFeed(c, last); err != nil {
				return err
			}
		}
		fc.numbered = true
		if err := t.needFormat(formatNumbered); err != nil {
			return err
		}
	}
	fc.runs = true
	if err := t.startRuns(c); err != nil {
		return err
	}
	if err := t.writeFeedConf(c, fc); err != nil {
		return err
	}
	c.feed.numbered, c.feed.runs, c.feed.inMeta = true, true, false
	return nil
}

// startRuns readies c's feed, numbered by its backend, for runs: the
// bucket of the values its changes overwrite, made now, while the
// transaction holds the collection alone, rather than by whichever
// writers first replace a record, at once.
func (t *Tx) startRuns(c *Coll) error {
	if _, err := c.root.CreateBucketIfNotExists(bucketFeedBefore); err != nil {
		return mapStoreErr(err)
	}
	return t.needFormat(formatRuns)
}

// dropFileFeed puts the floor of c's numbered feed, copied from a file,
// at the file's last change, and deletes the file's changes, which no
// reader reaches below that floor, and what only a file's feed reads. A
// block left behind would outlive its before-images: copied back to a
// file, the trim that reached it would find the changes that stored one
// without it.
func (t *Tx) dropFileFeed(c *Coll, last int64) error {
	if err := c.putMeta(keyFeedSeq, last); err != nil {
		return err
	}
	cur := c.feed.bucket.Cursor()
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		if err := cur.Delete(); err != nil {
			return mapStoreErr(err)
		}
	}
	for _, k := range [][]byte{keyFeedTail, keyFeedFloor, keyFeedKeepMeta, keyFeedIDMeta} {
		if err := c.meta.Delete(k); err != nil {
			return mapStoreErr(err)
		}
	}
	if c.root.Bucket(bucketFeedBefore) != nil {
		if err := c.root.DeleteBucket(bucketFeedBefore); err != nil {
			return mapStoreErr(err)
		}
	}
	return nil
}

// adoptNumbered makes c's feed, numbered by another backend and copied
// to this file (storh migrate), one this transaction numbers: on after
// its greatest change, with the floor that backend trimmed to. Its
// changes, a change each with a copy of its record, read on.
func (t *Tx) adoptNumbered(c *Coll) error {
	f := &c.feed
	floor := c.getMeta(keyFeedSeq)
	last := floor
	if k, _ := f.bucket.Cursor().Last(); len(k) == 8 {
		last = max(last, int64(binary.BigEndian.Uint64(k)))
	}
	if err := c.putMeta(keyFeedFloor, floor); err != nil {
		return err
	}
	if err := c.putMeta(keyFeedSeq, last); err != nil {
		return err
	}
	f.numbered, f.runs = false, false
	return t.writeFeedConf(c, f.feedConf)
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

// recordChange records a put or a delete of id in c's feed, if it has
// one. Every write of a record goes through here, whoever makes it. A
// write that replaces or removes a stored record gives what it
// overwrites: its stored value old, as read, or, when the caller holds
// only that, its checked payload oldPayload; an insert gives neither.
func (t *Tx) recordChange(c *Coll, op byte, id uuidv7.UUID, old, oldPayload []byte) error {
	t.loadFeed(c)
	f := &c.feed
	if f.bucket == nil {
		return nil
	}
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
		if !f.runs {
			if err := t.numberFeed(c); err != nil {
				return err
			}
		}
	} else {
		if f.numbered {
			if err := t.adoptNumbered(c); err != nil {
				return err
			}
		}
		if f.seq == 0 {
			f.seq = c.getMeta(keyFeedSeq)
		}
		f.seq++
	}
	if f.block == nil {
		if f.seqr == nil {
			if err := t.needFormat(formatFeedBlocks); err != nil {
				return err
			}
			if c.meta.Bucket(bucketFeedConf) != nil {
				// Made by a build before: out of the metadata.
				if err := t.writeFeedConf(c, f.feedConf); err != nil {
					return err
				}
			}
			f.first = uint64(f.seq)
		}
		f.block = make([]byte, 0, feedEntryHead)
	}
	if old != nil || oldPayload != nil {
		op |= feedHadBefore
		v := t.beforeValue(id, old, oldPayload)
		if f.seqr != nil {
			// Numbered at commit: the backend keys it (kv.Run).
			f.sideOf, f.sides = append(f.sideOf, len(f.block)/feedEntryHead), append(f.sides, v)
		} else if err := t.putBefore(c, id, f.seq, v); err != nil {
			return err
		}
	}
	f.block = append(append(f.block, op), id[:]...)
	return nil
}

// beforeValue returns, in memory the transaction keeps, the value id had
// before a change replaced or deleted it: old as it was stored (checked
// when read back), or a value sealed afresh around oldPayload, which the
// caller read checked. A copy of its own: old is the store's memory,
// which a remap of the file during this transaction may unmap, and the
// store keeps what it is given until the commit.
func (t *Tx) beforeValue(id uuidv7.UUID, old, oldPayload []byte) []byte {
	if old != nil {
		v := t.feedEntry(len(old))
		copy(v, old)
		return v
	}
	v := t.feedEntry(HeaderSize + len(oldPayload))
	v[0] = valueVersion
	copy(v[HeaderSize:], oldPayload)
	sealValue(v, id[:])
	return v
}

// putBefore stores v (beforeValue), the value id had before the change
// seq replaced or deleted it.
func (t *Tx) putBefore(c *Coll, id uuidv7.UUID, seq int64, v []byte) error {
	before := c.root.Bucket(bucketFeedBefore)
	if before == nil {
		var err error
		if before, err = c.root.CreateBucket(bucketFeedBefore); err != nil {
			return mapStoreErr(err)
		}
	}
	key := t.feedEntry(16 + 8)
	copy(key, id[:])
	binary.BigEndian.PutUint64(key[16:], uint64(seq))
	return mapStoreErr(before.Put(key, v))
}

// flushFeed writes the changes this transaction numbered and the counter,
// and trims the feed by a step; a backend that numbers them at commit is
// told how to trim instead.
//
// On a file the changes join the feed's tail, the newest changes, which
// the collection's metadata holds: a commit writes that page anyway (its
// counters), where a page of the feed's own, and the branch above it,
// cost a single Put a third more bytes. Once the tail holds a block's
// worth (feedBlockMax), its blocks move into the feed. A block is kept
// to under half a page: bbolt puts two entries at least on a page, and
// larger blocks made every commit of many changes rewrite the block
// beside its own, and every trim the block after the one it deleted.
func (c *Coll) flushFeed() error {
	f := &c.feed
	if f.bucket == nil || f.n == 0 {
		return nil
	}
	step := feedTrimStep + 2*f.n
	slack := feedTrimSlack(f.keep)
	if f.seqr != nil {
		shape := c.feedShape()
		run := kv.Run{Shape: shape, Entries: f.block, SideOf: f.sideOf, Sides: f.sides}
		if err := f.seqr.SequenceRun(c.meta, keyFeedSeq, run); err != nil {
			return mapStoreErr(err)
		}
		// The backend queues the trim's statement only when it sees one
		// is due (kv.Sequencer).
		return mapStoreErr(f.seqr.TrimRuns(f.keep, slack, step, shape))
	}
	if err := c.flushTail(); err != nil {
		return err
	}
	if err := c.putMeta(keyFeedSeq, f.seq); err != nil {
		return err
	}
	bound := f.seq - f.keep
	if bound <= slack {
		return nil
	}
	// Deleted through the one cursor that walks them: a Delete of the
	// bucket seeks afresh with a cursor of its own.
	cur := f.bucket.Cursor()
	k, v := cur.First()
	if int64(c.blockFloor(k)) >= bound-slack {
		return nil // no more than slack changes past keep
	}
	var before kv.Bucket
	for deleted := 0; deleted < step; k, v = cur.Next() {
		if k == nil {
			// The rest is the tail: its changes up to bound are gone
			// to readers, and leave with its blocks.
			return c.putMeta(keyFeedFloor, bound)
		}
		first, n, err := feedSpan(k, v)
		if err != nil {
			return fmt.Errorf("collection %q, change %x: %w", c.Name, k, err)
		}
		if int64(first+uint64(n)-1) > bound {
			// A block that ends past the bound holds changes to keep:
			// it stays whole, and the ones before the bound are gone to
			// readers all the same, as a change each would be.
			if int64(first) <= bound {
				return c.putMeta(keyFeedFloor, bound)
			}
			break
		}
		if v[0] == feedBlock {
			for i := range n {
				e := v[1+i*feedEntryHead : 1+(i+1)*feedEntryHead]
				if e[0]&feedHadBefore == 0 {
					continue
				}
				if before == nil {
					before = c.root.Bucket(bucketFeedBefore)
				}
				if before == nil {
					return fmt.Errorf("%w: collection %q: change %d stored a before-image, and the collection has none", errs.ErrCorrupt, c.Name, first+uint64(i))
				}
				var bk [24]byte
				copy(bk[:], e[1:])
				binary.BigEndian.PutUint64(bk[16:], first+uint64(i))
				if err := before.Delete(bk[:]); err != nil {
					return mapStoreErr(err)
				}
			}
		}
		if err := cur.Delete(); err != nil {
			return mapStoreErr(err)
		}
		deleted += n
	}
	return nil
}

// feedShape is how c's feed, numbered by its backend, stores a commit's
// changes (kv.RunShape): as a block, each change op ‖ id, those that
// replaced or deleted a record flagged, with the value it overwrote under
// id ‖ seq in the before-images, as a file's feed does.
func (c *Coll) feedShape() kv.RunShape {
	shape := kv.RunShape{Tag: feedBlock, Size: feedEntryHead, SideFlag: feedHadBefore, SideKey: 16}
	if b := c.root.Bucket(bucketFeedBefore); b != nil {
		shape.Side = b
	}
	return shape
}

// feedBlockMax is how many changes a block of the feed holds at most:
// 1,701 bytes, two of them to a 4 KiB page. feedTailMax is how many the
// tail holds at most: 544 bytes, so that the metadata stays under a
// quarter page, the most bbolt keeps in its parent's page.
const (
	feedBlockMax = 100
	feedTailMax  = 32
)

// flushTail adds the changes this transaction numbered to the feed's
// tail, and once it holds feedTailMax, moves them all into the feed, in
// blocks of feedBlockMax and one of the rest.
func (c *Coll) flushTail() error {
	f := &c.feed
	first, tail := c.feedTail()
	if tail == nil {
		first = f.first
	}
	n := (len(tail) + len(f.block)) / feedEntryHead
	if n < feedTailMax {
		v := make([]byte, 8, 8+n*feedEntryHead)
		binary.BigEndian.PutUint64(v, first)
		v = append(append(v, tail...), f.block...)
		return mapStoreErr(c.meta.Put(keyFeedTail, v))
	}
	// Keys and values of their own, which bbolt keeps to the commit: the
	// tail's changes, then this transaction's, cut into blocks.
	blocks := (n + feedBlockMax - 1) / feedBlockMax
	buf := make([]byte, blocks*(8+1)+len(tail)+len(f.block))
	all := f.block
	if tail != nil {
		all = append(append(make([]byte, 0, len(tail)+len(f.block)), tail...), f.block...)
	}
	for i := 0; i < n; i += feedBlockMax {
		m := min(feedBlockMax, n-i)
		entry := buf[:8+1+m*feedEntryHead]
		buf = buf[len(entry):]
		binary.BigEndian.PutUint64(entry, first+uint64(i))
		entry[8] = feedBlock
		copy(entry[9:], all[i*feedEntryHead:(i+m)*feedEntryHead])
		if err := f.bucket.Put(entry[:8], entry[8:]); err != nil {
			return mapStoreErr(err)
		}
	}
	if tail == nil {
		return nil
	}
	return mapStoreErr(c.meta.Delete(keyFeedTail))
}

// feedTail returns the seq of the first change of c's feed's tail, and
// its changes (nil: it holds none), aliasing the store's memory.
func (c *Coll) feedTail() (first uint64, changes []byte) {
	v := c.meta.Get(keyFeedTail)
	if len(v) < 8+feedEntryHead {
		return 0, nil
	}
	return binary.BigEndian.Uint64(v), v[8:]
}

// blockFloor returns the highest seq trimmed from c's feed, which its
// transactions number, whose first entry's key is first (nil: it has
// none, and its oldest change is in the tail, if anywhere): the changes a
// trim passed inside a block, or in the tail, are trimmed all the same.
func (c *Coll) blockFloor(first []byte) uint64 {
	floor := uint64(c.getMeta(keyFeedFloor))
	if len(first) == 8 {
		return max(floor, binary.BigEndian.Uint64(first)-1)
	}
	if tfirst, tail := c.feedTail(); tail != nil {
		return max(floor, tfirst-1)
	}
	return floor
}

// feedSpan returns the first seq and the number of changes of one entry
// of a feed a transaction numbers: a block, or a change from before
// blocks.
func feedSpan(k, v []byte) (first uint64, n int, err error) {
	if len(k) != 8 || len(v) == 0 {
		return 0, 0, fmt.Errorf("%w: a malformed change (%d-byte key, %d-byte value)", errs.ErrCorrupt, len(k), len(v))
	}
	first = binary.BigEndian.Uint64(k)
	if v[0] != feedBlock {
		return first, 1, nil
	}
	if (len(v)-1)%feedEntryHead != 0 || len(v) == 1 {
		return 0, 0, fmt.Errorf("%w: a malformed block of changes (%d bytes)", errs.ErrCorrupt, len(v))
	}
	return first, (len(v) - 1) / feedEntryHead, nil
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
			if err := t.startRuns(c); err != nil {
				return err
			}
			fc.numbered, fc.runs = true, true
		}
	}
	if err := t.writeFeedConf(c, fc); err != nil {
		return err
	}
	if !on {
		c.feed = feedState{} // read afresh, with its new bucket
		return nil
	}
	// The changes this transaction recorded already, numbered and not
	// yet flushed, stay: only the settings change.
	fc.inMeta = c.meta.Bucket(bucketFeedConf) == nil
	c.feed.feedConf = fc
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
	var k, v []byte
	if settled == math.MaxUint64 {
		k, v = cur.Last()
	} else {
		// A commit's run is all at or below settled, or all above.
		var k8 [8]byte
		if k, _ = cur.Seek(seqKey(&k8, settled+1)); k != nil {
			k, v = cur.Prev()
		} else {
			k, v = cur.Last()
		}
	}
	if k != nil {
		first, m, err := feedSpan(k, v)
		if err != nil {
			return 0, fmt.Errorf("collection %q, change %x: %w", c.Name, k, err)
		}
		n = max(n, first+uint64(m)-1)
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
	case !c.feed.numbered:
		n := c.getMeta(keyFeedSeq)
		return uint64(n), t.failure()
	case !ok || t.ktx.Writable():
		// A writable transaction, which may hold the collection
		// itself, cannot wait for its writers, and a numbered feed on
		// a file (copied from PostgreSQL) has none in flight:
		// everything either sees is all it can know.
		return math.MaxUint64, t.failure()
	}
	if err := t.failure(); err != nil {
		return 0, err
	}
	n, err := s.SettleSequence(ctx, c.meta, keyFeedSeq)
	return n, mapStoreErr(err)
}

// ReadChanges reads about max changes of c's feed after seq after, in seq
// order: fewer at its end, or more, to the end of a block (readBlocks). It fails with ErrChangesTrimmed when changes after after are no
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
		// Entries of a change each, or blocks of up to a commit's.
		ra.ReadAhead(min(max+1, 64))
	}
	if c.feed.numbered {
		if floor := uint64(c.getMeta(keyFeedSeq)); after < floor {
			if err := t.failure(); err != nil {
				return nil, false, err
			}
			return nil, false, fmt.Errorf("%w: changes after %d are gone; the feed is trimmed up to %d", errs.ErrChangesTrimmed, after, floor)
		}
	} else if k, _ := cur.First(); c.blockFloor(k) > after {
		// The oldest change kept: past after+1, the changes between were
		// trimmed (the numbers have no gaps: a rolled-back transaction's
		// numbers are rolled back with it).
		if err := t.failure(); err != nil {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("%w: changes after %d are gone; the oldest kept is %d", errs.ErrChangesTrimmed, after, c.blockFloor(k)+1)
	} else {
		settled = math.MaxUint64 // the numbers have no gaps
	}
	return t.readBlocks(c, cur, after, settled, max)
}

// readBlocks reads max changes after after of c's feed, or fewer where
// it ends, or more to the end of the block the max-th is in, so that the
// next read starts at a block's first change (cur walks it): from the
// block that holds after+1 on, then a file's tail, a put's record as the
// first before-image of its id after it gives it, or, with none, as
// stored, all of them read at once. A block may hold a change each of a
// build before, with its record. On a feed its backend numbers, which
// has no tail, it stops at a gap, a seq missing before a block it found,
// unless the gap is at or below settled, and reports it.
func (t *Tx) readBlocks(c *Coll, cur kv.Cursor, after, settled uint64, max int) ([]FeedEntry, bool, error) {
	// Room for the block the max-th change ends, on either backend.
	r := blockReader{t: t, c: c, after: after, out: make([]FeedEntry, 0, max+128)}
	var k8 [8]byte
	k, v := cur.Seek(seqKey(&k8, after+1))
	if k == nil || binary.BigEndian.Uint64(k) > after+1 {
		// after+1 may be inside the block before.
		if k, v = cur.Prev(); k == nil {
			k, v = cur.First()
		}
	}
	gap := false
	for ; k != nil && len(r.out) < max; k, v = cur.Next() {
		first, n, err := feedSpan(k, v)
		if err != nil {
			return r.out, false, fmt.Errorf("collection %q, change %x: %w", c.Name, k, err)
		}
		if first > r.after+1 && first-1 > settled {
			gap = true
			break
		}
		switch {
		case first+uint64(n)-1 <= r.after: // the block before, which ends at after
		case v[0] != feedBlock:
			e, err := decodeFeedEntry(k, v)
			if err != nil {
				return r.out, false, fmt.Errorf("collection %q, change %x: %w", c.Name, k, err)
			}
			r.out = append(r.out, e)
			r.after = e.Seq
		default:
			if err := r.block(first, v[1:]); err != nil {
				return r.out, false, err
			}
		}
	}
	// A numbered feed has no tail: a read of its metadata less, which on
	// PostgreSQL is a round trip.
	if len(r.out) < max && !gap && !c.feed.numbered {
		if first, tail := c.feedTail(); tail != nil {
			if err := r.block(first, tail); err != nil {
				return r.out, false, err
			}
		}
	}
	if len(r.puts) > 0 {
		r.readPuts()
	}
	return r.out, gap, t.failure()
}

// blockReader reads changes of a feed a block at a time.
type blockReader struct {
	t     *Tx
	c     *Coll
	after uint64
	out   []FeedEntry
	// The reads of the puts' records, made at once: on PostgreSQL one
	// round trip for all of them.
	puts          []int // indexes in out
	recs, befores kv.Read
}

// block reads the changes of one block, numbered from first, that come
// after r.after, the records of its puts left for readPuts.
func (r *blockReader) block(first uint64, changes []byte) error {
	n := len(changes) / feedEntryHead
	i := 0
	if r.after >= first {
		i = int(min(r.after-first+1, uint64(n)))
	}
	for ; i < n; i++ {
		b := changes[i*feedEntryHead : (i+1)*feedEntryHead]
		e := FeedEntry{Seq: first + uint64(i), Op: b[0] &^ feedHadBefore}
		copy(e.ID[:], b[1:])
		switch e.Op {
		case FeedDelete:
		case FeedPut:
			r.puts = append(r.puts, len(r.out))
		default:
			return fmt.Errorf("%w: collection %q, change %d: unknown operation %d", errs.ErrCorrupt, r.c.Name, e.Seq, e.Op)
		}
		r.out = append(r.out, e)
		r.after = e.Seq
	}
	return nil
}

// readPuts gives each put of the blocks read the payload of its id as it
// committed it: the first before-image of the id after it, or, with none,
// its record.
func (r *blockReader) readPuts() {
	n := len(r.puts)
	before := r.c.root.Bucket(bucketFeedBefore)
	size := 16
	if before != nil {
		size += 2 * 24
	}
	keys := make([]byte, n*size)
	ids, afters, ends := keys[:n*16], keys[n*16:], keys[min(n*(16+24), len(keys)):]
	r.recs = kv.Read{Bucket: r.c.records, Op: kv.Get, Keys: make([][]byte, 0, n)}
	reads := []*kv.Read{&r.recs}
	if before != nil {
		r.befores = kv.Read{Bucket: before, Op: kv.After, Keys: make([][]byte, 0, n), Ends: make([][]byte, 0, n)}
		reads = append(reads, &r.befores)
	}
	for j, i := range r.puts {
		e := &r.out[i]
		id := ids[j*16 : (j+1)*16]
		copy(id, e.ID[:])
		r.recs.Keys = append(r.recs.Keys, id)
		if before != nil {
			a, z := afters[j*24:(j+1)*24], ends[j*24:(j+1)*24]
			copy(a, id)
			binary.BigEndian.PutUint64(a[16:], e.Seq)
			copy(z, id)
			binary.BigEndian.PutUint64(z[16:], math.MaxUint64)
			r.befores.Keys, r.befores.Ends = append(r.befores.Keys, a), append(r.befores.Ends, z)
		}
	}
	kv.Pipeline(r.t.ktx, reads...)
	for j, i := range r.puts {
		e := &r.out[i]
		stored, replaced := r.recs.Values[j], before != nil && r.befores.Found[j] != nil
		if replaced {
			stored = r.befores.Values[j]
		} else if stored == nil {
			e.Err = fmt.Errorf("%w: change %d put %s, which is neither stored nor kept as replaced", errs.ErrCorrupt, e.Seq, e.ID)
			continue
		}
		payload, err := Payload(e.ID[:], stored)
		if err != nil {
			what := "its record"
			if replaced {
				what = fmt.Sprintf("the value it had before change %d", binary.BigEndian.Uint64(r.befores.Found[j][16:]))
			}
			e.Err = fmt.Errorf("change %d put %s, and %s does not read back: %w", e.Seq, e.ID, what, err)
			continue
		}
		e.Payload = append([]byte(nil), payload...)
	}
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
