package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math/bits"
	"path/filepath"
	"slices"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/errs"

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
		// At the end of the index, or in a range up to a key above them.
		tail := rapid.Bool().Draw(t, "tail")
		var hi []byte
		if !tail {
			hi = append(bytes.Clone(keys[len(keys)-1]), 0xff)
		}
		runs, shared := splitBlocks(keys, hi)
		var got [][]byte
		key := keys[0] // the first run's: its first entry, or any lower bound
		if rapid.Bool().Draw(t, "head") {
			key = headKey
		}
		for i, run := range runs {
			if len(run) == 0 {
				t.Fatalf("run %d is empty", i)
			}
			// Naming the separator before the next run, or the range's end.
			succ := hi
			if i+1 < len(runs) {
				succ = separator(run[len(run)-1], runs[i+1][0])
				if bytes.Compare(succ, run[len(run)-1]) <= 0 || bytes.Compare(succ, runs[i+1][0]) > 0 {
					t.Fatalf("separator %q is not above %q and at most %q", succ, run[len(run)-1], runs[i+1][0])
				}
			}
			if size := blockSize(run) + len(succ); size > tune.IndexBlockBytes && len(run) > 1 {
				t.Fatalf("run %d is %d bytes with its successor, over the %d limit, with %d entries", i, size, tune.IndexBlockBytes, len(run))
			}
			v := appendBlock(nil, key, run, succ)
			if !bytes.Equal(v, appendRun(nil, key, run, shared[i], succ)) {
				t.Fatalf("run %d: the shares splitBlocks gives encode another block", i)
			}
			if len(v) != blockSize(run)+len(succ) {
				t.Fatalf("run %d: %d bytes, blockSize says %d and its successor %d", i, len(v), blockSize(run), len(succ))
			}
			b, err := parseBlock(key, v)
			if err == nil {
				got, _, err = b.entries(got, nil)
			}
			if err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
			if !b.chained || !bytes.Equal(b.succ, succ) {
				t.Fatalf("run %d: successor %q, want %q", i, b.succ, succ)
			}
			// A damaged byte anywhere, or the block under another key, is
			// damage.
			bad := bytes.Clone(v)
			pos := rapid.IntRange(0, len(bad)-1).Draw(t, "pos")
			bad[pos] ^= byte(rapid.IntRange(1, 255).Draw(t, "flip"))
			if _, err := parseBlock(key, bad); err == nil {
				t.Fatalf("run %d: a flipped byte at %d passed", i, pos)
			}
			if other := append(bytes.Clone(key), 0); true {
				if _, err := parseBlock(other, v); err == nil {
					t.Fatalf("run %d: the block passed under another key", i)
				}
			}
			key = succ
		}
		if !slices.EqualFunc(got, keys, bytes.Equal) {
			t.Fatalf("blocks hold %q, want %q", got, keys)
		}
		// Packed at the tail: every block but the last is full enough that
		// the next entry would not have fitted, with the successor it would
		// then name.
		if tail {
			at := 0
			for i := 0; i+1 < len(runs); i++ {
				at += len(runs[i])
				more := append(slices.Clone(runs[i]), runs[i+1][0])
				succ := 0
				if at+1 < len(keys) {
					succ = len(separator(keys[at], keys[at+1]))
				}
				if blockSize(more)+succ <= tune.IndexBlockBytes {
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
	f.Add(keys[0], appendBlock(nil, keys[0], keys, nil))
	f.Add(headKey, appendBlock(nil, headKey, keys[:2], keys[2]))
	f.Add(headKey, appendBlock(nil, headKey, nil, nil))
	f.Add([]byte{0}, []byte{1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0})
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
		// A cursor over it reads what entries reads, or reports damage
		// where entries fails; neither panics.
		entries, _, entriesErr := b.entries(nil, nil)
		bc := &blockCursor{bc: noCursor{}, blk: b, bkey: key}
		var damaged error
		bc.fail = func(err error) { damaged = err }
		var walked [][]byte
		for k := bc.at(0); k != nil; k, _ = bc.Next() {
			walked = append(walked, bytes.Clone(k))
			if len(walked) > b.n {
				t.Fatal("the walk goes past the block's entries")
			}
		}
		if entriesErr == nil {
			// Past its last entry the walk finds no next block: damage
			// only when the block names one.
			if damaged != nil && (len(b.succ) == 0 || !errors.Is(damaged, errBlockMissing)) || !slices.EqualFunc(walked, entries, bytes.Equal) {
				t.Fatalf("walked %q (%v), entries %q", walked, damaged, entries)
			}
			// Sound entries encode to a block that reads the same.
			again, err := parseBlock(key, appendBlock(nil, key, entries, b.succ))
			var back [][]byte
			if err == nil {
				back, _, err = again.entries(nil, nil)
			}
			if err != nil || !slices.EqualFunc(back, entries, bytes.Equal) {
				t.Fatalf("re-encoded: %q, %v; want %q", back, err, entries)
			}
		}
	})
}

