package storh_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
)

// TestCompactReport: after most records are deleted, Compact reports the
// space it gives back (allocated bytes, never negative) and the pages in
// use in both files, counting free pages as free.
func TestCompactReport(t *testing.T) {
	fileOnly(t)
	path := newPath(t)
	db := openAt(t, path)
	c, _ := db.Docs("c")
	var recs []storh.Record
	for range 20 {
		items := make([]any, 500)
		for i := range items {
			items[i] = storh.Map{"pad": strings.Repeat("x", 400)}
		}
		rs, err := c.PutMany(items)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rs...)
	}
	for _, r := range recs[:9000] {
		if err := c.Delete(r.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := storh.Compact(path, filepath.Join(t.TempDir(), "small.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	switch {
	case rep.SrcInUse <= 0 || rep.DstInUse <= 0:
		t.Errorf("in-use figures %d and %d; want both positive", rep.SrcInUse, rep.DstInUse)
	case rep.SrcInUse > rep.SrcSize || rep.DstInUse > rep.DstSize:
		t.Errorf("more in use than the file holds: %+v", rep)
	case rep.SrcInUse > 3*rep.DstInUse:
		// 1000 live records of 9000 deleted: the source's live pages are
		// about the copy's, not the whole file (free pages are not live).
		t.Errorf("source in use %d, copy %d: free pages counted as data", rep.SrcInUse, rep.DstInUse)
	case rep.Reclaimed() <= 0 || rep.Reclaimed() != rep.SrcAllocated-rep.DstAllocated:
		t.Errorf("Reclaimed = %d; want the positive allocated difference %d", rep.Reclaimed(), rep.SrcAllocated-rep.DstAllocated)
	}
	// A copy bigger on disk than its source (a fresh, sparse file) reports
	// nothing reclaimed, never a negative number.
	small := newPath(t)
	db = openAt(t, small)
	c, _ = db.Docs("c")
	if _, err := c.Put(storh.Map{"x": 1}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	rep, err = storh.Compact(small, filepath.Join(t.TempDir(), "copy.db"))
	if err != nil || rep.Reclaimed() < 0 {
		t.Errorf("Compact of a small file = %+v, %v", rep, err)
	}
}
