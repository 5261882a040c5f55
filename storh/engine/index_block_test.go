package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/kv"
)

func setTune(t testing.TB, settings string) {
	t.Helper()
	restore, err := tune.Set(settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
}

// entryKeyGen makes entry keys of the shape an index holds (a kind byte,
// a value key, a 16-byte id), from a small alphabet so that keys share
// prefixes and collide.
func entryKeyGen() *rapid.Generator[[]byte] {
	return rapid.Custom(func(t *rapid.T) []byte {
		k := []byte{byte(rapid.IntRange(0, 1).Draw(t, "kind"))}
		k = append(k, rapid.SliceOfN(rapid.ByteRange('a', 'd'), 0, 6).Draw(t, "value")...)
		var id [16]byte
		id[15] = byte(rapid.IntRange(0, 3).Draw(t, "id"))
		return append(k, id[:]...)
	})
}

func sortedUnique(keys [][]byte) [][]byte {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, bytes.Compare)
	return slices.CompactFunc(keys, bytes.Equal)
}

func TestBlockRoundTrip(t *testing.T) {
	setTune(t, "block=120")
	rapid.Check(t, func(t *rapid.T) {
		keys := sortedUnique(rapid.SliceOfN(entryKeyGen(), 1, 60).Draw(t, "keys"))
		tail := rapid.Bool().Draw(t, "tail")
		runs := splitBlocks(keys, tail)
		var got [][]byte
		for i, run := range runs {
			if len(run) == 0 {
				t.Fatalf("run %d is empty", i)
			}
			if size := blockSize(run); size > tune.IndexBlockBytes && len(run) > 1 {
				t.Fatalf("run %d is %d bytes, over the %d limit, with %d entries", i, size, tune.IndexBlockBytes, len(run))
			}
			v := appendBlock(nil, run)
			b, err := parseBlock(run[0], v)
			if err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
			for j := range b.n {
				got = append(got, b.entry(j))
			}
			// A damaged byte anywhere, or the block under another key, is
			// damage.
			bad := bytes.Clone(v)
			pos := rapid.IntRange(0, len(bad)-1).Draw(t, "pos")
			bad[pos] ^= byte(rapid.IntRange(1, 255).Draw(t, "flip"))
			if _, err := parseBlock(run[0], bad); err == nil {
				t.Fatalf("run %d: a flipped byte at %d passed", i, pos)
			}
			if other := append(bytes.Clone(run[0]), 0); true {
				if _, err := parseBlock(other, v); err == nil {
					t.Fatalf("run %d: the block passed under another key", i)
				}
			}
		}
		if !slices.EqualFunc(got, keys, bytes.Equal) {
			t.Fatalf("blocks hold %q, want %q", got, keys)
		}
		// Packed at the tail: every block but the last is full enough that
		// the next entry would not have fitted.
		if tail {
			for i := 0; i+1 < len(runs); i++ {
				if blockSize(runs[i])+2+len(runs[i+1][0]) <= tune.IndexBlockBytes {
					t.Fatalf("tail block %d has room for the next entry", i)
				}
			}
		}
	})
}

// FuzzParseBlock: any bytes under any key either fail to parse or are a
// block whose entries lie within it and which encodes back to itself.
func FuzzParseBlock(f *testing.F) {
	keys := [][]byte{[]byte("\x00a0123456789abcdef"), []byte("\x00b0123456789abcdef"), []byte("\x01c0123456789abcdef")}
	f.Add(keys[0], appendBlock(nil, keys))
	f.Add(keys[2], appendBlock(nil, keys[2:]))
	f.Add([]byte{0}, []byte{1, 0, 0, 0, 0, 0, 1, 0, 1, 0})
	f.Fuzz(func(t *testing.T, key, v []byte) {
		if len(v) >= 5 {
			// Seal it, so that the checks past the checksum are explored.
			v = bytes.Clone(v)
			binary.BigEndian.PutUint32(v[1:], crc32.Update(crc32.Checksum(v[5:], castagnoli), castagnoli, key))
		}
		b, err := parseBlock(key, v)
		if err != nil {
			return
		}
		entries := make([][]byte, b.n)
		for i := range b.n {
			entries[i] = b.entry(i)
		}
		if again := appendBlock(nil, entries); !bytes.Equal(again, v) {
			t.Fatalf("re-encoded block differs:\n%x\n%x", again, v)
		}
	})
}

