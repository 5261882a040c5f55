package postgres

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/kv"
)

// Runs (kv.RunSequencer) beyond what kvtest checks: the stretches a run
// is stored as when its numbers are not consecutive, and runs committed
// side by side by two stores, trimmed as they go.

// runShape: entries of 4 bytes, a flag and 3 that lead a side value's
// key (a writer, a commit and a place, in the concurrent test).
var runShape = kv.RunShape{Tag: 0x80, Size: 4, SideFlag: 0x10, SideKey: 3}

// makeRunBuckets makes top-level bucket "s", its runs "r", side values
// "b" and counter "n", and starts the counter.
func makeRunBuckets(t *testing.T, s *Store) {
	t.Helper()
	update := func(fn func(tx kv.Tx) error) {
		tx, err := s.Begin(true)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if err := fn(tx); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	update(func(tx kv.Tx) error {
		top, err := tx.CreateBucket([]byte("s"))
		if err != nil {
			return err
		}
		for _, name := range []string{"r", "b"} {
			if _, err := top.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		return top.Put([]byte("n"), make([]byte, 8))
	})
	update(func(tx kv.Tx) error {
		top := tx.Bucket([]byte("s"))
		return top.Bucket([]byte("r")).(kv.RunSequencer).StartSequence(top, []byte("n"))
	})
}

// commitRun commits entries as one run, with a side value, the entry
// itself, of each flagged one, and trims to keep (0: no trim).
func commitRun(s *Store, entries [][]byte, keep int64) error {
	tx, err := s.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	top := tx.Bucket([]byte("s"))
	rs := top.Bucket([]byte("r")).(kv.RunSequencer)
	shape := runShape
	shape.Side = top.Bucket([]byte("b"))
	r := kv.Run{Shape: shape, Entries: bytes.Join(entries, nil)}
	for i, e := range entries {
		if e[0]&shape.SideFlag != 0 {
			r.SideOf, r.Sides = append(r.SideOf, i), append(r.Sides, e)
		}
	}
	if err := rs.SequenceRun(top, []byte("n"), r); err != nil {
		return err
	}
	if keep > 0 {
		if err := rs.TrimRuns(keep, keep/8, 64+2*len(entries), shape); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// storedRuns reads the runs (first number → entries, each in a slice of
// its own), the side values and the floor.
func storedRuns(t *testing.T, s *Store) (runs map[uint64][][]byte, sides map[string][]byte, floor uint64) {
	t.Helper()
	tx, err := s.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	top := tx.Bucket([]byte("s"))
	runs, sides = map[uint64][][]byte{}, map[string][]byte{}
	c := top.Bucket([]byte("r")).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v[0] != runShape.Tag || (len(v)-1)%runShape.Size != 0 {
			t.Fatalf("run %x: %x is not a run of %d-byte entries", k, v, runShape.Size)
		}
		var es [][]byte
		for e := range slicesChunk(v[1:], runShape.Size) {
			es = append(es, bytes.Clone(e))
		}
		runs[binary.BigEndian.Uint64(k)] = es
	}
	c = top.Bucket([]byte("b")).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		sides[string(k)] = bytes.Clone(v)
	}
	floor = binary.BigEndian.Uint64(top.Get([]byte("n")))
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	return runs, sides, floor
}

func slicesChunk(b []byte, n int) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(b) >= n {
			if !yield(b[:n]) {
				return
			}
			b = b[n:]
		}
	}
}

// sideKey is the key of entry e's side value, numbered seq.
func sideKey(e []byte, seq uint64) string {
	return string(binary.BigEndian.AppendUint64(bytes.Clone(e[1:1+runShape.SideKey]), seq))
}

