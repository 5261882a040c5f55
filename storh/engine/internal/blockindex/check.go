package blockindex

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/storhdb/storh-go/storh/kv"
)

// State is what an index definition records of a blocked index: whether
// its blocks are chained, the journal's sequences (the last written, the
// last folded, the end of a fold under way, 0 when none) and the number of
// changes the journal holds.
type State struct {
	Chained            bool
	Seq, Floor, FoldTo uint64
	Pending            int64
}

// Check checks a blocked index's own structure: every block sound (its
// checksum, its entries in order and within its range), the chain whole
// (the first block under headKey, each block followed by the one it
// names, the last naming none), and a journal of sound records under
// every sequence from Floor to Seq, holding as many changes as s counts.
// It reports the first finding, with the bucket key it concerns (nil:
// none), and stops there; step is called with the bytes of each stored
// value read, and its error ends the check.
func Check(blocks, journal kv.Bucket, s State, report func(key []byte, format string, args ...any), step func(n int) error) error {
	var last, prevKey []byte
	var prev block
	bc := blocks.Cursor()
	k, v := bc.First()
	if k == nil && s.Chained {
		report(headKey, "%v", noHead(nil))
		return nil
	}
	for ; k != nil; k, v = bc.Next() {
		if err := step(len(v)); err != nil {
			return err
		}
		if v == nil {
			report(k, "a nested bucket among the blocks")
			return nil
		}
		b, err := parseBlock(k, v)
		var entries [][]byte
		switch {
		case err != nil:
		case s.Chained && !b.chained:
			err = fmt.Errorf("%w: a block of version 1 in an index whose blocks are chained", ErrDamagedBlock)
		case prevKey == nil && b.chained && !bytes.Equal(k, headKey):
			err = noHead(k)
		case prevKey != nil && !prev.chained && b.chained:
			err = fmt.Errorf("%w: a chained block after one of version 1", ErrDamagedBlock)
		default:
			err = chainBreak(&prev, prevKey, k)
		}
		if err == nil {
			entries, _, err = b.entries(nil, nil)
		}
		if err != nil {
			report(k, "%v", err)
			return nil
		}
		for i, e := range entries {
			if last != nil && bytes.Compare(last, e) >= 0 {
				report(k, "%v: entry %d is not above the one before it", ErrDamagedBlock, i)
				return nil
			}
			last = e
		}
		if b.chained && len(b.succ) > 0 && last != nil && bytes.Compare(last, b.succ) >= 0 {
			report(k, "%v: its last entry is not below its successor %x", ErrDamagedBlock, b.succ)
			return nil
		}
		prev, prevKey = b, k
	}
	if err := chainBreak(&prev, prevKey, nil); err != nil {
		report(prev.succ, "%v", err)
		return nil
	}
	if s.Floor > s.Seq || s.FoldTo != 0 && (s.FoldTo <= s.Floor || s.FoldTo > s.Seq) {
		report(nil, "the journal's sequences disagree: floor %d, seq %d, folding to %d", s.Floor, s.Seq, s.FoldTo)
		return nil
	}
	var pending int64
	want := s.Floor + 1
	jc := journal.Cursor()
	for k, v := jc.First(); k != nil; k, v = jc.Next() {
		if err := step(len(v)); err != nil {
			return err
		}
		if len(k) != 8 || binary.BigEndian.Uint64(k) != want || want > s.Seq {
			report(k, "a journal record out of place (want sequence %d of %d to %d)", want, s.Floor+1, s.Seq)
			return nil
		}
		n, err := journalOps(k, v, func(ixOp) {})
		if err != nil {
			report(k, "journal record %d: %v", want, err)
			return nil
		}
		pending += int64(n)
		want++
	}
	if want != s.Seq+1 {
		report(nil, "the journal ends at sequence %d, the definition at %d", want-1, s.Seq)
	} else if pending != s.Pending {
		report(nil, "the journal holds %d changes, the definition counts %d", pending, s.Pending)
	}
	return nil
}

// BlockEntries returns the entries of the block v stored under key, for
// tools and tests that read the blocks bucket themselves.
func BlockEntries(key, v []byte) ([][]byte, error) {
	b, err := parseBlock(key, v)
	if err != nil {
		return nil, err
	}
	entries, _, err := b.entries(nil, nil)
	return entries, err
}
