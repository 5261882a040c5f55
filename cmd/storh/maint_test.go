package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
)

type compactJSON struct {
	Src, Dst         compactSide
	Reclaimed        int64
	ReclaimedHuman   string  `json:"reclaimed_human"`
	ReclaimedPercent float64 `json:"reclaimed_percent"`
}

func compactOf(t *testing.T, db, out string) compactJSON {
	t.Helper()
	stdout, stderr, code := runStorh(context.Background(), "", "--db", db, "--json", "compact", "--out", out)
	if code != 0 {
		t.Fatalf("compact: %s", stderr)
	}
	var c compactJSON
	if err := json.Unmarshal([]byte(stdout), &c); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	return c
}

// TestCompactReport checks what compact reports for a new, sparse database
// (nothing to reclaim, and never a negative saving) and for one with most of
// its data dropped (the free pages are reclaimed; live data is what is left).
func TestCompactReport(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "c.db")
	ctx := context.Background()
	if _, stderr, code := runStorh(ctx, "", "--db", db, "put", "small", `{"n":1}`); code != 0 {
		t.Fatal(stderr)
	}
	fresh := compactOf(t, db, filepath.Join(dir, "fresh.db"))
	if fresh.Src.FileSize < 16<<20 || fresh.Src.OnDisk >= 1<<20 {
		t.Errorf("a new database: file size %d, on disk %d; want at least 16 MiB, sparse", fresh.Src.FileSize, fresh.Src.OnDisk)
	}
	if fresh.Reclaimed < 0 || fresh.Reclaimed != max(0, fresh.Src.OnDisk-fresh.Dst.OnDisk) {
		t.Errorf("reclaimed %d from %d on disk to %d", fresh.Reclaimed, fresh.Src.OnDisk, fresh.Dst.OnDisk)
	}

	src := write(t, "rows.jsonl", genRows(5000, -1))
	if _, stderr, code := runStorh(ctx, "", "--db", db, "import", "big", src); code != 0 {
		t.Fatal(stderr)
	}
	if _, stderr, code := runStorh(ctx, "", "--db", db, "drop", "big", "--yes"); code != 0 {
		t.Fatal(stderr)
	}
	c := compactOf(t, db, filepath.Join(dir, "compact.db"))
	for _, side := range []compactSide{c.Src, c.Dst} {
		if side.OnDisk <= 0 || side.LiveData <= 0 || side.LiveData > side.FileSize {
			t.Errorf("%s: on disk %d, live data %d, file size %d", side.Path, side.OnDisk, side.LiveData, side.FileSize)
		}
		if side.OnDiskHuman != humanBytes(side.OnDisk) || side.LiveDataHuman != humanBytes(side.LiveData) || side.FileSizeHuman != humanBytes(side.FileSize) {
			t.Errorf("%s: human units %+v", side.Path, side)
		}
	}
	if c.Src.LiveData >= c.Src.OnDisk/2 {
		t.Errorf("after dropping most of the data the source has %d bytes live of %d on disk: free pages counted as data", c.Src.LiveData, c.Src.OnDisk)
	}
	if c.Reclaimed <= 0 || c.Reclaimed != c.Src.OnDisk-c.Dst.OnDisk || c.ReclaimedHuman != humanBytes(c.Reclaimed) {
		t.Errorf("reclaimed %d (%s) from %d on disk to %d", c.Reclaimed, c.ReclaimedHuman, c.Src.OnDisk, c.Dst.OnDisk)
	}
}

// TestMaintenanceInterrupted runs each maintenance command with a context
// already cancelled, as Ctrl-C leaves it: each stops, says what it kept,
// and leaves no partial file behind.
func TestMaintenanceInterrupted(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, stderr, code := runStorh(context.Background(), "", "--db", db, "put", "c", `{"n":1}`); code != 0 {
		t.Fatal(stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		args []string
		msg  string
		gone string // a file the command must not leave
	}{
		{[]string{"verify"}, "interrupted: verify stopped after", ""},
		{[]string{"repair"}, "interrupted: nothing was repaired", ""},
		{[]string{"compact", "--out", filepath.Join(dir, "c.db")}, "was removed; " + db + " is unchanged", filepath.Join(dir, "c.db")},
		{[]string{"backup", filepath.Join(dir, "b.db")}, "b.db was left as it was", filepath.Join(dir, "b.db")},
	} {
		_, stderr, code := runStorh(ctx, "", append([]string{"--db", db}, tc.args...)...)
		if code != 1 || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.msg)
		}
		if tc.gone != "" {
			if _, err := os.Stat(tc.gone); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%v left %s behind: %v", tc.args, tc.gone, err)
			}
		}
	}
	// The database is intact and usable.
	if out, stderr, code := runStorh(context.Background(), "", "--db", db, "verify"); code != 0 || !strings.Contains(out, "0 problems") {
		t.Fatalf("verify after the interrupted commands: %s %s", out, stderr)
	}
}

// TestStatsShowsDirectReadsOff: when Open found the file's pages in a
// layout the direct reader does not know, storh stats says that reads go
// through bbolt's buckets and why, in text and in JSON; otherwise it says
// nothing of it.
func TestStatsShowsDirectReadsOff(t *testing.T) {
	for _, why := range []string{"", "no meta page of bbolt's format version 2 holds transaction 7"} {
		var out strings.Builder
		a := &app{stdout: &out}
		st := storh.Stats{Path: filepath.Join(t.TempDir(), "x.db"), DirectReadsOff: why}
		if err := a.printStats(st); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(statsJSON(st))
		if err != nil {
			t.Fatal(err)
		}
		shown := strings.Contains(out.String(), "reads go through bbolt's buckets")
		if shown != (why != "") || !strings.Contains(out.String(), why) {
			t.Errorf("stats with DirectReadsOff %q printed:\n%s", why, out.String())
		}
		if strings.Contains(string(b), "direct_reads_off") != (why != "") || !strings.Contains(string(b), why) {
			t.Errorf("stats --json with DirectReadsOff %q: %s", why, b)
		}
	}
}