// FuzzJournalOps: a journal record either fails to parse or holds changes
// in strictly ascending order that encode back to the same record.
func FuzzJournalOps(f *testing.F) {
	var seeds [][2][]byte
	if _, err := appendJournal([]ixOp{{key: []byte("\x00a0123456789abcdef")}, {key: []byte("\x00b0123456789abcdef"), del: true}}, 6,
		func(seq uint64, rec []byte) error {
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
		var ops []ixOp
		n, err := journalOps(key, v, func(op ixOp) {
			if len(ops) > 0 && bytes.Compare(ops[len(ops)-1].key, op.key) >= 0 {
				t.Fatalf("changes out of order: %q after %q", op.key, ops[len(ops)-1].key)
			}
			ops = append(ops, op)
		})
		if err != nil {
			return
		}
		if n != len(ops) {
			t.Fatalf("%d changes counted, %d read", n, len(ops))
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
		move := rapid.IntRange(0, 5).Draw(t, "move")
		if !onKey && move >= 3 {
			move = rapid.IntRange(0, 2).Draw(t, "reposition")
		}
		if move == 5 {
			// A long walk forward, as an index scan makes: every key in turn.
			for range rapid.IntRange(1, 60).Draw(t, "run") {
				got, _ := cur.Next()
				exp := ref.Next()
				if !bytes.Equal(got, exp) || (got == nil) != (exp == nil) {
					t.Fatalf("step %d: Next in a walk = %q, want %q", step, got, exp)
				}
				if onKey = exp != nil; !onKey {
					break
				}
			}
			continue
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
			if err := writeBlocks(b, keys); err != nil {
				return err
			}
			var failed error
			checkCursorAgainst(rt, chainedCursor(b, func(err error) { failed = err }), keys, probes)
			if failed != nil {
				rt.Fatalf("sound blocks reported damage: %v", failed)
			}
			return nil
		})
	})
}

// chainedCursor is the cursor over the blocks of an index whose blocks
// are chained, as collIndex.cursor makes it.
func chainedCursor(b kv.Bucket, fail func(error)) *blockCursor {
	c := newBlockCursor(b, fail)
	c.chained = true
	return c
}

