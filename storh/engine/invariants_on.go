//go:build storh_invariants

package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/storhdb/storh-go/storh/internal/api"
)

// Invariants reports whether the expensive internal checks are compiled in
// (build tag storh_invariants).
const Invariants = true

// checkInvariants runs before every commit under the storh_invariants tag:
// each collection the transaction touched must have counters that agree with
// its records, every key must be a valid UUIDv7 whose value passes its
// checksum, every index must agree with the records both ways, and a
// file's change feed must run on without gaps and keep exactly the
// before-images its changes say. A failure aborts the commit, so a bug cannot reach the file.
func checkInvariants(t *Tx) error {
	for _, c := range t.colls {
		if c.shared {
			// Held beside other writers, whose commits change it under
			// this check, and whose counter changes are in slots: Verify
			// checks it from a snapshot instead.
			continue
		}
		var n, size int64
		cur := c.records.Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			if len(k) != 16 {
				return fmt.Errorf("invariant: %q: key of %d bytes", c.Name, len(k))
			}
			if k[6]>>4 != 7 || k[8]&0xc0 != 0x80 {
				return fmt.Errorf("invariant: %q: key %x is not a UUIDv7", c.Name, k)
			}
			if _, err := Payload(k, v); err != nil {
				return fmt.Errorf("invariant: %q: key %x: %v", c.Name, k, err)
			}
			n++
			size += int64(len(v))
		}
		if n != c.Count() || size != c.Bytes() {
			return fmt.Errorf("invariant: %q: counters say %d records / %d bytes, records bucket has %d / %d",
				c.Name, c.Count(), c.Bytes(), n, size)
		}
		// Indexes agree with the records both ways (run after flush, so the
		// entry counters are written).
		var first *api.Problem
		checkIndexes(c, func(p api.Problem) {
			if first == nil {
				first = &p
			}
		})
		if first != nil {
			return fmt.Errorf("invariant: %v", first)
		}
		if err := checkJournaledViews(c); err != nil {
			return fmt.Errorf("invariant: %q: %v", c.Name, err)
		}
		if err := checkFeedInvariants(c); err != nil {
			return err
		}
		if c.Kind == KindQueue {
			if _, err := checkQueue(c, func(p api.Problem) {
				if first == nil {
					first = &p
				}
			}, nil); err != nil {
				return err
			}
			if first != nil {
				return fmt.Errorf("invariant: %v", first)
			}
		}
	}
	return nil
}

// checkFeedInvariants checks the feed of a collection this transaction
// numbers the changes of (a file's), when it holds at most
// feedCheckMax changes: its blocks and its tail run on without a gap
// from the oldest change kept to the counter, and the before-images are
// exactly those its changes say they kept.
func checkFeedInvariants(c *Coll) error {
	f := &c.feed
	if f.bucket == nil || f.seqr != nil || f.numbered {
		return nil
	}
	last := uint64(c.getMeta(keyFeedSeq))
	if k, _ := f.bucket.Cursor().First(); k != nil && last-binary.BigEndian.Uint64(k) > feedCheckMax {
		return nil
	}
	kept := map[string]bool{} // before-images the changes say they kept
	var next uint64           // the seq the next entry must start at (0: any)
	entry := func(first uint64, changes []byte, legacy bool) error {
		if next != 0 && first != next && !legacy {
			return fmt.Errorf("invariant: %q: the feed's entry at %d follows one that ends at %d", c.Name, first, next-1)
		}
		if legacy { // a change of its own, from a build before blocks
			next = first + 1
			return nil
		}
		n := uint64(len(changes) / feedEntryHead)
		for i := range n {
			e := changes[i*feedEntryHead : (i+1)*feedEntryHead]
			if op := e[0] &^ feedHadBefore; op != FeedPut && op != FeedDelete {
				return fmt.Errorf("invariant: %q: change %d has op %d", c.Name, first+i, e[0])
			}
			if e[0]&feedHadBefore != 0 {
				kept[string(binary.BigEndian.AppendUint64(append([]byte(nil), e[1:]...), first+i))] = true
			}
		}
		next = first + n
		return nil
	}
	cur := f.bucket.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		first, _, err := feedSpan(k, v)
		if err != nil {
			return fmt.Errorf("invariant: %q: %v", c.Name, err)
		}
		legacy := v[0] != feedBlock
		if !legacy {
			v = v[1:]
		}
		if err := entry(first, v, legacy); err != nil {
			return err
		}
	}
	if first, tail := c.feedTail(); tail != nil {
		if err := entry(first, tail, false); err != nil {
			return err
		}
	}
	if next != 0 && next-1 != last {
		return fmt.Errorf("invariant: %q: the feed ends at %d, its counter says %d", c.Name, next-1, last)
	}
	if b := c.root.Bucket(bucketFeedBefore); b != nil {
		bc := b.Cursor()
		for k, _ := bc.First(); k != nil; k, _ = bc.Next() {
			if !kept[string(k)] {
				return fmt.Errorf("invariant: %q: a before-image %x that no change kept", c.Name, k)
			}
			delete(kept, string(k))
		}
	}
	for k := range kept {
		return fmt.Errorf("invariant: %q: change %x kept a before-image that is missing", c.Name, k)
	}
	return nil
}

// feedCheckMax bounds the feeds checkFeedInvariants walks, so that a
// test with a long feed does not walk it at every commit.
const feedCheckMax = 4096
