package engine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"slices"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/tidwall/btree"

	"github.com/storhdb/storh-go/storh/kv"
)

// The journal of a blocked index (see index_block.go). Each commit that
// changes an index's entries appends one record (more for a very large
// commit) under the next sequence number; the index definition keeps the
// last sequence written (Seq) and the last one folded into the blocks and
// removed from the journal (Floor). A record:
//
//	byte  0       journalVersion
//	bytes 1-4     CRC-32C of the rest of the record, then of its 8-byte key
//	bytes 5-8     n, the number of changes, big-endian
//	then          n changes in ascending key order, each:
//	              a flag byte (0 put, 1 delete), a uvarint length, the key
//
// A change puts or deletes one entry key. Reading the index, a key's
// latest change wins over the blocks (and the latest of all, a write
// transaction's own, over the journal); applying a change again is
// harmless, so a fold may rewrite blocks in several transactions, and a
// crash between them, while readers see the same entries throughout.
const (
	journalVersion = 1
	journalHeader  = 9

	opPut = 0
	opDel = 1
)

// maxJournalRecord bounds the bytes of one journal record: a transaction
// that changes more writes several, under consecutive sequences.
const maxJournalRecord = 1 << 20

var errJournal = errors.New("damaged index journal record")

// ixOp is one change of an index entry, as the journal holds it (seq: its
// record) or as a write transaction holds it before it commits
// (seqPending).
type ixOp struct {
	key []byte
	seq uint64
	del bool
}

// seqPending marks the changes of the transaction that reads them: they
// come after everything journaled.
const seqPending = math.MaxUint64

// opLess orders changes by key, and a key's changes newest first.
func opLess(a, b ixOp) bool {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.seq > b.seq
}

// opTree holds a write transaction's changes until it flushes them: one per
// key (seqPending), in key order.
type opTree = btree.BTreeG[ixOp]

func newOpTree() *opTree {
	return btree.NewBTreeGOptions(opLess, btree.Options{NoLocks: true})
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// sortOps sorts changes by opLess.
func sortOps(ops []ixOp) {
	slices.SortFunc(ops, func(a, b ixOp) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(b.seq, a.seq)
	})
}

// appendJournal encodes ops (ascending, one per key) as journal records,
// from sequence seq+1 on, and calls put for each. It returns the last
// sequence used.
func appendJournal(ops []ixOp, seq uint64, put func(seq uint64, rec []byte) error) (uint64, error) {
	var rec []byte
	n := 0
	flushRec := func() error {
		if n == 0 {
			return nil
		}
		seq++
		binary.BigEndian.PutUint32(rec[5:], uint32(n))
		key := seqKey(seq)
		binary.BigEndian.PutUint32(rec[1:], crc32.Update(crc32.Checksum(rec[5:], castagnoli), castagnoli, key))
		err := put(seq, rec)
		rec, n = nil, 0 // the store may keep rec until the transaction ends
		return err
	}
	for _, op := range ops {
		if rec == nil {
			rec = append(make([]byte, 0, 4096), journalVersion, 0, 0, 0, 0, 0, 0, 0, 0)
		}
		flag := byte(opPut)
		if op.del {
			flag = opDel
		}
		rec = append(rec, flag)
		rec = binary.AppendUvarint(rec, uint64(len(op.key)))
		rec = append(rec, op.key...)
		n++
		if len(rec) >= maxJournalRecord {
			if err := flushRec(); err != nil {
				return seq, err
			}
		}
	}
	return seq, flushRec()
}

// journalOps calls fn for each change of the journal record v stored under
// key, in its order; the keys alias v.
func journalOps(key, v []byte, fn func(op ixOp)) (count int, err error) {
	if len(key) != 8 || len(v) < journalHeader || v[0] != journalVersion {
		return 0, fmt.Errorf("%w: %d-byte key, %d bytes, version %d", errJournal, len(key), len(v), firstByte(v))
	}
	if crc32.Update(crc32.Checksum(v[5:], castagnoli), castagnoli, key) != binary.BigEndian.Uint32(v[1:5]) {
		return 0, fmt.Errorf("%w: checksum mismatch", errJournal)
	}
	seq := binary.BigEndian.Uint64(key)
	n := int(binary.BigEndian.Uint32(v[5:9]))
	rest := v[journalHeader:]
	var prev []byte
	for i := range n {
		if len(rest) < 2 || rest[0] > opDel {
			return i, fmt.Errorf("%w: change %d of %d cut short or of an unknown kind", errJournal, i, n)
		}
		del := rest[0] == opDel
		l, w := binary.Uvarint(rest[1:])
		if w <= 0 || w != (bits.Len64(l)+6)/7 || l == 0 || l > uint64(len(rest)-1-w) {
			return i, fmt.Errorf("%w: change %d of %d has a bad length", errJournal, i, n)
		}
		k := rest[1+w : 1+w+int(l) : 1+w+int(l)]
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			return i, fmt.Errorf("%w: change %d of %d is out of order", errJournal, i, n)
		}
		fn(ixOp{key: k, seq: seq, del: del})
		prev = k
		rest = rest[1+w+int(l):]
	}
	if len(rest) != 0 {
		return n, fmt.Errorf("%w: %d bytes after its %d changes", errJournal, len(rest), n)
	}
	return n, nil
}

// journalCount returns the number of changes a journal record holds,
// from its header (checked by journalOps when it is read).
func journalCount(v []byte) int64 {
	if len(v) < journalHeader {
		return 0
	}
	return int64(binary.BigEndian.Uint32(v[5:9]))
}

// readJournal returns the changes of the records after sequence from up
// to to, with their keys copied (they outlive the transaction), sorted by
// opLess.
func readJournal(j kv.Bucket, from, to uint64) ([]ixOp, error) {
	var ops []ixOp
	cur := j.Cursor()
	want := from + 1
	for k, v := cur.Seek(seqKey(from + 1)); k != nil; k, v = cur.Next() {
		if len(k) != 8 {
			return nil, fmt.Errorf("%w: a journal key of %d bytes", errs.ErrCorrupt, len(k))
		}
		seq := binary.BigEndian.Uint64(k)
		if seq > to {
			break
		}
		if seq != want {
			return nil, fmt.Errorf("%w: journal record %d is missing", errs.ErrCorrupt, want)
		}
		want++
		arena := make([]byte, 0, len(v))
		if _, err := journalOps(k, v, func(op ixOp) {
			start := len(arena)
			arena = append(arena, op.key...)
			op.key = arena[start:len(arena):len(arena)]
			ops = append(ops, op)
		}); err != nil {
			return nil, fmt.Errorf("%w: journal record %d: %v", errs.ErrCorrupt, seq, err)
		}
	}
	if want != to+1 {
		return nil, fmt.Errorf("%w: journal record %d is missing", errs.ErrCorrupt, want)
	}
	sortOps(ops)
	return ops, nil
}
