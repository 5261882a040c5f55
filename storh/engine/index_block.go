package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"

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
//	bytes 7-8     r, the number of restart points: one every restartEvery
//	              entries, from the first
//	then          r big-endian uint16: where each restart entry starts in
//	              the data
//	then          the entries in ascending order, each: a uvarint, the
//	              bytes it shares with the entry before it (0 at a restart
//	              point), a uvarint, the bytes that follow, and those bytes
//
// Keys in a block share long prefixes (a value, and the timestamp that
// leads its ids), so a block holds about twice the entries it would whole.
// A seek searches the restart points, whose keys are whole, then walks at
// most restartEvery entries. The checksum covers the bucket key too, so a
// block filed under another block's key is damage, as a record under a
// foreign id is.
const (
	blockVersion = 1
	blockHeader  = 9
	restartEvery = 16
)

// errBlock is wrapped by every damaged-block error.
var errBlock = errors.New("damaged index block")

// block is a checked block: its data aliases the stored value.
type block struct {
	n        int
	restarts []byte // r big-endian uint16
	data     []byte
}

func (b *block) restart(r int) int { return int(binary.BigEndian.Uint16(b.restarts[2*r:])) }

// entryAt decodes the entry at off in the data over prev, the key before
// it (which it overwrites past the shared bytes): the key, and the offset
// of the next entry. ok is false for bytes that are not an entry.
func (b *block) entryAt(off int, prev []byte) (key []byte, next int, ok bool) {
	key, next, _, ok = b.entrySharing(off, prev)
	return key, next, ok
}

// entrySharing is entryAt that also returns the bytes the entry shares
// with prev.
func (b *block) entrySharing(off int, prev []byte) (key []byte, next, sharedLen int, ok bool) {
	shared, w1 := binary.Uvarint(b.data[off:])
	if w1 <= 0 || shared > uint64(len(prev)) {
		return nil, 0, 0, false
	}
	rest, w2 := binary.Uvarint(b.data[off+w1:])
	start := off + w1 + w2
	if w2 <= 0 || rest > uint64(len(b.data)-start) || shared+rest == 0 {
		return nil, 0, 0, false
	}
	end := start + int(rest)
	return append(prev[:shared], b.data[start:end]...), end, int(shared), true
}

// restartKey returns the key of restart point r, aliasing the data: it
// shares nothing.
func (b *block) restartKey(r int) ([]byte, bool) {
	off := b.restart(r)
	if off >= len(b.data) || b.data[off] != 0 {
		return nil, false
	}
	rest, w := binary.Uvarint(b.data[off+1:])
	start := off + 1 + w
	if w <= 0 || rest == 0 || rest > uint64(len(b.data)-start) {
		return nil, false
	}
	return b.data[start : start+int(rest) : start+int(rest)], true
}

// entries appends every entry of the block, copied into arena, to dst.
func (b *block) entries(dst [][]byte, arena []byte) ([][]byte, []byte, error) {
	var key []byte
	off := 0
	for i := range b.n {
		if i%restartEvery == 0 && off != b.restart(i/restartEvery) {
			return dst, arena, fmt.Errorf("%w: restart %d is not where entry %d starts", errBlock, i/restartEvery, i)
		}
		var ok bool
		if key, off, ok = b.entryAt(off, key); !ok {
			return dst, arena, fmt.Errorf("%w: entry %d cannot be read", errBlock, i)
		}
		start := len(arena)
		arena = append(arena, key...)
		dst = append(dst, arena[start:len(arena):len(arena)])
	}
	if off != len(b.data) {
		return dst, arena, fmt.Errorf("%w: %d bytes after its %d entries", errBlock, len(b.data)-off, b.n)
	}
	return dst, arena, nil
}

