package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

func TestCellOrder(t *testing.T) {
	str := func(groups [][]cellStep) string {
		var gs []string
		for _, g := range groups {
			var steps []string
			for _, s := range g {
				steps = append(steps, s.workload+"/"+s.contender)
			}
			gs = append(gs, strings.Join(steps, " "))
		}
		return strings.Join(gs, " | ")
	}
	for _, c := range []struct {
		workloads []string
		round     int
		want      string
	}{
		// putfeed runs beside put, whose baseline it is, in one group
		// that turns around every other round.
		{[]string{"put", "putfeed"}, 1, "put/storh put/pgx putfeed/storh putfeed/storh+reader"},
		{[]string{"putfeed", "put"}, 2, "putfeed/storh+reader putfeed/storh put/pgx put/storh"},
		{[]string{"queue", "putfeed", "put"}, 1, "put/storh put/pgx putfeed/storh putfeed/storh+reader | queue/storh queue/pgx queue/pgx-1tx"},
		// Without its baseline, a workload is a group of its own.
		{[]string{"putfeed", "page"}, 1, "putfeed/storh putfeed/storh+reader | page/storh page/pgx"},
		{[]string{"put", "page"}, 2, "put/pgx put/storh | page/pgx page/storh"},
	} {
		if got := str(cellOrder(c.workloads, c.round)); got != c.want {
			t.Errorf("cellOrder(%v, %d) = %s, want %s", c.workloads, c.round, got, c.want)
		}
	}
}

func TestIDDigest(t *testing.T) {
	ids := make([]uuidv7.UUID, 64)
	uuidv7.NewBatch(ids) // one millisecond: ids that differ in a few bits
	digest := func(ids []uuidv7.UUID) idDigest {
		var d idDigest
		for _, id := range ids {
			d.add(id)
		}
		return d
	}
	all := digest(ids)
	rev := slices.Clone(ids)
	slices.Reverse(rev)
	if got := digest(rev); got != all {
		t.Errorf("the same ids in another order: %+v, want %+v", got, all)
	}
	if got := all.minus(digest(ids[:10])); got != digest(ids[10:]) {
		t.Errorf("all minus the first 10: %+v, want the digest of the rest %+v", got, digest(ids[10:]))
	}
	// One id for another, one twice instead of another: the count is the
	// same, the digest is not.
	swapped := slices.Clone(ids)
	swapped[5] = uuidv7.New()
	twice := slices.Clone(ids)
	twice[6] = twice[7]
	for name, other := range map[string][]uuidv7.UUID{"another id": swapped, "an id twice": twice} {
		if d := digest(other); d.N != all.N || d == all {
			t.Errorf("%s: %+v, want %d ids and a digest other than %+v", name, d, all.N, all)
		}
	}
	if err := checkReader(all, all, 0, 64); err != nil {
		t.Errorf("equal digests: %v", err)
	}
	if err := checkReader(digest(ids[1:]), all, 0, 64); err == nil || !strings.Contains(err.Error(), "received 63 changes") {
		t.Errorf("a change missing: %v, want an error counting 63", err)
	}
}

