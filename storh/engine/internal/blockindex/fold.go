package blockindex

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/kv"
)

// Folding a blocked index's journal into its blocks. A fold takes the
// changes journaled up to the moment it starts, walks them in key order,
// and rewrites each block they touch once, with all of that block's
// changes, then removes the folded records from the journal (DropFolded).
// Fold writes a bounded amount and returns where the next step starts, so
// a fold of a large index lets writers in between, and a crash resumes
// it. Since applying a change again is harmless, a reader sees the same
// entries before, during and after a fold.

// Fold applies the changes of v up to sequence upto, from the key from on
// (nil: from the first), to the chained blocks of the bucket blocks,
// writing about budget bytes of blocks at most (at least one block). It
// returns the key the next step starts from, nil when every change is in
// the blocks. Damage it meets wraps ErrDamagedBlock; errors of the store
// are returned as it gave them.
func Fold(blocks kv.Bucket, v *View, upto uint64, from []byte, budget int) (resume []byte, err error) {
	ops := &flatSource{ops: v.flatten(upto)}
	if from == nil {
		ops.first()
	} else {
		ops.seek(from)
	}
	w := blockWriter{blocks: blocks}
	for k, _ := ops.current(); k != nil; k, _ = ops.current() {
		if w.written >= budget {
			return bytes.Clone(k), nil
		}
		if err := w.rewrite(ops); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// DropFolded removes the journal records up to sequence upto, whose
// changes a fold has put in the blocks, and returns the number of
// changes they held.
func DropFolded(journal kv.Bucket, upto uint64) (changes int64, err error) {
	var folded [][]byte
	jc := journal.Cursor()
	for k, v := jc.First(); k != nil && len(k) == 8 && binary.BigEndian.Uint64(k) <= upto; k, v = jc.Next() {
		changes += journalCount(v)
		folded = append(folded, k)
	}
	for _, k := range folded {
		if err := journal.Delete(k); err != nil {
			return 0, err
		}
	}
	return changes, nil
}

// blockWriter applies changes to the chained blocks of an index, one
// block (and the neighbours a shrunk block takes in) at a time.
type blockWriter struct {
	blocks  kv.Bucket
	written int
	merged  [][]byte // scratch
}

// rewrite applies every change of ops that falls in the range of the
// block holding ops' current key, then moves ops past them. The range
// keeps its bounds, so no block outside it changes: its first run stays
// under the range's key, the others go under separators between the
// runs, each names the next as its successor, and the last names the
// range's successor. A range at the end of the index that empties hands
// the end to the block before it.
func (w *blockWriter) rewrite(ops Source) error {
	k, _ := ops.current()
	cur := w.blocks.Cursor()
	var olds [][]byte // keys of the blocks replaced, the range's own first
	var entries [][]byte
	hi, err := w.take(cur, k, &olds, &entries)
	if err != nil {
		return err
	}
	w.merged = w.merged[:0]
	for {
		w.merged = applyOps(w.merged, entries, ops, hi)
		if hi == nil || len(w.merged) > 0 && blockSize(w.merged) >= tune.IndexBlockBytes/4 {
			break
		}
		// Too small for a block of its own: take in the next one.
		entries = entries[:0]
		next, err := w.takeAt(cur, hi, &olds, &entries)
		if err != nil {
			return err
		}
		entries = append(append(entries[:0:0], w.merged...), entries...)
		w.merged = w.merged[:0]
		hi = next
	}
	lo := olds[0]
	if len(w.merged) == 0 && !bytes.Equal(lo, headKey) {
		return w.endBefore(cur, olds)
	}
	for _, old := range olds[1:] {
		if err := w.blocks.Delete(old); err != nil {
			return err
		}
	}
	written, err := putRange(w.blocks, lo, hi, w.merged)
	w.written += written
	return err
}

// putRange writes entries (ascending) as the blocks of the range from lo
// up to hi (nil: the end of the index), packed full at the end of the
// index and spread evenly elsewhere (splitBlocks): the first under lo,
// the others under the separator before their first entry, each naming
// the next, the last naming hi. It returns the bytes written.
func putRange(b kv.Bucket, lo, hi []byte, entries [][]byte) (written int, err error) {
	runs, shared := splitBlocks(entries, hi)
	key := lo
	for i, run := range runs {
		succ := hi
		if i+1 < len(runs) {
			succ = separator(run[len(run)-1], runs[i+1][0])
		}
		v := appendRun(nil, key, run, shared[i], succ)
		if err := b.Put(key, v); err != nil {
			return written, err
		}
		written += len(v)
		key = succ
	}
	return written, nil
}

// endBefore removes the blocks of olds, a range at the end of the index
// that holds no entry any more, and makes the block before it the last.
func (w *blockWriter) endBefore(cur kv.Cursor, olds [][]byte) error {
	if k, _ := cur.Seek(olds[0]); !bytes.Equal(k, olds[0]) {
		return fmt.Errorf("%w: block %x vanished while folding", ErrDamagedBlock, olds[0])
	}
	pk, pv := cur.Prev()
	if pk == nil {
		return noHead(olds[0])
	}
	var entries [][]byte
	if _, err := addBlock(pk, pv, olds[0], &entries); err != nil {
		return err
	}
	for _, old := range olds {
		if err := w.blocks.Delete(old); err != nil {
			return err
		}
	}
	b := appendBlock(nil, pk, entries, nil)
	w.written += len(b)
	return w.blocks.Put(pk, b)
}

// take finds the block whose range holds k (from its key up to its
// successor), adds its key to olds and its entries to entries, and
// returns its successor (nil: it is the last).
func (w *blockWriter) take(cur kv.Cursor, k []byte, olds, entries *[][]byte) (next []byte, err error) {
	bk, bv := cur.Seek(k)
	var after []byte
	if bk != nil && bytes.Equal(bk, k) {
		after, _ = cur.Next()
	} else {
		after = bk
		if bk == nil {
			bk, bv = cur.Last()
		} else {
			bk, bv = cur.Prev()
		}
		if bk == nil {
			return nil, noHead(after) // the head block is below every entry
		}
	}
	*olds = append(*olds, bk)
	return addBlock(bk, bv, after, entries)
}

// takeAt takes the block filed under key (the next one of a range).
func (w *blockWriter) takeAt(cur kv.Cursor, key []byte, olds, entries *[][]byte) (next []byte, err error) {
	bk, bv := cur.Seek(key)
	if bk == nil || !bytes.Equal(bk, key) {
		return nil, fmt.Errorf("%w: block %x vanished while folding", ErrDamagedBlock, key)
	}
	*olds = append(*olds, bk)
	after, _ := cur.Next()
	return addBlock(bk, bv, after, entries)
}

// addBlock checks the chained block v under key, whose next in the bucket
// is after (nil: none), adds its entries to entries, and returns its
// successor (nil: it is the last).
func addBlock(key, v, after []byte, entries *[][]byte) ([]byte, error) {
	b, err := parseBlock(key, v)
	if err == nil && !b.chained {
		err = fmt.Errorf("%w: a block of version 1 where the blocks are chained", ErrDamagedBlock)
	}
	if err == nil {
		err = chainBreak(&b, key, after)
	}
	if err == nil {
		*entries, _, err = b.entries(*entries, make([]byte, 0, len(v)))
	}
	if err != nil {
		return nil, fmt.Errorf("block %x: %w", key, err)
	}
	if len(b.succ) == 0 {
		return nil, nil
	}
	return b.succ, nil
}

// applyOps appends to dst the entries merged with the changes of ops below
// hi (nil: all of them), moving ops past those. The keys are the blocks'
// entries as decoded and the view's, which outlive the transaction's
// writes.
func applyOps(dst, entries [][]byte, ops Source, hi []byte) [][]byte {
	i := 0
	for k, del := ops.current(); k != nil && (hi == nil || bytes.Compare(k, hi) < 0); k, del = ops.current() {
		for i < len(entries) && bytes.Compare(entries[i], k) < 0 {
			dst = append(dst, entries[i])
			i++
		}
		if i < len(entries) && bytes.Equal(entries[i], k) {
			i++ // replaced by the change: kept below if it puts
		}
		if !del {
			dst = append(dst, k)
		}
		ops.next()
	}
	return append(dst, entries[i:]...)
}

// WriteBlocks fills the empty blocks bucket b with keys (ascending), packed
// full and chained from the head block (which an empty index has too): a
// rebuild, or the first block of an index.
func WriteBlocks(b kv.Bucket, keys [][]byte) error {
	_, err := putRange(b, headKey, nil, keys)
	return err
}

// Chain rewrites the version-1 blocks of the bucket blocks (a file of
// format 2) as chained blocks, in key order, writing about budget bytes
// of blocks at most: the same entries under the same keys, the first
// block under headKey, each naming the next. from is the key of the first
// block not chained yet (nil: start); Chain returns the one the next step
// starts from, nil when the chain is whole. An index with no blocks gets
// its head block alone. The caller checks, before the first step, that
// the blocks hold every entry: a version-1 index holds nothing that tells
// a missing block. Damage it meets wraps ErrDamagedBlock; errors of the
// store are returned as it gave them.
func Chain(blocks kv.Bucket, from []byte, budget int) (resume []byte, err error) {
	cur := blocks.Cursor()
	var k, v []byte
	if from == nil {
		k, v = cur.First()
	} else if k, v = cur.Seek(from); !bytes.Equal(k, from) {
		return nil, fmt.Errorf("%w: block %x, where chaining the blocks resumes, is not there", errBlockMissing, from)
	}
	if k == nil {
		return nil, blocks.Put(headKey, appendBlock(nil, headKey, nil, nil))
	}
	first, written := from == nil, 0
	for k != nil {
		if written >= budget {
			return bytes.Clone(k), nil
		}
		b, err := parseBlock(k, v)
		var entries [][]byte
		if err == nil && b.chained {
			err = fmt.Errorf("%w: a chained block among those of version 1", ErrDamagedBlock)
		}
		if err == nil {
			entries, _, err = b.entries(nil, make([]byte, 0, len(v)))
		}
		if err != nil {
			return nil, fmt.Errorf("block %x: %w", k, err)
		}
		key := bytes.Clone(k)
		next, _ := cur.Next()
		next = bytes.Clone(next)
		if first {
			// The first block: filed under headKey from now on.
			if err := blocks.Delete(key); err != nil {
				return nil, err
			}
			key, first = headKey, false
		}
		nb := appendBlock(nil, key, entries, next)
		if err := blocks.Put(key, nb); err != nil {
			return nil, err
		}
		written += len(nb)
		if next == nil {
			break
		}
		if k, v = cur.Seek(next); !bytes.Equal(k, next) {
			return nil, fmt.Errorf("storh: internal error: block %x vanished while chaining", next)
		}
	}
	return nil, nil
}