// TestBlockCursorFindsMissingBlock: with one block gone from the bucket
// (as a damaged page that lost an element leaves it), no move answers
// other than the whole index would without reporting damage, and a walk
// across the gap, either way, or a seek into it, reports it.
func TestBlockCursorFindsMissingBlock(t *testing.T) {
	setTune(t, "block=100")
	update := testBuckets(t)
	rapid.Check(t, func(rt *rapid.T) {
		keys := sortedUnique(rapid.SliceOfN(entryKeyGen(), 1, 80).Draw(rt, "keys"))
		update(func(b kv.Bucket) error {
			if err := wipe(b); err != nil {
				return err
			}
			if err := writeBlocks(b, keys); err != nil {
				return err
			}
			var blocks [][]byte
			c := b.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				blocks = append(blocks, bytes.Clone(k))
			}
			gone := rapid.IntRange(0, len(blocks)-1).Draw(rt, "gone")
			lost := blockEntries(rt, b, blocks[gone])
			if err := b.Delete(blocks[gone]); err != nil {
				return err
			}
			fresh := func() *blockCursor { return chainedCursor(b, func(error) {}) }
			// Walks across the gap, forward and back.
			cur := fresh()
			for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
			}
			if !errors.Is(cur.err, errs.ErrCorrupt) || !errors.Is(cur.err, errBlockMissing) {
				rt.Fatalf("a walk forward past block %d of %d: %v", gone, len(blocks), cur.err)
			}
			cur = fresh()
			for k, _ := cur.Last(); k != nil; k, _ = cur.Prev() {
			}
			if !errors.Is(cur.err, errBlockMissing) {
				rt.Fatalf("a walk back past block %d of %d: %v", gone, len(blocks), cur.err)
			}
			// A seek to an entry of the missing block.
			cur = fresh()
			probe := rapid.SampledFrom(lost).Draw(rt, "lost")
			if k, _ := cur.Seek(probe); k != nil || !errors.Is(cur.err, errBlockMissing) {
				rt.Fatalf("Seek(%q) in the missing block = %q, %v", probe, k, cur.err)
			}
			// Any moves: an answer other than the whole index's comes with
			// the damage reported.
			cur = fresh()
			ref := &refCursor{keys: keys, i: -1}
			probes := append(rapid.SliceOfN(entryKeyGen(), 1, 5).Draw(rt, "probes"), keys...)
			for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
				var got, exp []byte
				switch move := rapid.IntRange(0, 4).Draw(rt, "move"); {
				case move == 0 || ref.i < 0 && move > 2:
					got, _ = cur.First()
					exp = ref.First()
				case move == 1:
					got, _ = cur.Last()
					exp = ref.Last()
				case move == 2:
					k := rapid.SampledFrom(probes).Draw(rt, "seek")
					got, _ = cur.Seek(k)
					exp = ref.Seek(k)
				case move == 3:
					got, _ = cur.Next()
					exp = ref.Next()
				default:
					got, _ = cur.Prev()
					exp = ref.Prev()
				}
				if cur.err != nil {
					return nil
				}
				if !bytes.Equal(got, exp) {
					rt.Fatalf("step %d: %q, want %q, and no damage reported", step, got, exp)
				}
				if got == nil {
					ref.i = -1
				}
			}
			return nil
		})
	})
}

// blockEntries returns the entries of the block under key.
func blockEntries(rt *rapid.T, b kv.Bucket, key []byte) [][]byte {
	blk, err := parseBlock(key, b.Get(key))
	var entries [][]byte
	if err == nil {
		entries, _, err = blk.entries(nil, nil)
	}
	if err != nil {
		rt.Fatal(err)
	}
	return entries
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

// TestIxCursorModel: blocks merged with a view of journaled changes
// (several per key, in segments merged as commits come, some past the
// snapshot) and the reading transaction's own changes read as the set a
// brute-force replay of the same changes gives, under every move.
func TestIxCursorModel(t *testing.T) {
	update := testBuckets(t)
	rapid.Check(t, func(rt *rapid.T) {
		// Blocks of a few entries, or of enough to hold restart points.
		setTune(t, fmt.Sprintf("block=%d", rapid.SampledFrom([]int{100, 400, 4000}).Draw(rt, "block")))
		base := sortedUnique(rapid.SliceOfN(entryKeyGen(), 0, 120).Draw(rt, "blocks"))
		set := map[string]bool{}
		for _, k := range base {
			set[string(k)] = true
		}
		// Commits 1..n, each changing distinct keys; the reader sees up to
		// upto of them.
		commits := rapid.IntRange(0, 10).Draw(rt, "commits")
		upto := uint64(rapid.IntRange(0, commits).Draw(rt, "upto"))
		view := &ixView{}
		for seq := uint64(1); seq <= uint64(commits); seq++ {
			byKey := map[string]bool{}
			for range rapid.IntRange(1, 8).Draw(rt, "changes") {
				byKey[string(entryKeyGen().Draw(rt, "key"))] = rapid.Bool().Draw(rt, "del")
			}
			var ops []ixOp
			for k, del := range byKey {
				ops = append(ops, ixOp{key: []byte(k), seq: seq, del: del})
				if seq <= upto {
					set[k] = !del
				}
			}
			sortOps(ops)
			view = view.with(newSegment(ops), seq)
		}
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
			if err := writeBlocks(b, base); err != nil {
				return err
			}
			fail := func(err error) { rt.Fatalf("damage: %v", err) }
			checkCursorAgainst(rt, newIxCursor(chainedCursor(b, fail), newSegSource(view, upto), newOpSource(own, seqPending)), want, probes)
			// The view flattened to the snapshot (what a fold walks) reads
			// the same.
			checkCursorAgainst(rt, newIxCursor(chainedCursor(b, fail), &flatSource{ops: view.flatten(upto)}, newOpSource(own, seqPending)), want, probes)
			return nil
		})
	})
}

