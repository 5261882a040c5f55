package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"

	"github.com/storhdb/storh-go/storh/internal/errs"

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
//	              each, under the lower bound of their range, in one chain
//	"l"/<name>/   journal: 8-byte sequence → the changes of one commit
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
//	bytes 5-6     n, the number of entries, big-endian
//	bytes 7-8     r, the number of restart points: one every restartEvery
//	              entries, from the first
//	bytes 9-10    m, the length of the successor key (0: the last block)
//	then          the successor: the bucket key of the next block
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
//
// The blocks tile the key space in one chain, as the pages of a B-link
// tree do with their high keys. A block's bucket key is the lower bound
// of its range, not necessarily its first entry: a fold that deletes the
// first entry keeps the block under the same key, so no neighbour ever
// needs rewriting to follow a move, and a block a split starts goes under
// the shortest key between the runs (separator), which keeps both its
// bucket key and the successor its neighbour names short. The first block is
// filed under headKey, below every entry, and exists even when the index
// is empty (it is then the only block with no entries); every block names
// its successor, the upper bound of its range. A block that vanished
// whole (a damaged page of the blocks bucket dropped an element) leaves
// that chain broken where a read crosses it: the next key is not the one
// named, a seek lands in a block whose range ends before the key sought,
// or the index does not start at headKey. The read then fails with
// ErrCorrupt instead of answering without the block.
//
// Version 1 (files of format 2) had no successor (bytes 9-10 absent) and
// filed each block under its first entry: such blocks are read as they
// are, without the chain's checks, until a writer rewrites them
// (chainStep).
const (
	blockVersion  = 2
	blockVersion1 = 1
	blockHeader   = 11 // of a block of this version, its successor aside
	blockHeader1  = 9
	restartEvery  = 16
)

// headKey is the bucket key of a chained index's first block: below every
// entry key (each starts with entryWhole or entryElement and is longer).
var headKey = []byte{0}

// errBlock is wrapped by every damaged-block error; errBlockMissing by
// those of a block that is not there.
var (
	errBlock        = errors.New("damaged index block")
	errBlockMissing = fmt.Errorf("%w: a block is missing", errBlock)
)

// block is a checked block: its data aliases the stored value.
type block struct {
	n        int
	restarts []byte // r big-endian uint16
	data     []byte
	chained  bool   // version 2: succ is known
	succ     []byte // the next block's key; empty: the last block
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
// checksum, its header, and where its first entry lies (at or above its
// key; for version 1, its key). The entries past the first are checked as
// they are read (a damaged one ends the read with errBlock); their order,
// and that they lie below the successor, is not checked here (Verify
// does): the checksum proves the bytes are the ones written, and the
// writer sorts them.
func parseBlock(key, v []byte) (block, error) {
	header := blockHeader
	if len(v) > 0 && v[0] == blockVersion1 {
		header = blockHeader1
	}
	if len(v) < header || v[0] != blockVersion && v[0] != blockVersion1 {
		return block{}, fmt.Errorf("%w: %d bytes, version %d", errBlock, len(v), firstByte(v))
	}
	if crc32.Update(crc32.Checksum(v[5:], castagnoli), castagnoli, key) != binary.BigEndian.Uint32(v[1:5]) {
		return block{}, fmt.Errorf("%w: checksum mismatch", errBlock)
	}
	n := int(binary.BigEndian.Uint16(v[5:7]))
	r := int(binary.BigEndian.Uint16(v[7:9]))
	b := block{n: n, chained: v[0] == blockVersion}
	if b.chained {
		m := int(binary.BigEndian.Uint16(v[9:11]))
		if len(v) < header+m || m > 0 && bytes.Compare(v[header:header+m], key) <= 0 {
			return block{}, fmt.Errorf("%w: a successor of %d bytes that is not above its key, or past its end", errBlock, m)
		}
		b.succ = v[header : header+m : header+m]
		header += m
	}
	if n == 0 && b.chained && r == 0 && len(v) == header && len(b.succ) == 0 && bytes.Equal(key, headKey) {
		return b, nil // the only block of an empty index
	}
	if n == 0 || r != (n+restartEvery-1)/restartEvery || len(v) < header+2*r {
		return block{}, fmt.Errorf("%w: %d entries and %d restarts in %d bytes", errBlock, n, r, len(v))
	}
	b.restarts, b.data = v[header:header+2*r], v[header+2*r:]
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
	first, ok := b.restartKey(0)
	switch {
	case !ok:
		return block{}, fmt.Errorf("%w: its first entry cannot be read", errBlock)
	case b.chained && bytes.Compare(first, key) < 0:
		return block{}, fmt.Errorf("%w: its first entry is below its key", errBlock)
	case !b.chained && !bytes.Equal(first, key):
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

// blockSize is the stored size of a block of these entries, its
// successor aside.
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

// appendBlock appends the block of entries (ascending, at or above key, below
// succ), filed under key, to dst.
func appendBlock(dst, key []byte, entries [][]byte, succ []byte) []byte {
	return appendRun(dst, key, entries, shares(entries), succ)
}

// appendRun is appendBlock given what each entry shares with the one
// before it (shared[0] is ignored).
func appendRun(dst, key []byte, entries [][]byte, shared []int, succ []byte) []byte {
	start := len(dst)
	r := (len(entries) + restartEvery - 1) / restartEvery
	dst = append(dst, blockVersion, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(entries)))
	dst = binary.BigEndian.AppendUint16(dst, uint16(r))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(succ)))
	dst = append(dst, succ...)
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
	sum := crc32.Update(crc32.Checksum(dst[start+5:], castagnoli), castagnoli, key)
	binary.BigEndian.PutUint32(dst[start+1:], sum)
	return dst
}

