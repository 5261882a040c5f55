//go:build unix

package reliability

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// fsizeEvent is one line of the fsize-writer child's report.
type fsizeEvent struct {
	OK       bool
	Kind     string   // "put" (Docs, one record) or "putmany" (Log, a batch)
	IDs      []string // ids written or attempted
	Tags     []string
	Err      string
	TooLarge bool // errors.Is(err, storh.ErrTooLarge)
}

func init() { roles["fsize-writer"] = fsizeWriterChild }

// fsizeWriterChild writes under RLIMIT_FSIZE (with SIGXFSZ ignored, so the
// file system refuses the growth with EFBIG instead of killing the process)
// until writes fail, then keeps trying a few more, reads, and closes. Every
// attempt is reported on stdout after it returned.
func fsizeWriterChild() int {
	signal.Ignore(syscall.SIGXFSZ)
	limit, _ := strconv.ParseUint(os.Getenv("STORH_REL_LIMIT"), 10, 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 3
	}
	var opts []storh.Option
	if os.Getenv("STORH_REL_NOSYNC") == "1" {
		opts = append(opts, storh.WithoutSync())
	}
	db, err := storh.Open(os.Getenv("STORH_REL_DB"), opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 4
	}
	docs, err := db.Docs("docs")
	if err != nil {
		fmt.Fprintln(os.Stderr, "docs:", err)
		return 4
	}
	events, err := db.Log("events")
	if err != nil {
		fmt.Fprintln(os.Stderr, "events:", err)
		return 4
	}
	enc := json.NewEncoder(os.Stdout)
	report := func(ev fsizeEvent, err error) {
		ev.OK = err == nil
		if err != nil {
			ev.Err, ev.TooLarge = err.Error(), errors.Is(err, storh.ErrTooLarge)
		}
		if err := enc.Encode(ev); err != nil {
			os.Exit(5)
		}
	}
	failures := 0
	var lastOK uuidv7.UUID
	for i := 0; failures < 10 && i < 100000; i++ {
		tag := "fsize." + strconv.Itoa(i)
		if i%2 == 0 {
			rec, err := docs.Put(content(tag))
			report(fsizeEvent{Kind: "put", IDs: []string{rec.ID.String()}, Tags: []string{tag}}, err)
			if err != nil {
				failures++
			} else {
				lastOK = rec.ID
			}
			continue
		}
		var items []any
		ev := fsizeEvent{Kind: "putmany"}
		for j := range 25 {
			id, t := uuidv7.New(), tag+"."+strconv.Itoa(j)
			items = append(items, storh.Entry{ID: id, Data: content(t)})
			ev.IDs, ev.Tags = append(ev.IDs, id.String()), append(ev.Tags, t)
		}
		_, err := events.PutMany(items)
		report(ev, err)
		if err != nil {
			failures++
		}
	}
	// Still usable for reading after the failures.
	if !lastOK.IsZero() {
		if _, err := docs.Get(lastOK); err != nil {
			fmt.Fprintln(os.Stderr, "get after failed writes:", err)
			return 6
		}
	}
	if err := db.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		return 6
	}
	return 0
}

