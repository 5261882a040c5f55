package storh_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// feedChildEnv gives a child of the feed tests its store and its part:
// "<path or URL>|write <n>" puts n records, one write each, and prints
// "ack <id>" when each returns; "<path or URL>|read <n>" follows Changes
// from 0 and prints "c <seq> <op> <id>" for each of the first n changes.
// A third word, "<path or URL>|write <n> <keep>", opens the feed with that
// keep instead of 1<<20. "<path or URL>|replace <n>" puts n values over
// the records the collection holds when it starts, in turn, each
// {"n": 9_000_000 + i}, and prints "ack <id> <n>" when each returns.
const feedChildEnv = "STORH_FEED_CHILD"

// TestChangesChild is the child of the tests below.
func TestChangesChild(t *testing.T) {
	spec := os.Getenv(feedChildEnv)
	if spec == "" {
		t.Skip("run by the change feed's tests of several processes")
	}
	path, part, _ := strings.Cut(spec, "|")
	verb, arg, _ := strings.Cut(part, " ")
	arg, keepArg, _ := strings.Cut(arg, " ")
	n, err := strconv.Atoi(arg)
	if err != nil {
		t.Fatal(err)
	}
	keep := 1 << 20
	if keepArg != "" {
		if keep, err = strconv.Atoi(keepArg); err != nil {
			t.Fatal(err)
		}
	}
	db, err := storh.Open(path) // durable: the crash test kills it
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	docs, err := db.Docs("feed", storh.WithChangeFeed(keep))
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	switch verb {
	case "write":
		for i := range n {
			r, err := docs.Put(storh.Map{"from": "child", "i": i})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(out, "ack", r.ID)
			out.Flush()
		}
	case "replace":
		recs, err := docs.Find(query.All())
		if err != nil {
			t.Fatal(err)
		}
		var ids []uuidv7.UUID
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
		for i := range n {
			v := int64(9_000_000 + i)
			if _, err := docs.PutWithID(ids[i%len(ids)], storh.Map{"n": v}); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(out, "ack", ids[i%len(ids)], v)
			out.Flush()
		}
	case "read":
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		got := 0
		for ev, err := range docs.Changes(ctx, 0) {
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(out, "c", ev.Seq, ev.Op, ev.ID)
			if got++; got == n {
				break
			}
		}
	}
	fmt.Fprintln(out, "done")
}

// childAcks reads a writing child's lines until it has acknowledged n
// writes, handing ack the words after "ack" of each; the child ending
// first, or deadline, fails t.
func childAcks(t *testing.T, lines <-chan string, n int, deadline <-chan time.Time, ack func(words []string)) {
	t.Helper()
	for got := 0; got < n; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the writing child ended after %d acknowledged writes", got)
			}
			if f := strings.Fields(line); len(f) > 1 && f[0] == "ack" {
				ack(f[1:])
				got++
			}
		case <-deadline:
			t.Fatal("the writing child did not finish")
		}
	}
}

// feedChild runs TestChangesChild with spec and returns its lines, one
// by one, on a channel closed when it ends.
func feedChild(t *testing.T, spec string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd, in, out := startChild(t, "TestChangesChild", feedChildEnv+"="+spec)
	in.Close()
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, lines
}

