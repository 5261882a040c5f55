package postgres

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/kv"
)

// Runs (kv.Sequencer) beyond what kvtest checks: the draw's lock, which
// a commit holds for the draw alone; a run stored in several rows; and
// runs committed side by side by two stores, trimmed as they go.

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
		return top.Bucket([]byte("r")).(kv.Sequencer).StartSequence(top, []byte("n"))
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
	// Held shared, as the engine's writers hold a collection: commits
	// draw and store side by side.
	top := tx.(kv.Locker).BucketShared([]byte("s"))
	rs := top.Bucket([]byte("r")).(kv.Sequencer)
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

// A commit holds its draw's lock for the draw alone: a commit stuck after
// its draw, before its COMMIT (here its side value waits for a row
// another session inserted and holds), keeps no other commit from
// drawing and committing. The number it drew is then a gap below a
// visible one, which SettleSequence waits for.
func TestSequenceDrawNotHeld(t *testing.T) {
	s := openStore(t)
	makeRunBuckets(t, s)
	tx, err := s.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	side := tx.Bucket([]byte("s")).Bucket([]byte("b")).(*bucket).sql.name
	_ = tx.Rollback()

	// The blocker holds the side key that number 1 of entry "\x11st0" takes.
	blocker, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(ctx) }()
	if _, err := blocker.Exec(ctx, "INSERT INTO "+side+" (k, v) VALUES ($1, 'x')", []byte(sideKey([]byte("\x11st0"), 1))); err != nil {
		t.Fatal(err)
	}
	stuck := make(chan error, 1)
	go func() { stuck <- commitRun(s, [][]byte{[]byte("\x11st0")}, 0) }()
	// The stuck commit has drawn 1 once it waits for the blocker's row.
	for {
		var waiting bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO%'||$1||'%')", side).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-stuck:
			t.Fatalf("the commit whose side value waits for a held row ended: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Another commit draws 2 and commits beside it.
	done := make(chan error, 1)
	go func() { done <- commitRun(s, [][]byte{[]byte("\x01ot0")}, 0) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a commit waited for another commit stuck after its draw: the draw's lock outlived the draw")
	}
	runs, _, _ := storedRuns(t, s)
	if want := map[uint64][][]byte{2: {[]byte("\x01ot0")}}; fmt.Sprint(runs) != fmt.Sprint(want) {
		t.Fatalf("runs %q beside the stuck commit, want %q", runs, want)
	}
	// Settling waits for the stuck commit: it fails once the blocker's
	// row commits under its side key, and 1 stays a gap for good.
	settled := make(chan uint64, 1)
	go func() {
		tx, err := s.Begin(false)
		if err != nil {
			t.Error(err)
			settled <- 0
			return
		}
		defer func() { _ = tx.Rollback() }()
		top := tx.Bucket([]byte("s"))
		n, err := top.Bucket([]byte("r")).(kv.Settler).SettleSequence(ctx, top, []byte("n"))
		if err != nil {
			t.Error(err)
		}
		settled <- n
	}()
	select {
	case n := <-settled:
		t.Fatalf("SettleSequence returned %d while a commit that drew 1 was still open", n)
	case <-time.After(100 * time.Millisecond):
	}
	if err := blocker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stuck; err == nil {
		t.Fatal("the stuck commit succeeded over a side key committed before it")
	}
	if n := <-settled; n != 2 {
		t.Fatalf("SettleSequence = %d, want 2", n)
	}
}

// A draw that fails after it took its lock (here the sequence is at its
// maximum) fails its commit, and the failed commit lets the lock go: no
// session holds a draw lock afterwards, and the next commits, from this
// store and another, draw and commit.
func TestSequenceDrawFails(t *testing.T) {
	url := pgtest.URL(t)
	s, other := openURL(t, url), openURL(t, url)
	makeRunBuckets(t, s)
	if err := commitRun(s, [][]byte{[]byte("\x01a00")}, 0); err != nil {
		t.Fatal(err)
	}
	seq := s.sequenceName(counterID(t, s), []byte("n"))
	alter := func(to string) {
		t.Helper()
		if _, err := s.pool.Exec(ctx, "ALTER SEQUENCE "+seq+" "+to); err != nil {
			t.Fatal(err)
		}
	}
	// Draw locks are the two-integer advisory locks (objsubid 2).
	held := func() int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	alter("MAXVALUE 1")
	for _, n := range []int{1, 3} { // a nextval, and a nextval and setval
		entries := make([][]byte, n)
		for i := range entries {
			entries[i] = []byte{1, 'b', byte(i), '0'}
		}
		if err := commitRun(s, entries, 0); err == nil {
			t.Fatalf("a commit of %d entries past the sequence's maximum succeeded", n)
		}
		if h := held(); h != 0 {
			t.Fatalf("after a failed draw of %d: %d draw locks held", n, h)
		}
	}
	alter("NO MAXVALUE")
	done := make(chan error, 2)
	for _, st := range []*Store{s, other} {
		go func() { done <- commitRun(st, [][]byte{[]byte("\x01c00")}, 0) }()
	}
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a commit waits for a draw lock a failed commit left held")
		}
	}
	runs, _, _ := storedRuns(t, s)
	if len(runs) != 3 || runs[1] == nil {
		t.Fatalf("runs from %v, want 1 and two more", keysOf(runs))
	}
}