// TestFoldModel: rounds of journaled changes (puts and deletes anywhere,
// and now and then a delete of every entry, so that the index empties and
// fills again), each folded in steps of any size, leave blocks that hold
// exactly the replayed set, sound, in order, within the size limit, none
// too small but the last, in one whole chain from the head block; and a
// cursor over them reads that set under every move.
func TestFoldModel(t *testing.T) {
	setTune(t, "block=100")
	update := testBuckets(t)
	rapid.Check(t, func(rt *rapid.T) {
		base := sortedUnique(rapid.SliceOfN(entryKeyGen(), 0, 60).Draw(rt, "blocks"))
		set := map[string]bool{}
		for _, k := range base {
			set[string(k)] = true
		}
		update(func(b kv.Bucket) error {
			if err := wipe(b); err != nil {
				return err
			}
			return writeBlocks(b, base)
		})
		for range rapid.IntRange(1, 4).Draw(rt, "rounds") {
			view := &ixView{}
			var seq uint64
			change := func(k []byte, del bool) {
				seq++
				view = view.with(newSegment([]ixOp{{key: k, seq: seq, del: del}}), seq) // a key's later change wins
				set[string(k)] = !del
			}
			if rapid.IntRange(0, 3).Draw(rt, "empty") == 0 {
				for _, k := range slices.Sorted(maps.Keys(set)) {
					change([]byte(k), true)
				}
			}
			for range rapid.IntRange(0, 60).Draw(rt, "changes") {
				change(entryKeyGen().Draw(rt, "key"), rapid.Bool().Draw(rt, "del"))
			}
			var want [][]byte
			for k, in := range set {
				if in {
					want = append(want, []byte(k))
				}
			}
			slices.SortFunc(want, bytes.Compare)
			budget := rapid.IntRange(1, 400).Draw(rt, "budget")
			probes := append(rapid.SliceOfN(entryKeyGen(), 1, 10).Draw(rt, "probes"), want...)
			update(func(b kv.Bucket) error {
				if seq > 0 {
					foldInSteps(rt, b, view, seq, budget)
				}
				checkChain(rt, b, want)
				checkCursorAgainst(rt, chainedCursor(b, func(err error) { rt.Fatalf("damage: %v", err) }), want, probes)
				return nil
			})
		}
	})
}

// foldInSteps folds the changes of view up to upto into the blocks of b,
// in steps that each write about budget bytes, as foldStep does.
func foldInSteps(rt *rapid.T, b kv.Bucket, view *ixView, upto uint64, budget int) {
	src := newSegSource(view, upto)
	src.first()
	for steps := 0; ; steps++ {
		w := blockWriter{blocks: b}
		for k, _ := src.current(); k != nil && w.written < budget; k, _ = src.current() {
			if err := w.rewrite(src); err != nil {
				rt.Fatalf("rewrite: %v", err)
			}
		}
		next, _ := src.current()
		if next == nil {
			return
		}
		// A new step resumes at the next change.
		src = newSegSource(view, upto)
		src.seek(bytes.Clone(next))
		if steps > 1000 {
			rt.Fatal("the fold does not end")
		}
	}
}