// A run whose numbers are not consecutive (here every other one: the
// sequence steps by 2, as if a concurrent commit drew between each) is
// stored as one value per stretch of consecutive numbers, each under its
// first, and each side value under its entry's own number; a trim takes
// the stretches with their side values.
func TestSequenceRunSplit(t *testing.T) {
	s := openStore(t)
	makeRunBuckets(t, s)
	tx, err := s.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	id := tx.Bucket([]byte("s")).(*bucket).id
	_ = tx.Rollback()
	seq := s.sequenceName(id, []byte("n"))
	if _, err := s.pool.Exec(ctx, "ALTER SEQUENCE "+seq+" INCREMENT BY 2"); err != nil {
		t.Fatal(err)
	}
	entries := [][]byte{[]byte("\x11a00"), []byte("\x01a01"), []byte("\x11a02")}
	if err := commitRun(s, entries, 0); err != nil {
		t.Fatal(err)
	}
	runs, sides, _ := storedRuns(t, s)
	want := map[uint64][][]byte{1: entries[:1], 3: entries[1:2], 5: entries[2:]}
	if fmt.Sprint(runs) != fmt.Sprint(want) {
		t.Fatalf("runs %q, want %q", runs, want)
	}
	wantSides := map[string][]byte{sideKey(entries[0], 1): entries[0], sideKey(entries[2], 5): entries[2]}
	if fmt.Sprint(sides) != fmt.Sprint(wantSides) {
		t.Fatalf("side values %q, want %q", sides, wantSides)
	}

	// Consecutive again: a run of 2 at 6 and 7, and a trim to keep 2 of
	// up to 7 takes the stretches 1, 3 and 5 and their side values.
	if _, err := s.pool.Exec(ctx, "ALTER SEQUENCE "+seq+" INCREMENT BY 1"); err != nil {
		t.Fatal(err)
	}
	more := [][]byte{[]byte("\x11b00"), []byte("\x01b01")}
	if err := commitRun(s, more, 2); err != nil {
		t.Fatal(err)
	}
	runs, sides, floor := storedRuns(t, s)
	want = map[uint64][][]byte{6: more}
	wantSides = map[string][]byte{sideKey(more[0], 6): more[0]}
	if fmt.Sprint(runs) != fmt.Sprint(want) || fmt.Sprint(sides) != fmt.Sprint(wantSides) || floor != 5 {
		t.Fatalf("after the trim: runs %q, side values %q, floor %d; want %q, %q, 5", runs, sides, floor, want, wantSides)
	}
}