// splitBlocks cuts entries (ascending), the range up to hi (nil: the end
// of the index), into runs that each fit a block together with the
// successor it names (the separator before the next run, or hi),
// returned with what each entry shares with the one before it. At the end
// of the index, where new keys are appended in order, runs are packed
// full, as the records are; elsewhere the entries are spread evenly over
// as few blocks as hold them, so that each has room left for the keys
// that will arrive between its own.
func splitBlocks(entries [][]byte, hi []byte) (runs [][][]byte, shared [][]int) {
	limit := tune.IndexBlockBytes
	sh := shares(entries)
	total := runSize(entries, sh)
	if total+len(hi) <= limit || len(entries) <= 1 {
		return [][][]byte{entries}, [][]int{sh}
	}
	target := limit
	if hi != nil {
		parts := (total + limit - 1) / limit
		target = (total + parts - 1) / parts
	}
	// A run that ends at entry i names as its successor the separator
	// before entry i+1, one byte longer than what the two share (see
	// separator), or hi.
	succ := func(i int) int {
		if i+1 < len(entries) {
			return sh[i+1] + 1
		}
		return len(hi)
	}
	start, size := 0, blockHeader
	for i, e := range entries {
		j := i - start
		add := entrySize(len(e), sh[i], j%restartEvery == 0)
		if j%restartEvery == 0 {
			add = entrySize(len(e), 0, true)
		}
		if j > 0 && (size+add > target || size+add+succ(i) > limit) {
			runs, shared = append(runs, entries[start:i:i]), append(shared, sh[start:i:i])
			start, size = i, blockHeader
			add = entrySize(len(e), 0, true)
		}
		size += add
	}
	return append(runs, entries[start:]), append(shared, sh[start:])
}

// separator returns the shortest key s with a < s <= b (a below b): the
// bucket key of a block whose first entry is b, after a block whose last
// entry is a. A block is filed under the lower bound of its range, which
// need not be an entry, and the shorter it is the less every block that
// names it, and bbolt's pages that hold it, take.
func separator(a, b []byte) []byte {
	n := sharedPrefix(a, b) + 1
	return b[:n:n]
}

// blockCursor walks the entries of a blocked index's blocks as one sorted
// run of keys, with the moves of a kv.Cursor. A key it returns is its own
// copy, valid until its next move (the engine's walks copy what they
// keep). A damaged block, or a block missing from the chain where a move
// crosses it, ends the walk as if the index ended there and reports the
// damage through fail, which makes the transaction fail (see Tx.damage),
// and keeps it in err for a caller that must fail at once (a unique
// check): no answer read past it is ever used.
type blockCursor struct {
	bc      kv.Cursor
	index   string // the index's name, for messages
	chained bool   // every block of the index is chained: the head block must be there
	bkey    []byte // the key of the block it is in
	blk     block
	i       int    // the entry it is on
	next    int    // where the entry after it starts
	key     []byte // the entry it is on
	shared  int    // after a Next within a block: the bytes key shares with the entry before; -1: not known
	fail    func(error)
	err     error // the first damage met
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
	if err == nil && c.chained && !blk.chained {
		err = fmt.Errorf("%w: a block of version 1 in an index whose blocks are chained", errBlock)
	}
	if err != nil {
		c.damaged(k, err)
		return false
	}
	c.blk, c.bkey = blk, k
	return true
}

// loadFirst opens the block at k, the first of the bucket (nil: there is
// none), which must be where the index starts.
func (c *blockCursor) loadFirst(k, v []byte) bool {
	if k == nil {
		if c.chained {
			c.report(noHead(nil))
		}
		c.blk = block{}
		return false
	}
	return c.load(k, v) && c.starts()
}