// Writers in two stores on one schema and in a second process, all at
// once: a reader in a third process sees every acknowledged change
// exactly once, in Seq order, with Seqs 1, 2, 3, … as the commits
// landed; so does one here.
func TestPostgresChangesManyWriters(t *testing.T) {
	if os.Getenv(feedChildEnv) != "" {
		t.Skip("the child's own run")
	}
	skipUnderInvariants(t)
	skipOnPostgresPass(t)
	url := pgtest.URL(t)
	db1, db2 := openPostgres(t, url), openPostgres(t, url)
	const perWriter = 150
	d1, err := db1.Docs("feed", storh.WithChangeFeed(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	d2, err := db2.Docs("feed", storh.WithChangeFeed(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	// Each local writer: puts, a delete of every third, and every fifth
	// write as a transaction of two puts.
	total := 0
	type write struct {
		op storh.ChangeOp
		id uuidv7.UUID
	}
	perLocal := 0
	for i := range perWriter {
		perLocal++
		if i%3 == 0 {
			perLocal++
		}
		if i%5 == 0 {
			perLocal += 2
		}
	}
	total = 2*perLocal + perWriter
	_, readLines := feedChild(t, url+"|read "+strconv.Itoa(total))
	_, writerLines := feedChild(t, url+"|write "+strconv.Itoa(perWriter))

	acked := make(chan write, total)
	var wg sync.WaitGroup
	for w, d := range []*storh.Docs{d1, d2} {
		db := []*storh.DB{db1, db2}[w]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				r, err := d.Put(storh.Map{"from": w, "i": i})
				if err != nil {
					t.Error(err)
					return
				}
				acked <- write{storh.OpPut, r.ID}
				if i%3 == 0 {
					if err := d.Delete(r.ID); err != nil {
						t.Error(err)
						return
					}
					acked <- write{storh.OpDelete, r.ID}
				}
				if i%5 == 0 {
					a, b := uuidv7.New(), uuidv7.New()
					err := db.Update(func(tx *storh.Tx) error {
						td, err := tx.Docs("feed")
						if err != nil {
							return err
						}
						if _, err := td.PutWithID(a, storh.Map{"tx": 1}); err != nil {
							return err
						}
						_, err = td.PutWithID(b, storh.Map{"tx": 2})
						return err
					})
					if err != nil {
						t.Error(err)
						return
					}
					acked <- write{storh.OpPut, a}
					acked <- write{storh.OpPut, b}
				}
			}
		}()
	}
	deadline := time.After(time.Minute)
	childAcks(t, writerLines, perWriter, deadline, func(f []string) {
		acked <- write{storh.OpPut, uuidv7.MustParse(f[0])}
	})
	wg.Wait()
	close(acked)
	want := map[write]int{}
	for w := range acked {
		want[w]++
	}
	check := func(who string, got []write, seqs []uint64) {
		t.Helper()
		if len(got) != total {
			t.Fatalf("%s: %d changes, want %d", who, len(got), total)
		}
		seen := map[write]int{}
		for i, w := range got {
			if seqs[i] != uint64(i+1) {
				t.Fatalf("%s: change %d has Seq %d, want %d", who, i, seqs[i], i+1)
			}
			seen[w]++
			if w.op == storh.OpDelete && seen[write{storh.OpPut, w.id}] == 0 {
				t.Fatalf("%s: the delete of %s (Seq %d) comes before its put", who, w.id, seqs[i])
			}
		}
		for w, n := range want {
			if seen[w] != n {
				t.Fatalf("%s: %s %s seen %d times, want %d", who, w.op, w.id, seen[w], n)
			}
		}
	}
	var got []write
	var seqs []uint64
	for len(got) < total {
		select {
		case line, ok := <-readLines:
			if !ok {
				t.Fatalf("the reading child ended after %d changes", len(got))
			}
			f := strings.Fields(line)
			if len(f) != 4 || f[0] != "c" {
				continue
			}
			seq, _ := strconv.ParseUint(f[1], 10, 64)
			op := storh.OpPut
			if f[2] == storh.OpDelete.String() {
				op = storh.OpDelete
			}
			got, seqs = append(got, write{op, uuidv7.MustParse(f[3])}), append(seqs, seq)
		case <-deadline:
			t.Fatalf("the reading child saw %d of %d changes", len(got), total)
		}
	}
	check("the reader in another process", got, seqs)
	got, seqs = nil, nil
	for _, c := range readChanges(t, d2.Changes, 0, total) {
		got, seqs = append(got, write{c.op, c.id}), append(seqs, c.seq)
	}
	check("a reader here", got, seqs)
	if last, err := d1.LastSeq(); err != nil || last != uint64(total) {
		t.Fatalf("LastSeq: %d, %v; want %d", last, err, total)
	}
}

// Writers in two stores and in a second process replace and delete the
// same records at once: on PostgreSQL a put's change holds no copy of its
// record, and a reader takes it from the record, or from the value the
// next write of the id overwrote (a before-image, keyed by that write's
// Seq, drawn at its commit). Every acknowledged write is then read back
// exactly once, each put with the value that put wrote, in Seq order.
func TestPostgresChangesReplaceManyWriters(t *testing.T) {
	if os.Getenv(feedChildEnv) != "" {
		t.Skip("the child's own run")
	}
	skipUnderInvariants(t)
	skipOnPostgresPass(t)
	url := pgtest.URL(t)
	db1, db2 := openPostgres(t, url), openPostgres(t, url)
	var stores []*storh.Docs
	for _, db := range []*storh.DB{db1, db2} {
		d, err := db.Docs("feed", storh.WithChangeFeed(1<<20))
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, d)
	}
	const records, perWriter = 12, 120
	type write struct {
		op storh.ChangeOp
		id uuidv7.UUID
		n  int64 // -1: a delete
	}
	var mu sync.Mutex
	var acked []write
	ack := func(w write) {
		mu.Lock()
		acked = append(acked, w)
		mu.Unlock()
	}
	items := make([]any, records)
	for i := range items {
		items[i] = storh.Map{"n": int64(i)}
	}
	recs, err := stores[0].PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		ack(write{storh.OpPut, r.ID, int64(i)})
	}
	_, childLines := feedChild(t, url+"|replace "+strconv.Itoa(perWriter))
	var wg sync.WaitGroup
	for w, d := range stores {
		db := []*storh.DB{db1, db2}[w]
		wg.Go(func() {
			for i := range perWriter {
				id := recs[(i*5+w*3)%records].ID
				v := int64((w+1)*1_000_000 + i)
				if i%7 == 3 {
					// A delete and a put again, in one transaction: every
					// record is there between transactions, so each delete
					// deletes one.
					err := db.Update(func(tx *storh.Tx) error {
						td, err := tx.Docs("feed")
						if err != nil {
							return err
						}
						if err := td.Delete(id); err != nil {
							return err
						}
						_, err = td.PutWithID(id, storh.Map{"n": v})
						return err
					})
					if err != nil {
						t.Error(err)
						return
					}
					ack(write{storh.OpDelete, id, -1})
					ack(write{storh.OpPut, id, v})
					continue
				}
				if _, err := d.PutWithID(id, storh.Map{"n": v}); err != nil {
					t.Error(err)
					return
				}
				ack(write{storh.OpPut, id, v})
			}
		})
	}
	childAcks(t, childLines, perWriter, time.After(2*time.Minute), func(f []string) {
		v, _ := strconv.ParseInt(f[1], 10, 64)
		ack(write{storh.OpPut, uuidv7.MustParse(f[0]), v})
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	want := map[write]int{}
	for _, w := range acked {
		want[w]++
	}
	last, err := stores[1].LastSeq()
	if err != nil {
		t.Fatal(err)
	}
	got := readChanges(t, stores[1].Changes, 0, len(acked))
	seen := map[write]int{}
	var prev uint64
	for _, c := range got {
		if c.seq <= prev {
			t.Fatalf("Seq %d after %d", c.seq, prev)
		}
		prev = c.seq
		seen[write{c.op, c.id, c.n}]++
	}
	for w, n := range want {
		if seen[w] != n {
			t.Errorf("%s %s n=%d read %d times, want %d", w.op, w.id, w.n, seen[w], n)
		}
	}
	if len(got) != len(acked) || prev != last {
		t.Fatalf("%d changes up to Seq %d, LastSeq %d; want %d", len(got), prev, last, len(acked))
	}
}

// Writers in two stores and in a second process put into a feed that
// keeps 64, so that their commits trim it all the time, side by side: the
// feed then holds every change above its floor, Seqs without a gap up to
// the last, each the acknowledged write it numbers; and one commit past
// the slack, alone, leaves keep changes, and those of the commit the
// bound falls in.
func TestPostgresChangesTrimManyWriters(t *testing.T) {
	if os.Getenv(feedChildEnv) != "" {
		t.Skip("the child's own run")
	}
	skipUnderInvariants(t)
	skipOnPostgresPass(t)
	url := pgtest.URL(t)
	const keep, perWriter = 64, 200
	db1, db2 := openPostgres(t, url), openPostgres(t, url)
	d1, err := db1.Docs("feed", storh.WithChangeFeed(keep))
	if err != nil {
		t.Fatal(err)
	}
	d2, err := db2.Docs("feed", storh.WithChangeFeed(keep))
	if err != nil {
		t.Fatal(err)
	}
	_, writerLines := feedChild(t, url+"|write "+strconv.Itoa(perWriter)+" "+strconv.Itoa(keep))
	var mu sync.Mutex
	acked := map[uuidv7.UUID]bool{}
	var wg sync.WaitGroup
	for _, d := range []*storh.Docs{d1, d2} {
		wg.Go(func() {
			for i := range perWriter {
				ids := []any{storh.Map{"i": i}}
				if i%4 == 0 { // some commits of several changes
					ids = append(ids, storh.Map{"i": i, "n": 2}, storh.Map{"i": i, "n": 3})
				}
				recs, err := d.PutMany(ids)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, r := range recs {
					acked[r.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	childAcks(t, writerLines, perWriter, time.After(2*time.Minute), func(f []string) {
		mu.Lock()
		acked[uuidv7.MustParse(f[0])] = true
		mu.Unlock()
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	// One commit of more changes than the slack, alone: it trims the feed
	// to keep (what is past keep is less than its step).
	final := make([]any, keep/8+1)
	for i := range final {
		final[i] = storh.Map{"final": i}
	}
	recs, err := d1.PutMany(final)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		acked[r.ID] = true
	}
	last, err := d1.LastSeq()
	if err != nil || last != uint64(len(acked)) {
		t.Fatalf("LastSeq = %d, %v; want %d, one per acknowledged put", last, err, len(acked))
	}
	// The floor: the greatest after that Changes does not refuse.
	floor := uint64(0)
	for ; floor < last; floor++ {
		var trimmed bool
		for _, err := range d2.Changes(context.Background(), floor) {
			trimmed = errors.Is(err, storh.ErrChangesTrimmed)
			if err != nil && !trimmed {
				t.Fatal(err)
			}
			break
		}
		if !trimmed {
			break
		}
	}
	// A commit's changes are trimmed together (on PostgreSQL they are one
	// run): the commit the bound falls in, of up to 3, stays whole.
	if kept := last - floor; kept < keep || kept > keep+2 {
		t.Fatalf("the feed keeps %d changes (%d..%d); want %d, or up to 2 more", kept, floor+1, last, keep)
	}
	for i, c := range readChanges(t, d2.Changes, floor, int(last-floor)) {
		if c.seq != floor+1+uint64(i) || c.op != storh.OpPut || !acked[c.id] {
			t.Fatalf("change %d above the floor %d: seq %d %s %v; want seq %d, an acknowledged put", i, floor, c.seq, c.op, c.id, floor+1+uint64(i))
		}
	}
}

// A writer killed (SIGKILL) in the middle of its stream of puts leaves
// every change it acknowledged in the feed, in order, none twice; and
// the next writer's changes follow without a gap.
func TestChangesWriterKilled(t *testing.T) {
	if os.Getenv(feedChildEnv) != "" {
		t.Skip("the child's own run")
	}
	skipUnderInvariants(t)
	path := newPath(t)
	if !onPostgres {
		// The child opens the file itself; create it with the feed here.
		db := openAt(t, path)
		if _, err := db.Docs("feed", storh.WithChangeFeed(1<<20)); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	cmd, lines := feedChild(t, path+"|write 1000000")
	var acked []uuidv7.UUID
	for line := range lines {
		if id, ok := strings.CutPrefix(line, "ack "); ok {
			acked = append(acked, uuidv7.MustParse(id))
		}
		if len(acked) == 300 {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for line := range lines { // what it acknowledged before it died
		if id, ok := strings.CutPrefix(line, "ack "); ok {
			acked = append(acked, uuidv7.MustParse(id))
		}
	}
	cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("the child acknowledged %d writes", len(acked))
	}
	db := openAt(t, path)
	docs, err := db.Docs("feed")
	if err != nil {
		t.Fatal(err)
	}
	last, err := docs.LastSeq()
	if err != nil {
		t.Fatal(err)
	}
	if last < uint64(len(acked)) {
		t.Fatalf("LastSeq %d, yet %d writes were acknowledged", last, len(acked))
	}
	changes := readChanges(t, docs.Changes, 0, int(last))
	pos := map[uuidv7.UUID]int{}
	for i, c := range changes {
		if c.seq != uint64(i+1) || c.op != storh.OpPut {
			t.Fatalf("change %d: %v", i, c)
		}
		if _, dup := pos[c.id]; dup {
			t.Fatalf("%s twice in the feed", c.id)
		}
		pos[c.id] = i
	}
	for i, id := range acked {
		// The child writes one record at a time, so its acknowledgements
		// are in commit order.
		if p, ok := pos[id]; !ok || p != i {
			t.Fatalf("acknowledged write %d (%s) is at %d in the feed (found: %v)", i, id, p, ok)
		}
	}
	r, err := docs.Put(storh.Map{"after": true})
	if err != nil {
		t.Fatal(err)
	}
	sameChanges(t, readChanges(t, docs.Changes, last, 1), []change{{last + 1, storh.OpPut, r.ID, 0}})
}