// TestFeedFollowerReceive: the reader refuses a change out of order, one
// that is not a put, one whose record is another's, and an id twice; it
// passes gaps, and counts the changes of the window.
func TestFeedFollowerReceive(t *testing.T) {
	ids := make([]uuidv7.UUID, 4)
	uuidv7.NewBatch(ids)
	put := func(seq uint64, id uuidv7.UUID) storh.ChangeEvent {
		return storh.ChangeEvent{Seq: seq, Op: storh.OpPut, ID: id, Record: storh.Record{ID: id}}
	}
	del := storh.ChangeEvent{Seq: 9, Op: storh.OpDelete, ID: ids[3]}
	other := put(9, ids[3])
	other.Record.ID = ids[0]
	for _, c := range []struct {
		name string
		bad  storh.ChangeEvent
		want string
	}{
		{"an earlier seq", put(2, ids[3]), "change 2 came after change 7"},
		{"the same seq", put(7, ids[3]), "change 7 came after change 7"},
		{"a delete", del, "change 9 is a delete"},
		{"another's record", other, "holds the record of"},
		{"an id twice", put(9, ids[1]), "puts " + ids[1].String() + " a second time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := time.Now()
			f := &feedFollower{last: 3, reached: make(chan struct{}), seen: map[uuidv7.UUID]struct{}{}, deadline: now.Add(time.Second)}
			// 4, then a gap (5 and 6 lost), then 7: fine.
			for i, ev := range []storh.ChangeEvent{put(4, ids[0]), put(7, ids[1])} {
				if err := f.receive(ev, now.Add(time.Duration(i)*2*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			if f.acct.Digest.N != 2 || f.acct.InWindow != 1 {
				t.Fatalf("account %+v, want 2 changes, 1 in the window", f.acct)
			}
			err := f.receive(c.bad, now)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestFeedReaderChecked runs the feed reader process against a fed
// collection, as a storh+reader cell does, and checks that the run's
// check passes when it received the cell's changes and fails when it
// started one change late (missing one) or one early (one too many).
func TestFeedReaderChecked(t *testing.T) {
	requireServer(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A keep below 8 has no slack: every commit past it trims. The fill,
	// one commit, is one run, on PostgreSQL in rows of up to 105 changes,
	// and a trim deletes rows whole: 250 changes make three, and the
	// first is all trimmed by the cell's first commit.
	h := &scaleRun{c: scaleConfig{feedKeep: 7, feedFill: 250, duration: 10 * time.Millisecond, exe: exe}, stderr: &lockedWriter{w: os.Stderr}}
	cleanup, err := h.open(ctx, "readertest_"+strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cleanup(); err != nil {
			t.Error(err)
		}
	})
	docs, _, err := benchDocs()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		name    string
		shift   int // the reader follows from the feed's last Seq + shift
		wantErr string
	}{
		{"from the last change", 0, ""},
		{"one change late", 1, "received 2 changes"},
		{"one change early", -1, "received 4 changes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("feed_%d", i)
			if err := h.fillFeed(name, docs); err != nil {
				t.Fatal(err)
			}
			f, err := h.feedBefore(name)
			if err != nil {
				t.Fatal(err)
			}
			if f.before.N != 250 || f.after < 250 {
				t.Fatalf("before the cell: %+v, want 250 records and a feed at 250 or more", f)
			}
			// The cell's writes: three records, from other handles.
			d, err := h.db.Docs(name, storh.WithoutCreate())
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range docs[:3] {
				if _, err := d.Put(doc); err != nil {
					t.Fatal(err)
				}
			}
			// The feed was full: those commits trimmed its first changes,
			// as a putfeed cell's commits do.
			for _, err := range d.Changes(ctx, 0) {
				if !errors.Is(err, storh.ErrChangesTrimmed) {
					t.Fatalf("Changes from 0 after the fill and 3 puts: %v, want ErrChangesTrimmed", err)
				}
				break
			}
			p, err := h.startWorker("putfeed", "reader", name, 0, "-after", strconv.FormatUint(uint64(int64(f.after)+int64(c.shift)), 10))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				p.stdin.Close()
				if err := p.cmd.Wait(); err != nil {
					t.Errorf("the reader: %v", err)
				}
			}()
			if line, err := p.next(time.Minute); err != nil || line != workerReady {
				t.Fatalf("the reader said %q, %v", line, err)
			}
			if _, err := io.WriteString(p.stdin, workerGo+"\n"); err != nil {
				t.Fatal(err)
			}
			rd, err := h.readerResult(p, name, f)
			if c.wantErr == "" {
				if err != nil || rd == nil || rd.Delivered != 3 {
					t.Fatalf("account %+v, %v: want 3 changes and no error", rd, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got %v, want an error with %q", err, c.wantErr)
			}
		})
	}
}

// TestFeedMarkdown: the feed's table gives, per process count, the rates,
// the time ratio of the medians and of each round's pair of cells, and the
// reader's counts; a failed or missing cell is a dash.
func TestFeedMarkdown(t *testing.T) {
	cell := func(workload, contender string, procs int, rates ...float64) ScaleCell {
		c := ScaleCell{Workload: workload, Contender: contender, Procs: procs}
		for i, r := range rates {
			c.Runs = append(c.Runs, ScaleRun{Round: i + 1, RecordsPerSec: r})
		}
		c.RecordsPerSec = median(rates)
		return c
	}
	read := cell("putfeed", readerContender, 4, 300, 400, 500)
	for i := range read.Runs {
		read.Runs[i].Reader = &ReaderRun{Delivered: 1000, InWindow: 990, CatchUp: time.Duration(i+1) * time.Millisecond}
	}
	failed := cell("putfeed", "storh", 1, 700)
	failed.Runs[0].Errors = []string{"worker 1: boom"}
	r := ScaleReport{Procs: []int{1, 4}, FeedKeep: 100_000, FeedFill: 100_000, Cells: []ScaleCell{
		cell("put", "storh", 1, 600), cell("put", "storh", 4, 900, 1000, 1100), cell("put", "pgx", 4, 2000),
		failed, cell("putfeed", "storh", 4, 750, 800, 1000), read,
	}}
	md := scaleMarkdown(r)
	for _, want := range []string{
		"WithChangeFeed(100000) that held 100000 changes",
		"| 1 | 600 | – | – | – | – | – | – |\n",
		"| 4 | 1,000 | 800 | 1.25 (1.20, 1.25, 1.10) | 400 | 2.50 (3.00, 2.50, 2.20) | 3,000 / 2,970 | 3ms |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	// putfeed is not in the storh ÷ pgx table.
	if strings.Contains(md, "| single durable Put, change feed on |") {
		t.Errorf("putfeed in the pgx table:\n%s", md)
	}
}

// TestPGScaleFeedFlags: a feed keep below 1 or a fill below -1 is refused
// before anything starts.
func TestPGScaleFeedFlags(t *testing.T) {
	for _, args := range [][]string{{"-feed-keep", "0"}, {"-feed-fill", "-2"}} {
		var stdout, stderr strings.Builder
		if code := pgscaleMain(append(args, "-out", t.TempDir()), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "-feed-keep at least 1 and -feed-fill not below -1") {
			t.Errorf("%v: exit %d, want 2 with the rule:\n%s", args, code, stderr.String())
		}
	}
}
