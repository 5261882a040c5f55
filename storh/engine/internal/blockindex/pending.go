package blockindex

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/storhdb/storh-go/storh/kv"
)

// Pending is a write transaction's changes to a blocked index until it
// flushes them: one per key (a later change of a key replaces an earlier
// one), readable in key order by the transaction itself.
//
// Most transactions only write (a batch of puts): their changes are
// appended as they come and sorted once, when read or flushed. A
// transaction that reads between its writes (a unique index checks every
// record it writes; a query inside Update) would sort its whole log at
// every read; after a few such reads its changes move into a B-tree,
// which takes each change in order as it comes.
type Pending struct {
	ops    []ixOp // ops[:sorted] in key order, one per key; the rest as they came
	sorted int
	merges int     // reads that had to sort new changes in
	tree   *opTree // once reads and writes interleave
	arena  []byte  // holds the keys
}

// treeAfter is how many reads that sort new changes in a transaction makes
// before its changes go into a tree.
const treeAfter = 4

func (p *Pending) Empty() bool {
	return p == nil || (p.tree == nil && len(p.ops) == 0) || (p.tree != nil && p.tree.Len() == 0)
}

func (p *Pending) Add(key []byte, del bool) {
	// The caller's key is scratch: the change keeps a copy, in an arena
	// that grows in chunks (the keys of a full chunk stay where they are).
	if cap(p.arena)-len(p.arena) < len(key) {
		p.arena = make([]byte, 0, max(32<<10, len(key)))
	}
	start := len(p.arena)
	p.arena = append(p.arena, key...)
	op := ixOp{key: p.arena[start:len(p.arena):len(p.arena)], seq: seqPending, del: del}
	if p.tree != nil {
		p.tree.Set(op)
		return
	}
	op.seq = uint64(len(p.ops)) // until sorted: its place, which decides between changes of a key
	p.ops = append(p.ops, op)
}

// inOrder sorts the changes that came since the last read in, and returns
// them all in key order, one per key.
func (p *Pending) inOrder() []ixOp {
	if p.tree != nil {
		out := make([]ixOp, 0, p.tree.Len())
		p.tree.Scan(func(op ixOp) bool {
			out = append(out, op)
			return true
		})
		return out
	}
	if p.sorted == len(p.ops) {
		return p.ops
	}
	tail := p.ops[p.sorted:]
	// By key, then as they came: of a key's changes, the last is the one.
	slices.SortFunc(tail, func(a, b ixOp) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	tail = lastOfEach(tail)
	for i := range tail {
		tail[i].seq = seqPending
	}
	if p.sorted == 0 {
		p.ops = tail
	} else {
		p.ops = mergeNewer(p.ops[:p.sorted], tail)
	}
	p.sorted = len(p.ops)
	return p.ops
}

// Source returns the changes as an index cursor source.
func (p *Pending) Source() Source {
	if p.tree == nil && p.sorted < len(p.ops) && p.sorted > 0 {
		if p.merges++; p.merges >= treeAfter {
			tree := newOpTree()
			for _, op := range p.inOrder() {
				tree.Load(op)
			}
			p.tree, p.ops, p.sorted = tree, nil, 0
		}
	}
	if p.tree != nil {
		return newOpSource(p.tree, seqPending)
	}
	return &flatSource{ops: p.inOrder()}
}

// lastOfEach keeps, of each run of changes with the same key, the last.
func lastOfEach(ops []ixOp) []ixOp {
	out := ops[:0]
	for i, op := range ops {
		if i+1 < len(ops) && bytes.Equal(ops[i+1].key, op.key) {
			continue
		}
		out = append(out, op)
	}
	return out
}

// mergeNewer merges two runs in key order, one change per key; on a key in
// both, newer's.
func mergeNewer(older, newer []ixOp) []ixOp {
	out := make([]ixOp, 0, len(older)+len(newer))
	for len(older) > 0 && len(newer) > 0 {
		switch c := bytes.Compare(older[0].key, newer[0].key); {
		case c < 0:
			out, older = append(out, older[0]), older[1:]
		case c > 0:
			out, newer = append(out, newer[0]), newer[1:]
		default:
			out, older, newer = append(out, newer[0]), older[1:], newer[1:]
		}
	}
	return append(append(out, older...), newer...)
}

// Journal writes the changes to journal as records after sequence seq
// (appendJournal), all with the last sequence written, since a
// transaction's records commit together,. It returns that
// sequence, the number of changes written, and the changes as a segment
// for the transaction's own reads and, once it commits, for the DB's
// view (Mem.PublishCommit). Errors of the store are returned as it gave
// them.
func (p *Pending) Journal(journal kv.Bucket, seq uint64) (after uint64, changes int64, seg *Segment, err error) {
	ops := p.inOrder()
	after, err = appendJournal(ops, seq, func(seq uint64, rec []byte) error {
		changes += journalCount(rec)
		return journal.Put(seqKey(seq), rec)
	})
	if err != nil {
		return seq, 0, nil, err
	}
	for i := range ops {
		ops[i].seq = after
	}
	return after, changes, newSegment(ops), nil
}