// TestResourceFileSizeLimit fills the file system's allowance for the file
// (RLIMIT_FSIZE) in a child process, with and without fsync (the growth
// path differs: with sync bbolt extends the file by truncate first). The
// writes that cannot fit must fail with ErrTooLarge, and the database must
// reopen consistent with every acknowledged write intact and nothing of a
// failed one.
func TestResourceFileSizeLimit(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "nosync"} {
		t.Run(mode, func(t *testing.T) {
			path := scratch(t, "fsize.db")
			m := buildDB(t, path, 200, 200, 0)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			limit := fi.Size() + 512<<10
			nosync := "0"
			if mode == "nosync" {
				nosync = "1"
			}
			res := runChild(t, "fsize-writer", "STORH_REL_DB="+path, "STORH_REL_LIMIT="+strconv.FormatInt(limit, 10), "STORH_REL_NOSYNC="+nosync)
			if res.Exit != 0 {
				if diedBadly(res) {
					t.Fatalf("the writer died when the file could not grow:\n%s", crashExcerpt(res.Stderr))
				}
				t.Fatalf("writer exited %d: %s", res.Exit, res.Stderr)
			}
			acked, failed := 0, 0
			want := map[string]map[uuidv7.UUID]string{"docs": m["docs"], "events": m["events"]}
			absent := map[string]bool{}
			dec := json.NewDecoder(strings.NewReader(res.Stdout))
			for dec.More() {
				var ev fsizeEvent
				if err := dec.Decode(&ev); err != nil {
					t.Fatal(err)
				}
				coll := "docs"
				if ev.Kind == "putmany" {
					coll = "events"
				}
				if ev.OK {
					acked++
					for i, s := range ev.IDs {
						want[coll][uuidv7.MustParse(s)] = ev.Tags[i]
					}
					continue
				}
				failed++
				for _, tag := range ev.Tags {
					absent[tag] = true
				}
				if failed == 1 {
					t.Logf("first failure after %d acknowledged writes: %s", acked, ev.Err)
				}
				if !ev.TooLarge {
					t.Errorf("%s failed with %q; want errors.Is(err, storh.ErrTooLarge)", ev.Kind, ev.Err)
				}
			}
			if failed == 0 {
				t.Fatalf("no write failed under a %d-byte file size limit", limit)
			}
			checkAgainst(t, path, want, absent)
			t.Logf("%d writes acknowledged and intact, %d refused and absent", acked, failed)
		})
	}
}

// checkAgainst reopens path and checks it holds exactly want (collection →
// id → tag), that no record carries a tag in absent, and that Verify is
// clean.
func checkAgainst(t *testing.T, path string, want map[string]map[uuidv7.UUID]string, absent map[string]bool) {
	t.Helper()
	db, err := storh.Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	rep, err := db.Verify(func(p storh.Problem) { t.Errorf("Verify: %v", p) })
	if err != nil || rep.Problems != 0 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw := readRaw(t, path)
	for coll, recs := range want {
		for id, tag := range recs {
			if v, ok := raw[coll][id]; !ok || !bytes.Equal(v, encoded(t, id, tag)) {
				t.Errorf("%s %s (%s): acknowledged write missing or changed", coll, id, tag)
			}
		}
		for id, v := range raw[coll] {
			if _, ok := recs[id]; !ok {
				t.Errorf("%s %s (%s): present but never acknowledged (refused: %v)", coll, id, tagOf(id, v), absent[tagOf(id, v)])
			}
		}
	}
}

// TestResourceMaxSize fills a database opened WithMaxSize: writes past the
// cap fail with ErrTooLarge, change nothing, leave reads working and the file
// reopenable with every earlier write intact; the file itself stays within
// the cap.
func TestResourceMaxSize(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "nosync"} {
		t.Run(mode, func(t *testing.T) {
			opts := []storh.Option{storh.WithMaxSize(maxSizeCap)}
			if mode == "nosync" {
				opts = append(opts, storh.WithoutSync())
			}
			testMaxSize(t, opts...)
		})
	}
}

const maxSizeCap = 4 << 20