// A commit asks for a trim only when, by what the store's commits saw,
// one is due: keep 40 with a slack of 5, and commits of one entry each,
// trim at the 46th (bound 6, the floor 0), the 52nd and the 58th, each
// up to its bound; the 57 commits between ask for none.
func TestSequenceTrimWhenDue(t *testing.T) {
	s := openStore(t)
	makeRunBuckets(t, s)
	const keep = 40 // slack keep/8 = 5
	for i := range 60 {
		if err := commitRun(s, [][]byte{{1, 'a', byte(i), '0'}}, keep); err != nil {
			t.Fatal(err)
		}
	}
	runs, _, floor := storedRuns(t, s)
	if n := s.trims.Load(); n != 3 || floor != 18 || len(runs) != 42 {
		t.Fatalf("%d trims asked for, floor %d, %d runs kept; want 3, 18, 42", n, floor, len(runs))
	}
	if seen := s.seenOf(s.sequenceName(counterID(t, s), []byte("n"))); seen != (seqSeen{last: 60, floor: 18}) {
		t.Fatalf("the store saw %+v, want last 60 and floor 18", seen)
	}
}

// counterID is the id of the bucket that holds the counter, "s".
func counterID(t *testing.T, s *Store) int64 {
	t.Helper()
	tx, err := s.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	return tx.Bucket([]byte("s")).(*bucket).id
}

// Writers in two stores commit runs side by side, trimming as they go.
// Every number is given once, a commit's entries keep their order, every
// entry above the floor is kept, and the side values are exactly those
// of the flagged entries kept, each under its entry's number. A run of a
// concurrent commit may come between two numbers of another; the test
// checks that none was split: a commit's entries take one block of
// consecutive numbers.
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
				// A draw's lock lasts for the draw alone, and trims
				// take none a writer waits for: nothing conflicts, and
				// no commit needs a retry.
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
	t.Logf("%d runs kept above floor %d, up to %d", len(runs), floor, top)
	if split > 0 {
		t.Fatalf("%d commits' entries were stored apart, under numbers not consecutive", split)
	}
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
// of n records of 250 bytes: none, or one run of 17-byte entries
// (Sequencer.SequenceRun), with or without the trim. Compare in one run:
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
		for _, shape := range []string{"none", "run", "run+trim"} {
			b.Run(fmt.Sprintf("n=%d/feed=%s", n, shape), func(b *testing.B) {
				b.ReportAllocs()
				entries := make([]byte, 17*n)
				for b.Loop() {
					tx, err := s.Begin(true)
					if err != nil {
						b.Fatal(err)
					}
					top := tx.Bucket([]byte("c"))
					recs, feed := top.Bucket([]byte("rec")), top.Bucket([]byte("f")).(kv.Sequencer)
					for i := range n {
						next++
						key := binary.BigEndian.AppendUint64(make([]byte, 8, 16), next)
						if err := recs.(kv.Inserter).Insert(key, value); err != nil {
							b.Fatal(err)
						}
						e := entries[17*i : 17*(i+1)]
						e[0] = 1
						copy(e[1:], key)
					}
					if strings.HasPrefix(shape, "run") {
						if err := feed.SequenceRun(top, []byte("n"), kv.Run{Shape: kv.RunShape{Tag: 0x80, Size: 17}, Entries: entries}); err != nil {
							b.Fatal(err)
						}
					}
					if shape == "run+trim" {
						if err := feed.TrimRuns(10_000, 1250, 64+2*n, kv.RunShape{Tag: 0x80, Size: 17}); err != nil {
							b.Fatal(err)
						}
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
