package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/kv"
)

// Blocked indexes. bbolt rewrites every page a transaction dirties, so an
// index whose new keys land all over its key space (a user id, a score)
// costs a page per new key at every commit: a thousand records with one
// such index rewrote and synced a thousand pages, twenty times the pages
// of the records themselves. A blocked index (layout 1) writes a commit's
// entry changes as one journal record instead, a few pages at the end of
// a bucket, and folds many commits' changes into its sorted blocks at
// once, rewriting each touched block one time for all of them:
//
//	"i"/<name>/   blocks: the entry keys in order, packed about a page
//	              each, under the key of their first entry
//	"j"/<name>/   journal: 8-byte sequence → the changes of one commit
//	              (puts and deletes of entry keys) not folded yet
//
// Readers see the blocks merged with the journal's changes, which each
// process keeps in memory, sorted (see index_view.go). An entry key is
// exactly what a layout-0 index stores as a bbolt key (index.go), so the
// same walks, seeks and counts serve both layouts.
//
// A block:
//
//	byte  0       blockVersion
//	bytes 1-4     CRC-32C of the rest of the block, then of its bucket key
//	bytes 5-6     n, the number of entries (at least 1), big-endian
//	bytes 7-      n big-endian uint16: where each entry ends in the data
//	then          the entries, back to back, in ascending order
//
// The checksum covers the bucket key too, so a block filed under another
// block's key is damage, as a record under a foreign id is.
const (
	blockVersion = 1
	blockHeader  = 7
)

// errBlock is wrapped by every damaged-block error.
var errBlock = errors.New("damaged index block")

// block is a checked block: its entries alias the stored value.
type block struct {
	n    int
	ends []byte // n big-endian uint16
	data []byte
}

func (b *block) entry(i int) []byte {
	start := 0
	if i > 0 {
		start = int(binary.BigEndian.Uint16(b.ends[2*i-2:]))
	}
	end := int(binary.BigEndian.Uint16(b.ends[2*i:]))
	return b.data[start:end:end]
}

// search returns the position of the first entry at or after k (n if none).
func (b *block) search(k []byte) int {
	lo, hi := 0, b.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(b.entry(m), k) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// parseBlock checks the block v stored under key and opens it. The order
// of its entries is not checked here (Verify does): the checksum proves
// the bytes are the ones written, and the writer sorts them.
func parseBlock(key, v []byte) (block, error) {
	if len(v) < blockHeader+2 || v[0] != blockVersion {
		return block{}, fmt.Errorf("%w: %d bytes, version %d", errBlock, len(v), firstByte(v))
	}
	if crc32.Update(crc32.Checksum(v[5:], castagnoli), castagnoli, key) != binary.BigEndian.Uint32(v[1:5]) {
		return block{}, fmt.Errorf("%w: checksum mismatch", errBlock)
	}
	n := int(binary.BigEndian.Uint16(v[5:7]))
	if n == 0 || len(v) < blockHeader+2*n {
		return block{}, fmt.Errorf("%w: %d entries in %d bytes", errBlock, n, len(v))
	}
	b := block{n: n, ends: v[blockHeader : blockHeader+2*n], data: v[blockHeader+2*n:]}
	prev := 0
	for i := range n {
		end := int(binary.BigEndian.Uint16(b.ends[2*i:]))
		if end <= prev || end > len(b.data) {
			return block{}, fmt.Errorf("%w: entry %d ends at %d (after %d, in %d bytes)", errBlock, i, end, prev, len(b.data))
		}
		prev = end
	}
	if prev != len(b.data) || !bytes.Equal(b.entry(0), key) {
		return block{}, fmt.Errorf("%w: its first entry is not its key", errBlock)
	}
	return b, nil
}

func firstByte(v []byte) int {
	if len(v) == 0 {
		return -1
	}
	return int(v[0])
}

// blockSize is the stored size of a block of these entries.
func blockSize(entries [][]byte) int {
	n := blockHeader + 2*len(entries)
	for _, e := range entries {
		n += len(e)
	}
	return n
}

// appendBlock appends the block of entries (at least one, ascending) to dst.
// Its key is entries[0].
func appendBlock(dst []byte, entries [][]byte) []byte {
	start := len(dst)
	dst = append(dst, blockVersion, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(entries)))
	end := 0
	for _, e := range entries {
		end += len(e)
		dst = binary.BigEndian.AppendUint16(dst, uint16(end))
	}
	for _, e := range entries {
		dst = append(dst, e...)
	}
	sum := crc32.Update(crc32.Checksum(dst[start+5:], castagnoli), castagnoli, entries[0])
	binary.BigEndian.PutUint32(dst[start+1:], sum)
	return dst
}