func testMaxSize(t *testing.T, opts ...storh.Option) {
	const maxSize = maxSizeCap
	path := scratch(t, "max.db")
	db, err := storh.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := db.Docs("docs")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[uuidv7.UUID]string{"docs": {}}
	var lastErr error
	failures := 0
	for i := 0; failures < 5 && i < 100000; i++ {
		if i%2 == 0 {
			tag := "max." + strconv.Itoa(i)
			rec, err := docs.Put(content(tag))
			if err == nil {
				want["docs"][rec.ID] = tag
				continue
			}
			lastErr = err
		} else {
			var items []any
			ids := map[uuidv7.UUID]string{}
			for j := range 100 {
				id, tag := uuidv7.New(), fmt.Sprintf("max.%d.%d", i, j)
				items = append(items, storh.Entry{ID: id, Data: content(tag)})
				ids[id] = tag
			}
			if _, err := docs.PutMany(items); err == nil {
				for id, tag := range ids {
					want["docs"][id] = tag
				}
				continue
			} else {
				lastErr = err
			}
		}
		failures++
		before := digestOpen(t, db)
		if !errors.Is(lastErr, storh.ErrTooLarge) || !strings.Contains(lastErr.Error(), "size limit") {
			t.Fatalf("write past WithMaxSize: %v; want ErrTooLarge naming the size limit", lastErr)
		}
		if after := digestOpen(t, db); after != before {
			t.Fatalf("a refused write changed the database")
		}
	}
	if failures == 0 {
		t.Fatal("nothing failed")
	}
	// Reads still work.
	n, err := docs.Count()
	if err != nil || n != len(want["docs"]) {
		t.Errorf("Count after the limit = %d, %v; want %d", n, err, len(want["docs"]))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > maxSize {
		t.Errorf("WithMaxSize(%d): the file is %d bytes (%d records stored); the option promises to cap the file size", maxSize, fi.Size(), len(want["docs"]))
	}
	checkAgainst(t, path, want, nil)
}

// lockReport is what the lock-open child saw.
type lockReport struct {
	Err       string
	Locked    bool
	ElapsedMs int64
	ReadOnly  string // error of a read-only open, "" if it opened
	ROLocked  bool
	Compact   string // error of Compact from the locked file
	CmpLocked bool
}

func init() { roles["lock-open"] = lockOpenChild }

func lockOpenChild() int {
	path := os.Getenv("STORH_REL_DB")
	var rep lockReport
	start := time.Now()
	db, err := storh.Open(path, storh.WithLockTimeout(200*time.Millisecond))
	rep.ElapsedMs = time.Since(start).Milliseconds()
	if err != nil {
		rep.Err, rep.Locked = err.Error(), errors.Is(err, storh.ErrLocked)
	} else {
		db.Close()
	}
	ro, err := storh.Open(path, storh.WithReadOnly(), storh.WithLockTimeout(200*time.Millisecond))
	if err != nil {
		rep.ReadOnly, rep.ROLocked = err.Error(), errors.Is(err, storh.ErrLocked)
	} else {
		ro.Close()
	}
	dst := filepath.Join(filepath.Dir(path), "compact-"+strconv.Itoa(os.Getpid())+".db")
	if _, err := storh.Compact(path, dst, storh.WithLockTimeout(200*time.Millisecond)); err != nil {
		rep.Compact, rep.CmpLocked = err.Error(), errors.Is(err, storh.ErrLocked)
	}
	os.Remove(dst)
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
	return 0
}

// TestResourceLocked holds a database open in this process; a second
// process must get ErrLocked from Open (and from a read-only Open and
// Compact) within its 200 ms lock timeout instead of hanging, and must open
// it once this process lets go. The elapsed time is a hang detector with a
// generous ceiling, not a speed assertion.
func TestResourceLocked(t *testing.T) {
	t.Parallel()
	path := scratch(t, "locked.db")
	buildDB(t, path, 10, 0, 0)
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	before := digestOpen(t, db)
	res := runChild(t, "lock-open", "STORH_REL_DB="+path)
	var rep lockReport
	if res.Exit != 0 || json.Unmarshal([]byte(res.Stdout), &rep) != nil {
		t.Fatalf("child: exit %d\n%s\n%s", res.Exit, res.Stdout, res.Stderr)
	}
	if !rep.Locked || !strings.Contains(rep.Err, "locked") || !strings.Contains(rep.Err, "200ms") {
		t.Errorf("Open of a locked file: %q; want ErrLocked saying how long it waited", rep.Err)
	}
	if rep.ElapsedMs > 20_000 {
		t.Errorf("Open of a locked file took %d ms with a 200 ms timeout", rep.ElapsedMs)
	}
	if !rep.ROLocked {
		t.Errorf("read-only Open of a file locked for writing: %q; want ErrLocked", rep.ReadOnly)
	}
	if !rep.CmpLocked {
		t.Errorf("Compact of a file locked for writing: %q; want ErrLocked", rep.Compact)
	}
	if after := digestOpen(t, db); after != before {
		t.Error("the refused opens changed the database")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	res = runChild(t, "lock-open", "STORH_REL_DB="+path)
	rep = lockReport{}
	if res.Exit != 0 || json.Unmarshal([]byte(res.Stdout), &rep) != nil {
		t.Fatalf("child: exit %d\n%s\n%s", res.Exit, res.Stdout, res.Stderr)
	}
	if rep.Err != "" || rep.ReadOnly != "" || rep.Compact != "" {
		t.Errorf("after the holder closed: open %q, read-only open %q, compact %q; want all to work", rep.Err, rep.ReadOnly, rep.Compact)
	}
}