// parseBlock checks the block v stored under key and opens it: its
// checksum, its header, and that its first entry is its key. The entries
// past the first are checked as they are read (a damaged one ends the
// read with errBlock); their order is not checked here (Verify does): the
// checksum proves the bytes are the ones written, and the writer sorts
// them.
func parseBlock(key, v []byte) (block, error) {
	if len(v) < blockHeader+2 || v[0] != blockVersion {
		return block{}, fmt.Errorf("%w: %d bytes, version %d", errBlock, len(v), firstByte(v))
	}
	if crc32.Update(crc32.Checksum(v[5:], castagnoli), castagnoli, key) != binary.BigEndian.Uint32(v[1:5]) {
		return block{}, fmt.Errorf("%w: checksum mismatch", errBlock)
	}
	n := int(binary.BigEndian.Uint16(v[5:7]))
	r := int(binary.BigEndian.Uint16(v[7:9]))
	if n == 0 || r != (n+restartEvery-1)/restartEvery || len(v) < blockHeader+2*r {
		return block{}, fmt.Errorf("%w: %d entries and %d restarts in %d bytes", errBlock, n, r, len(v))
	}
	b := block{n: n, restarts: v[blockHeader : blockHeader+2*r], data: v[blockHeader+2*r:]}
	prev := -1
	for i := range r {
		off := b.restart(i)
		if off <= prev || off >= len(b.data) {
			return block{}, fmt.Errorf("%w: restart %d at %d (after %d, in %d bytes)", errBlock, i, off, prev, len(b.data))
		}
		prev = off
	}
	if b.restart(0) != 0 {
		return block{}, fmt.Errorf("%w: its first entry is not at its start", errBlock)
	}
	if first, ok := b.restartKey(0); !ok || !bytes.Equal(first, key) {
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

// sharedPrefix returns the length of the prefix a and b share, comparing
// eight bytes at a time.
func sharedPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for ; i < n && a[i] == b[i]; i++ {
	}
	return i
}

// entrySize is the bytes an entry of length n takes in a block, sharing
// shared bytes with the one before it; at a restart point (shared 0) it
// also takes a restart offset.
func entrySize(n, shared int, restart bool) int {
	size := uvarintLen(uint64(shared)) + uvarintLen(uint64(n-shared)) + n - shared
	if restart {
		size += 2
	}
	return size
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// shares returns, for each entry, the bytes it shares with the one before
// it (0 for the first).
func shares(entries [][]byte) []int {
	out := make([]int, len(entries))
	for i := 1; i < len(entries); i++ {
		out[i] = sharedPrefix(entries[i-1], entries[i])
	}
	return out
}

// blockSize is the stored size of a block of these entries.
func blockSize(entries [][]byte) int {
	return runSize(entries, shares(entries))
}

func runSize(entries [][]byte, shared []int) int {
	n := blockHeader
	for i, e := range entries {
		if i%restartEvery == 0 {
			n += entrySize(len(e), 0, true)
		} else {
			n += entrySize(len(e), shared[i], false)
		}
	}
	return n
}

// appendBlock appends the block of entries (at least one, ascending) to dst.
// Its key is entries[0].
func appendBlock(dst []byte, entries [][]byte) []byte {
	return appendRun(dst, entries, shares(entries))
}

// appendRun is appendBlock given what each entry shares with the one
// before it (shared[0] is ignored).
func appendRun(dst []byte, entries [][]byte, shared []int) []byte {
	start := len(dst)
	r := (len(entries) + restartEvery - 1) / restartEvery
	dst = append(dst, blockVersion, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(entries)))
	dst = binary.BigEndian.AppendUint16(dst, uint16(r))
	restarts := len(dst)
	dst = append(dst, make([]byte, 2*r)...)
	data := len(dst)
	for i, e := range entries {
		sh := shared[i]
		if i%restartEvery == 0 {
			binary.BigEndian.PutUint16(dst[restarts+2*(i/restartEvery):], uint16(len(dst)-data))
			sh = 0
		}
		dst = binary.AppendUvarint(dst, uint64(sh))
		dst = binary.AppendUvarint(dst, uint64(len(e)-sh))
		dst = append(dst, e[sh:]...)
	}
	sum := crc32.Update(crc32.Checksum(dst[start+5:], castagnoli), castagnoli, entries[0])
	binary.BigEndian.PutUint32(dst[start+1:], sum)
	return dst
}

// splitBlocks cuts entries (ascending) into runs that each fit a block,
// returned with what each entry shares with the one before it. At the end
// of the index (tail), where new keys are appended in order, runs are
// packed full, as the records are; elsewhere the entries are spread
// evenly over as few blocks as hold them, so that each has room left for
// the keys that will arrive between its own.
func splitBlocks(entries [][]byte, tail bool) (runs [][][]byte, shared [][]int) {
	limit := tune.IndexBlockBytes
	sh := shares(entries)
	total := runSize(entries, sh)
	if total <= limit || len(entries) == 1 {
		return [][][]byte{entries}, [][]int{sh}
	}
	target := limit
	if !tail {
		parts := (total + limit - 1) / limit
		target = (total + parts - 1) / parts
	}
	start, size := 0, blockHeader
	for i, e := range entries {
		j := i - start
		add := entrySize(len(e), sh[i], j%restartEvery == 0)
		if j%restartEvery == 0 {
			add = entrySize(len(e), 0, true)
		}
		if j > 0 && (size+add > target || size+add > limit) {
			runs, shared = append(runs, entries[start:i:i]), append(shared, sh[start:i:i])
			start, size = i, blockHeader
			add = entrySize(len(e), 0, true)
		}
		size += add
	}
	return append(runs, entries[start:]), append(shared, sh[start:])
}

// blockCursor walks the entries of a blocked index's blocks as one sorted
// run of keys, with the moves of a kv.Cursor. A key it returns is its own
// copy, valid until its next move (the engine's walks copy what they
// keep). A damaged block ends the walk as if the index ended there and
// reports the damage through fail, which makes the transaction fail (see
// Tx.damage): no answer read past it is ever used.
type blockCursor struct {
	bc     kv.Cursor
	bkey   []byte // the key of the block it is in
	blk    block
	i      int    // the entry it is on
	next   int    // where the entry after it starts
	key    []byte // the entry it is on
	shared int    // after a Next within a block: the bytes key shares with the entry before; -1: not known
	fail   func(error)
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
		c.damaged(k, err)
		return false
	}
	c.blk, c.bkey = blk, k
	return true
}