// checkChain checks the blocks of b: they hold exactly want, each sound
// and within the size limit, none too small but the last, the first under
// headKey, each followed by the successor it names, the last naming none,
// each entry within its block's range.
func checkChain(rt *rapid.T, b kv.Bucket, want [][]byte) {
	var got [][]byte
	var sizes []int
	var prev block
	var prevKey []byte
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		blk, err := parseBlock(k, v)
		var run [][]byte
		if err == nil {
			run, _, err = blk.entries(nil, nil)
		}
		switch {
		case err != nil:
		case !blk.chained:
			err = errors.New("not chained")
		case prevKey == nil && !bytes.Equal(k, headKey):
			err = errors.New("the first block is not the head")
		case prevKey != nil:
			err = chainBreak(&prev, prevKey, k)
		}
		if err != nil {
			rt.Fatalf("block %q: %v", k, err)
		}
		if len(run) > 0 && (bytes.Compare(run[0], k) < 0 || len(blk.succ) > 0 && bytes.Compare(run[len(run)-1], blk.succ) >= 0) {
			rt.Fatalf("block %q holds %q..%q, outside its range up to %q", k, run[0], run[len(run)-1], blk.succ)
		}
		if len(run) > 1 && blockSize(run)+len(blk.succ) > tune.IndexBlockBytes {
			rt.Fatalf("block %q is %d bytes with its successor", k, blockSize(run)+len(blk.succ))
		}
		sizes = append(sizes, blockSize(run))
		got = append(got, run...)
		prev, prevKey = blk, bytes.Clone(k)
	}
	if prevKey == nil {
		rt.Fatal("no blocks: not even the head")
	}
	if err := chainBreak(&prev, prevKey, nil); err != nil {
		rt.Fatal(err)
	}
	if !slices.EqualFunc(got, want, bytes.Equal) {
		rt.Fatalf("blocks hold\n%q\nwant\n%q", got, want)
	}
	for i, size := range sizes[:len(sizes)-1] {
		if size < tune.IndexBlockBytes/4 {
			rt.Fatalf("block %d of %d holds %d bytes, below a quarter of the limit", i, len(sizes), size)
		}
	}
}

// TestViewSegmentsStayFew: commits of any sizes leave a view of about the
// log of their count in segments, holding every change once.
func TestViewSegmentsStayFew(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		view := &ixView{}
		total := 0
		commits := rapid.IntRange(1, 300).Draw(rt, "commits")
		for seq := uint64(1); seq <= uint64(commits); seq++ {
			n := rapid.IntRange(1, 50).Draw(rt, "size")
			ops := make([]ixOp, n)
			for i := range ops {
				ops[i] = ixOp{key: fmt.Appendf(nil, "%08d-%04d", seq, i), seq: seq}
			}
			total += n
			view = view.with(newSegment(ops), seq)
		}
		held := 0
		for _, s := range view.segs {
			held += s.len()
			for i := 1; i < s.len(); i++ {
				if bytes.Compare(s.key(i-1), s.key(i)) > 0 {
					rt.Fatal("a segment out of order")
				}
			}
		}
		// Each segment is under half the one before it (with a factor
		// for the sizes commits come in): a few dozen at most.
		if held != total || len(view.segs) > 2*bits.Len(uint(total))+2 {
			rt.Fatalf("%d commits, %d changes: %d segments holding %d", commits, total, len(view.segs), held)
		}
	})
}

// noCursor is a bucket with nothing more in it, either way.
type noCursor struct{}

func (noCursor) First() ([]byte, []byte)      { return nil, nil }
func (noCursor) Last() ([]byte, []byte)       { return nil, nil }
func (noCursor) Seek([]byte) ([]byte, []byte) { return nil, nil }
func (noCursor) Next() ([]byte, []byte)       { return nil, nil }
func (noCursor) Prev() ([]byte, []byte)       { return nil, nil }
func (noCursor) Delete() error                { return nil }

// TestPendingModel: a transaction's changes, written and read in any
// interleaving (so that they move into a tree part way for some runs),
// read as the latest change of each key, in key order.
func TestPendingModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := &pending{}
		want := map[string]bool{}
		for range rapid.IntRange(1, 80).Draw(rt, "steps") {
			if rapid.IntRange(0, 3).Draw(rt, "read") > 0 {
				k, del := entryKeyGen().Draw(rt, "key"), rapid.Bool().Draw(rt, "del")
				p.add(k, del)
				want[string(k)] = del
				continue
			}
			src := p.source()
			var got []string
			for src.first(); ; src.next() {
				k, del := src.current()
				if k == nil {
					break
				}
				if want[string(k)] != del {
					rt.Fatalf("key %q reads del=%v, want %v", k, del, want[string(k)])
				}
				got = append(got, string(k))
			}
			keys := slices.Sorted(maps.Keys(want))
			if !slices.Equal(got, keys) {
				rt.Fatalf("read %q, want %q", got, keys)
			}
		}
		ops := p.inOrder()
		if len(ops) != len(want) {
			rt.Fatalf("%d changes in order, want %d", len(ops), len(want))
		}
		for i, op := range ops {
			if i > 0 && bytes.Compare(ops[i-1].key, op.key) >= 0 || want[string(op.key)] != op.del {
				rt.Fatalf("change %d: %q del=%v", i, op.key, op.del)
			}
		}
	})
}