// splitBlocks cuts entries (ascending) into runs that each fit a block. At
// the end of the index (tail), where new keys are appended in order, runs
// are packed full, as the records are; elsewhere the entries are spread
// evenly over as few blocks as hold them, so that each has room left for
// the keys that will arrive between its own.
func splitBlocks(entries [][]byte, tail bool) [][][]byte {
	limit := tune.IndexBlockBytes
	total := blockSize(entries)
	if total <= limit || len(entries) == 1 {
		return [][][]byte{entries}
	}
	target := limit
	if !tail {
		parts := (total + limit - 1) / limit
		target = (total + parts - 1) / parts
	}
	var out [][][]byte
	start, size := 0, blockHeader
	for i, e := range entries {
		add := 2 + len(e)
		if i > start && size+add > target {
			out = append(out, entries[start:i:i])
			start, size = i, blockHeader
		}
		size += add
	}
	return append(out, entries[start:])
}

// blockCursor walks the entries of a blocked index's blocks as one sorted
// run of keys, with the moves of a kv.Cursor. A damaged block ends the
// walk as if the index ended there and reports the damage through fail,
// which makes the transaction fail (see Tx.fail): no answer read past it
// is ever used.
type blockCursor struct {
	bc   kv.Cursor
	blk  block
	i    int
	fail func(error)
}

func newBlockCursor(b kv.Bucket, fail func(error)) *blockCursor {
	return &blockCursor{bc: b.Cursor(), fail: fail}
}

// load opens the block at k (nil: past either end) and returns whether
// there is one.
func (c *blockCursor) load(k, v []byte) bool {
	if k == nil {
		c.blk = block{}
		return false
	}
	blk, err := parseBlock(k, v)
	if err != nil {
		c.fail(fmt.Errorf("%w: block %x: %v", ErrCorrupt, k, err))
		c.blk = block{}
		return false
	}
	c.blk = blk
	return true
}

func (c *blockCursor) First() ([]byte, []byte) {
	if !c.load(c.bc.First()) {
		return nil, nil
	}
	c.i = 0
	return c.blk.entry(0), nil
}

func (c *blockCursor) Last() ([]byte, []byte) {
	if !c.load(c.bc.Last()) {
		return nil, nil
	}
	c.i = c.blk.n - 1
	return c.blk.entry(c.i), nil
}

// Seek moves to the first entry at or after seek: in the block filed under
// seek, or in the one before it (whose first entry is below seek), or at
// the start of the next.
func (c *blockCursor) Seek(seek []byte) ([]byte, []byte) {
	k, v := c.bc.Seek(seek)
	if k != nil && bytes.Equal(k, seek) {
		if !c.load(k, v) {
			return nil, nil
		}
		c.i = 0
		return c.blk.entry(0), nil
	}
	if k == nil {
		k, v = c.bc.Last()
	} else {
		k, v = c.bc.Prev()
	}
	if k == nil {
		// seek is below every block: the first entry is the answer.
		return c.First()
	}
	if !c.load(k, v) {
		return nil, nil
	}
	c.i = c.blk.search(seek)
	if c.i == c.blk.n {
		return c.Next()
	}
	return c.blk.entry(c.i), nil
}

func (c *blockCursor) Next() ([]byte, []byte) {
	if c.blk.n == 0 {
		return nil, nil
	}
	c.i++
	if c.i < c.blk.n {
		return c.blk.entry(c.i), nil
	}
	if !c.load(c.bc.Next()) {
		return nil, nil
	}
	c.i = 0
	return c.blk.entry(0), nil
}

func (c *blockCursor) Prev() ([]byte, []byte) {
	if c.blk.n == 0 {
		return nil, nil
	}
	c.i--
	if c.i >= 0 {
		return c.blk.entry(c.i), nil
	}
	if !c.load(c.bc.Prev()) {
		return nil, nil
	}
	c.i = c.blk.n - 1
	return c.blk.entry(c.i), nil
}

// Delete is not a move of index cursors: entries change through the
// index's own writes.
func (c *blockCursor) Delete() error {
	return fmt.Errorf("storh: internal error: deleting through an index cursor")
}