func (c *blockCursor) damaged(k []byte, err error) {
	c.fail(fmt.Errorf("%w: block %x: %v", ErrCorrupt, k, err))
	c.blk, c.shared = block{}, -1
}

// at decodes entry i, reading from the restart point before it.
func (c *blockCursor) at(i int) []byte {
	c.shared = -1
	r := i / restartEvery
	off := c.blk.restart(r)
	c.key = c.key[:0]
	for j := r * restartEvery; j <= i; j++ {
		var ok bool
		if c.key, off, ok = c.blk.entryAt(off, c.key); !ok {
			c.damaged(c.bkey, fmt.Errorf("%w: entry %d cannot be read", errBlock, j))
			return nil
		}
	}
	c.i, c.next = i, off
	return c.key
}

func (c *blockCursor) First() ([]byte, []byte) {
	if !c.load(c.bc.First()) {
		return nil, nil
	}
	return c.at(0), nil
}

func (c *blockCursor) Last() ([]byte, []byte) {
	if !c.load(c.bc.Last()) {
		return nil, nil
	}
	return c.at(c.blk.n - 1), nil
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
		return c.at(0), nil
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
	// The last restart point at or below seek, then a walk from it.
	lo, hi := 0, len(c.blk.restarts)/2
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		rk, ok := c.blk.restartKey(m)
		if !ok {
			c.damaged(c.bkey, fmt.Errorf("%w: restart %d cannot be read", errBlock, m))
			return nil, nil
		}
		if bytes.Compare(rk, seek) <= 0 {
			lo = m
		} else {
			hi = m
		}
	}
	key := c.at(lo * restartEvery)
	for key != nil && bytes.Compare(key, seek) < 0 {
		key, _ = c.Next()
	}
	return key, nil
}

func (c *blockCursor) Next() ([]byte, []byte) {
	if c.blk.n == 0 {
		return nil, nil
	}
	if c.i+1 < c.blk.n {
		var ok bool
		if c.key, c.next, c.shared, ok = c.blk.entrySharing(c.next, c.key); !ok {
			c.damaged(c.bkey, fmt.Errorf("%w: entry %d cannot be read", errBlock, c.i+1))
			return nil, nil
		}
		c.i++
		if c.i%restartEvery == 0 {
			c.shared = -1 // a restart point is stored whole: what it shares is not known
		}
		return c.key, nil
	}
	if !c.load(c.bc.Next()) {
		return nil, nil
	}
	return c.at(0), nil
}

func (c *blockCursor) Prev() ([]byte, []byte) {
	if c.blk.n == 0 {
		return nil, nil
	}
	if c.i > 0 {
		return c.at(c.i - 1), nil
	}
	if !c.load(c.bc.Prev()) {
		return nil, nil
	}
	return c.at(c.blk.n - 1), nil
}

// Delete is not a move of index cursors: entries change through the
// index's own writes.
func (c *blockCursor) Delete() error {
	return fmt.Errorf("storh: internal error: deleting through an index cursor")
}