// Writers in two stores commit runs side by side, trimming as they go.
// Every number is given once, a commit's entries keep their order, every
// entry above the floor is kept, and the side values are exactly those
// of the flagged entries kept, each under its entry's number. A run of a
// concurrent commit may come between two numbers of another; the test
// logs how many runs were stored as more than one stretch.
func TestSequenceRunsConcurrent(t *testing.T) {
	url := pgtest.URL(t)
	stores := []*Store{openURL(t, url), openURL(t, url)}
	makeRunBuckets(t, stores[0])
	const writers, commits, keep = 4, 40, 300
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%len(stores)]
			for c := range commits {
				n := 1 + (w*7+c*13)%60
				var entries [][]byte
				for i := range n {
					flag := byte(1)
					if i%3 == 0 {
						flag |= runShape.SideFlag
					}
					entries = append(entries, []byte{flag, byte(w), byte(c), byte(i)})
				}
				// Numbers and trims take no lock a writer waits for,
				// so nothing conflicts: no commit needs a retry.
				if err := commitRun(s, entries, keep); err != nil {
					errs <- fmt.Errorf("writer %d, commit %d: %w", w, c, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	runs, sides, floor := storedRuns(t, stores[1])
	seen := map[uint64][]byte{} // number → entry
	stretches := map[[2]byte]int{}
	for first, es := range runs {
		stretches[[2]byte{es[0][1], es[0][2]}]++
		for i, e := range es {
			n := first + uint64(i)
			if seen[n] != nil {
				t.Fatalf("number %d given twice", n)
			}
			seen[n] = e
			if e[0]&runShape.SideFlag == 0 {
				continue
			}
			if v, ok := sides[sideKey(e, n)]; !ok || !bytes.Equal(v, e) {
				t.Fatalf("entry %x, number %d: side value %x, %v", e, n, v, ok)
			}
			delete(sides, sideKey(e, n))
		}
	}
	if len(sides) > 0 {
		t.Fatalf("%d side values of no entry kept, one under %x", len(sides), firstKey(sides))
	}
	// Above the floor no number is missing but those never drawn: each
	// commit's entries are there in their order, with rising numbers.
	last := map[[2]byte][2]uint64{} // commit → place and number of its last entry seen
	var top uint64
	for n := range seen {
		top = max(top, n)
	}
	for n := floor + 1; n <= top; n++ {
		e := seen[n]
		if e == nil {
			continue
		}
		k := [2]byte{e[1], e[2]}
		if p, ok := last[k]; ok && (uint64(e[3]) != p[0]+1 || n <= p[1]) {
			t.Fatalf("number %d: entry %x after place %d at %d", n, e, p[0], p[1])
		}
		last[k] = [2]uint64{uint64(e[3]), n}
	}
	split := 0
	for _, n := range stretches {
		if n > 1 {
			split++
		}
	}
	t.Logf("%d runs kept above floor %d, up to %d; %d of them stored as more than one stretch", len(runs), floor, top, split)
	if top-floor < keep {
		t.Fatalf("kept %d numbers above the floor, fewer than keep %d", top-floor, keep)
	}
}

func firstKey(m map[string][]byte) string {
	for k := range m {
		return k
	}
	return ""
}

// BenchmarkFeedShapes is what a feed of changes adds to a durable commit
// of n records of 250 bytes, by how the changes are stored: none; a value
// each, holding its record (Sequencer.Sequence); or one run of 17-byte
// entries, holding none (RunSequencer.SequenceRun). Compare in one run:
//
//	go test ./storh/postgres -run '^$' -bench FeedShapes -count 6
func BenchmarkFeedShapes(b *testing.B) {
	s := openStore(b)
	tx, err := s.Begin(true)
	if err != nil {
		b.Fatal(err)
	}
	top, err := tx.CreateBucket([]byte("c"))
	if err == nil {
		_, err = top.CreateBucket([]byte("rec"))
	}
	if err == nil {
		_, err = top.CreateBucket([]byte("f"))
	}
	if err == nil {
		err = top.Put([]byte("n"), make([]byte, 8))
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		b.Fatal(err)
	}
	tx, _ = s.Begin(true)
	top = tx.Bucket([]byte("c"))
	if err := top.Bucket([]byte("f")).(kv.Sequencer).StartSequence(top, []byte("n")); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	value := bytes.Repeat([]byte("v"), 250)
	var next uint64
	for _, n := range []int{1, 1000} {
		for _, shape := range []string{"none", "values", "run", "values+trim", "run+trim"} {
			b.Run(fmt.Sprintf("n=%d/feed=%s", n, shape), func(b *testing.B) {
				b.ReportAllocs()
				entries := make([]byte, 17*n)
				for b.Loop() {
					tx, err := s.Begin(true)
					if err != nil {
						b.Fatal(err)
					}
					top := tx.Bucket([]byte("c"))
					recs, feed := top.Bucket([]byte("rec")), top.Bucket([]byte("f")).(kv.RunSequencer)
					for i := range n {
						next++
						key := binary.BigEndian.AppendUint64(make([]byte, 8, 16), next)
						if err := recs.(kv.Inserter).Insert(key, value); err != nil {
							b.Fatal(err)
						}
						e := entries[17*i : 17*(i+1)]
						e[0] = 1
						copy(e[1:], key)
						switch shape {
						case "values", "values+trim":
							if err := feed.Sequence(top, []byte("n"), append(bytes.Clone(e), value...)); err != nil {
								b.Fatal(err)
							}
						}
					}
					if strings.HasPrefix(shape, "run") {
						if err := feed.SequenceRun(top, []byte("n"), kv.Run{Shape: kv.RunShape{Tag: 0x80, Size: 17}, Entries: entries}); err != nil {
							b.Fatal(err)
						}
					}
					switch shape {
					case "values+trim":
						err = feed.TrimSequence(10_000, 1250, 64+2*n)
					case "run+trim":
						err = feed.TrimRuns(10_000, 1250, 64+2*n, kv.RunShape{Tag: 0x80, Size: 17})
					}
					if err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// A run larger than a row holds is stored in rows of consecutive numbers,
// each under its first and in its table's page (runRowBytes), its side
// values under their entries' numbers, and trimmed a row at a time.
func TestSequenceRunRows(t *testing.T) {
	s := openStore(t)
	makeRunBuckets(t, s)
	perRow := (runRowBytes - 1) / runShape.Size
	n := 2*perRow + 7
	var entries [][]byte
	for i := range n {
		flag := byte(1)
		if i == 0 || i == perRow || i == n-1 {
			flag |= runShape.SideFlag
		}
		entries = append(entries, []byte{flag, byte(i >> 8), byte(i), 'x'})
	}
	if err := commitRun(s, entries, 0); err != nil {
		t.Fatal(err)
	}
	runs, sides, _ := storedRuns(t, s)
	p := uint64(perRow)
	want := map[uint64][][]byte{1: entries[:perRow], 1 + p: entries[perRow : 2*perRow], 1 + 2*p: entries[2*perRow:]}
	if fmt.Sprint(runs) != fmt.Sprint(want) {
		t.Fatalf("rows from %v, want rows from 1, %d and %d", keysOf(runs), 1+p, 1+2*p)
	}
	wantSides := map[string][]byte{
		sideKey(entries[0], 1): entries[0], sideKey(entries[perRow], 1+p): entries[perRow], sideKey(entries[n-1], uint64(n)): entries[n-1],
	}
	if fmt.Sprint(sides) != fmt.Sprint(wantSides) {
		t.Fatalf("side values %q, want %q", sides, wantSides)
	}
	// Keep 8: a commit of one change trims at most 66 (one row at least):
	// the first row; the next commit the second. The third, which holds
	// changes kept, stays whole.
	for i, wantFloor := range []uint64{p, 2 * p} {
		if err := commitRun(s, [][]byte{{1, 0xff, byte(i), 'y'}}, 8); err != nil {
			t.Fatal(err)
		}
		runs, sides, floor := storedRuns(t, s)
		if len(runs) != 3 || runs[1+2*p] == nil || len(sides) != 2-i || floor != wantFloor {
			t.Fatalf("after trim %d: rows from %v, %d side values, floor %d; want 3 rows, %d side values, floor %d",
				i+1, keysOf(runs), len(sides), floor, 2-i, wantFloor)
		}
	}
}

func keysOf(m map[uint64][][]byte) []uint64 {
	var out []uint64
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