// FuzzJournalOps: a journal record either fails to parse or holds changes
// in strictly ascending order that encode back to the same record.
func FuzzJournalOps(f *testing.F) {
	tree := newOpTree()
	tree.Set(ixOp{key: []byte("\x00a0123456789abcdef"), seq: seqPending})
	tree.Set(ixOp{key: []byte("\x00b0123456789abcdef"), seq: seqPending, del: true})
	var seeds [][2][]byte
	if _, err := appendJournal(tree, 6, func(seq uint64, rec []byte) error {
		seeds = append(seeds, [2][]byte{seqKey(seq), rec})
		return nil
	}); err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Add(seqKey(1), []byte{1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, key, v []byte) {
		if len(v) >= 5 {
			v = bytes.Clone(v)
			binary.BigEndian.PutUint32(v[1:], crc32.Update(crc32.Checksum(v[5:], castagnoli), castagnoli, key))
		}
		ops := newOpTree()
		var prev []byte
		n, err := journalOps(key, v, func(op ixOp) {
			if prev != nil && bytes.Compare(prev, op.key) >= 0 {
				t.Fatalf("changes out of order: %q after %q", op.key, prev)
			}
			prev = op.key
			op.seq = seqPending
			ops.Set(op)
		})
		if err != nil {
			return
		}
		if n != ops.Len() {
			t.Fatalf("%d changes counted, %d read", n, ops.Len())
		}
		if n == 0 {
			return // appendJournal writes no empty record
		}
		var again []byte
		if _, err := appendJournal(ops, binary.BigEndian.Uint64(key)-1, func(_ uint64, rec []byte) error {
			again = append(again, rec...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(v) < maxJournalRecord && !bytes.Equal(again, v) {
			t.Fatalf("re-encoded record differs:\n%x\n%x", again, v)
		}
	})
}

// testBuckets opens a bbolt file through the engine's adapter and returns
// an update helper that runs fn on a bucket inside one transaction.
func testBuckets(t testing.TB) func(fn func(b kv.Bucket) error) {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "b.db"), Options{UnsafeNoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return func(fn func(b kv.Bucket) error) {
		t.Helper()
		if err := db.run(true, func(ktx kv.Tx) error {
			b, err := ktx.CreateBucketIfNotExists([]byte("t"))
			if err != nil {
				return err
			}
			return fn(b)
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// refCursor is the reference for index cursors: a sorted slice, moved by
// the same rules (after a nil, only First, Last or Seek).
type refCursor struct {
	keys [][]byte
	i    int // -1: off the ends
}

func (r *refCursor) at() []byte {
	if r.i < 0 || r.i >= len(r.keys) {
		r.i = -1
		return nil
	}
	return r.keys[r.i]
}

func (r *refCursor) First() []byte { r.i = 0; return r.at() }
func (r *refCursor) Last() []byte  { r.i = len(r.keys) - 1; return r.at() }
func (r *refCursor) Seek(k []byte) []byte {
	r.i, _ = slices.BinarySearchFunc(r.keys, k, bytes.Compare)
	return r.at()
}
func (r *refCursor) Next() []byte {
	if r.i < 0 {
		return nil
	}
	r.i++
	return r.at()
}
func (r *refCursor) Prev() []byte {
	if r.i < 0 {
		return nil
	}
	r.i--
	return r.at()
}

// checkCursorAgainst drives cur and the reference with the same random
// moves and fails at the first answer that differs.
func checkCursorAgainst(t *rapid.T, cur kv.Cursor, want [][]byte, probes [][]byte) {
	ref := &refCursor{keys: want}
	onKey := false
	for step := range rapid.IntRange(1, 80).Draw(t, "steps") {
		move := rapid.IntRange(0, 4).Draw(t, "move")
		if !onKey && move >= 3 {
			move = rapid.IntRange(0, 2).Draw(t, "reposition")
		}
		var got, exp []byte
		var name string
		switch move {
		case 0:
			name = "First"
			got, _ = cur.First()
			exp = ref.First()
		case 1:
			name = "Last"
			got, _ = cur.Last()
			exp = ref.Last()
		case 2:
			k := rapid.SampledFrom(probes).Draw(t, "seek")
			name = fmt.Sprintf("Seek(%q)", k)
			got, _ = cur.Seek(k)
			exp = ref.Seek(k)
		case 3:
			name = "Next"
			got, _ = cur.Next()
			exp = ref.Next()
		case 4:
			name = "Prev"
			got, _ = cur.Prev()
			exp = ref.Prev()
		}
		if !bytes.Equal(got, exp) || (got == nil) != (exp == nil) {
			t.Fatalf("step %d: %s = %q, want %q", step, name, got, exp)
		}
		onKey = exp != nil
	}
}

// TestBlockCursorModel: a walk over blocks answers every move as a sorted
// list of the same keys does.
func TestBlockCursorModel(t *testing.T) {
	setTune(t, "block=100")
	update := testBuckets(t)
	rapid.Check(t, func(rt *rapid.T) {
		keys := sortedUnique(rapid.SliceOfN(entryKeyGen(), 0, 80).Draw(rt, "keys"))
		probes := append(rapid.SliceOfN(entryKeyGen(), 1, 10).Draw(rt, "probes"), keys...)
		update(func(b kv.Bucket) error {
			if err := wipe(b); err != nil {
				return err
			}
			if len(keys) > 0 {
				if err := writeBlocks(b, keys); err != nil {
					return err
				}
			}
			var failed error
			checkCursorAgainst(rt, newBlockCursor(b, func(err error) { failed = err }), keys, probes)
			if failed != nil {
				rt.Fatalf("sound blocks reported damage: %v", failed)
			}
			return nil
		})
	})
}

func wipe(b kv.Bucket) error {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// TestIxCursorModel: blocks merged with journaled changes (several per
// key, some past the snapshot) and a transaction's own changes read as the
// set a brute-force replay of the same changes gives, under every move.
func TestIxCursorModel(t *testing.T) {
	setTune(t, "block=100")
	update := testBuckets(t)
	rapid.Check(t, func(rt *rapid.T) {
		base := sortedUnique(rapid.SliceOfN(entryKeyGen(), 0, 40).Draw(rt, "blocks"))
		set := map[string]bool{}
		for _, k := range base {
			set[string(k)] = true
		}
		view := newOpTree()
		upto := uint64(rapid.IntRange(1, 8).Draw(rt, "upto"))
		type change struct {
			key []byte
			seq uint64
			del bool
		}
		var changes []change
		for range rapid.IntRange(0, 40).Draw(rt, "journaled") {
			ch := change{key: entryKeyGen().Draw(rt, "key"), seq: uint64(rapid.IntRange(1, 10).Draw(rt, "seq")), del: rapid.Bool().Draw(rt, "del")}
			if _, dup := view.Get(ixOp{key: ch.key, seq: ch.seq}); dup {
				continue // one change per key and record
			}
			view.Set(ixOp{key: ch.key, seq: ch.seq, del: ch.del})
			changes = append(changes, ch)
		}
		// Replay: a key's journaled changes in sequence order, up to the
		// snapshot, then the transaction's own.
		slices.SortStableFunc(changes, func(a, b change) int { return int(a.seq) - int(b.seq) })
		for _, ch := range changes {
			if ch.seq <= upto {
				set[string(ch.key)] = !ch.del
			}
		}
		var srcs []ixSource
		own := newOpTree()
		for range rapid.IntRange(0, 20).Draw(rt, "own") {
			k, del := entryKeyGen().Draw(rt, "key"), rapid.Bool().Draw(rt, "del")
			own.Set(ixOp{key: k, seq: seqPending, del: del})
			set[string(k)] = !del
		}
		var want [][]byte
		for k, in := range set {
			if in {
				want = append(want, []byte(k))
			}
		}
		slices.SortFunc(want, bytes.Compare)
		probes := append(rapid.SliceOfN(entryKeyGen(), 1, 10).Draw(rt, "probes"), base...)
		update(func(b kv.Bucket) error {
			if err := wipe(b); err != nil {
				return err
			}
			if len(base) > 0 {
				if err := writeBlocks(b, base); err != nil {
					return err
				}
			}
			srcs = []ixSource{&kvSource{c: newBlockCursor(b, func(err error) { rt.Fatalf("damage: %v", err) })},
				newOpSource(view, upto), newOpSource(own, seqPending)}
			checkCursorAgainst(rt, &ixCursor{srcs: srcs}, want, probes)
			return nil
		})
	})
}

// TestFoldModel: folding journaled changes into blocks, in steps of any
// size, leaves blocks that hold exactly the replayed set, sound, in order,
// within the size limit, and none too small but the last.
func TestFoldModel(t *testing.T) {
	setTune(t, "block=100")
	update := testBuckets(t)
	rapid.Check(t, func(rt *rapid.T) {
		base := sortedUnique(rapid.SliceOfN(entryKeyGen(), 0, 60).Draw(rt, "blocks"))
		set := map[string]bool{}
		for _, k := range base {
			set[string(k)] = true
		}
		ops := newOpTree()
		for range rapid.IntRange(1, 60).Draw(rt, "changes") {
			k, del := entryKeyGen().Draw(rt, "key"), rapid.Bool().Draw(rt, "del")
			ops.Set(ixOp{key: k, seq: 1, del: del})
			set[string(k)] = !del
		}
		var want [][]byte
		for k, in := range set {
			if in {
				want = append(want, []byte(k))
			}
		}
		slices.SortFunc(want, bytes.Compare)
		budget := rapid.IntRange(1, 400).Draw(rt, "budget")
		update(func(b kv.Bucket) error {
			if err := wipe(b); err != nil {
				return err
			}
			if len(base) > 0 {
				if err := writeBlocks(b, base); err != nil {
					return err
				}
			}
			src := newOpSource(ops, 1)
			src.first()
			for steps := 0; ; steps++ {
				w := blockWriter{blocks: b}
				for k, _ := src.current(); k != nil && w.written < budget; k, _ = src.current() {
					if err := w.rewrite(src); err != nil {
						rt.Fatalf("rewrite: %v", err)
					}
				}
				if k, _ := src.current(); k == nil {
					break
				}
				// A new step resumes at the next change, as foldStep does.
				next, _ := src.current()
				src = newOpSource(ops, 1)
				src.seek(bytes.Clone(next))
				if steps > 1000 {
					rt.Fatal("the fold does not end")
				}
			}
			var got [][]byte
			var sizes []int
			c := b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				blk, err := parseBlock(k, v)
				if err != nil {
					rt.Fatalf("block %q: %v", k, err)
				}
				var run [][]byte
				for i := range blk.n {
					run = append(run, blk.entry(i))
				}
				if len(run) > 1 && blockSize(run) > tune.IndexBlockBytes {
					rt.Fatalf("block %q is %d bytes", k, blockSize(run))
				}
				sizes = append(sizes, blockSize(run))
				got = append(got, run...)
			}
			if !slices.EqualFunc(got, want, bytes.Equal) {
				rt.Fatalf("blocks hold\n%q\nwant\n%q", got, want)
			}
			for i, size := range sizes[:max(len(sizes)-1, 0)] {
				if size < tune.IndexBlockBytes/4 {
					rt.Fatalf("block %d of %d holds %d bytes, below a quarter of the limit", i, len(sizes), size)
				}
			}
			return nil
		})
	})
}