// starts checks that the block it is in, which has none before it, is the
// first of the index.
func (c *blockCursor) starts() bool {
	if c.blk.chained && !bytes.Equal(c.bkey, headKey) {
		c.report(noHead(c.bkey))
		return false
	}
	return true
}

// follows checks that next, the bucket key after the block it is in (nil:
// none), is the successor that block names.
func (c *blockCursor) follows(next []byte) bool {
	if err := chainBreak(&c.blk, c.bkey, next); err != nil {
		c.report(err)
		return false
	}
	return true
}

// chainBreak returns the damage of the chain at block b, filed under key,
// when next (the key after it in the bucket; nil: none) is not the
// successor it names.
func chainBreak(b *block, key, next []byte) error {
	switch {
	case !b.chained || bytes.Equal(b.succ, next):
		return nil
	case len(b.succ) == 0:
		return fmt.Errorf("%w: block %x is the last, but block %x follows it", errBlock, key, next)
	case next == nil:
		return fmt.Errorf("%w: block %x, which block %x names as the next, is not there (no block follows)", errBlockMissing, b.succ, key)
	}
	return fmt.Errorf("%w: block %x, which block %x names as the next, is not there (block %x follows)", errBlockMissing, b.succ, key, next)
}

// noHead is the damage of a chained index whose blocks start at first
// (nil: it has none) instead of at headKey.
func noHead(first []byte) error {
	if first == nil {
		return fmt.Errorf("%w: the index has no blocks, not even its first (%x)", errBlockMissing, headKey)
	}
	return fmt.Errorf("%w: the index's first block (%x) is not there; its blocks start at %x", errBlockMissing, headKey, first)
}

func (c *blockCursor) damaged(k []byte, err error) {
	c.report(fmt.Errorf("block %x: %w", k, err))
}

// report ends the walk with the damage err.
func (c *blockCursor) report(err error) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: index %q: %w; Repair rebuilds the index", errs.ErrCorrupt, c.index, err)
		c.fail(c.err)
	}
	c.blk, c.shared = block{}, -1
}

// at decodes entry i, reading from the restart point before it; past the
// block's entries (the empty first block of an empty index) it ends the
// walk.
func (c *blockCursor) at(i int) []byte {
	c.shared = -1
	if i < 0 || i >= c.blk.n {
		c.blk = block{}
		return nil
	}
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
	if !c.loadFirst(c.bc.First()) {
		return nil, nil
	}
	if c.blk.n == 0 {
		// The empty index's only block: nothing may follow it.
		next, _ := c.bc.Next()
		c.follows(next)
		c.blk = block{}
		return nil, nil
	}
	return c.at(0), nil
}

func (c *blockCursor) Last() ([]byte, []byte) {
	k, v := c.bc.Last()
	if k == nil {
		return c.First() // no blocks: an empty index, unless it is chained
	}
	if !c.load(k, v) || !c.follows(nil) {
		return nil, nil
	}
	return c.at(c.blk.n - 1), nil
}

// Seek moves to the first entry at or after seek: in the block filed under
// seek, or in the one before it (whose range starts below seek), or at
// the start of the next. The block before must name the block after seek
// as its successor: otherwise the block whose range holds seek is missing.
func (c *blockCursor) Seek(seek []byte) ([]byte, []byte) {
	k, v := c.bc.Seek(seek)
	if k != nil && bytes.Equal(k, seek) {
		if !c.load(k, v) {
			return nil, nil
		}
		if c.blk.n == 0 {
			return c.First()
		}
		return c.at(0), nil
	}
	after := k
	if k == nil {
		k, v = c.bc.Last()
	} else {
		k, v = c.bc.Prev()
	}
	if k == nil {
		// seek is below every block: the first entry is the answer.
		return c.First()
	}
	if !c.load(k, v) || !c.follows(after) {
		return nil, nil
	}
	if c.blk.n == 0 {
		return c.First()
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
	k, v := c.bc.Next()
	if !c.follows(k) || !c.load(k, v) {
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
	from := c.bkey
	k, v := c.bc.Prev()
	if k == nil {
		c.starts()
		c.blk = block{}
		return nil, nil
	}
	if !c.load(k, v) || !c.follows(from) {
		return nil, nil
	}
	return c.at(c.blk.n - 1), nil
}

// Delete is not a move of index cursors: entries change through the
// index's own writes.
func (c *blockCursor) Delete() error {
	return fmt.Errorf("storh: internal error: deleting through an index cursor")
}
