package engine_test

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/internal/tune"
)

// TestCompactKeepsTheEnginesFill: a compacted file's index pages are
// filled as the engine fills them when it writes: a blocked index's
// blocks packed full (a block is rewritten whole, never grown in place),
// a keys-layout index's entries with room for the keys that land between
// them. Small blocks put many to a page, so the fill shows.
func TestCompactKeepsTheEnginesFill(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src.db"), filepath.Join(dir, "dst.db")
	db, err := storh.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	write := func(coll, layout string) {
		restore, err := tune.Set("layout=" + layout + ",block=200,foldmin=64,foldmax=1000")
		if err != nil {
			t.Fatal(err)
		}
		defer restore()
		d, err := db.Docs(coll, storh.WithIndex(storh.Index("n")))
		if err != nil {
			t.Fatal(err)
		}
		const n = 6000
		batch := make([]any, n)
		for i := range batch {
			batch[i] = storh.Map{"n": i * 7919 % n} // scattered over the key space
		}
		if _, err := d.PutMany(batch); err != nil {
			t.Fatal(err)
		}
		if ixs, err := d.Indexes(); err != nil || len(ixs) != 1 || ixs[0].Layout != layout {
			t.Fatalf("Indexes = %+v, %v; want one index of layout %s", ixs, err, layout)
		}
	}
	write("blocked", "blocks")
	write("keyed", "keys")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := storh.Compact(src, dst); err != nil {
		t.Fatal(err)
	}
	testkit.ViewBolt(t, dst, func(btx *bolt.Tx) {
		fill := func(coll string) float64 {
			st := btx.Bucket([]byte(coll)).Bucket([]byte("i")).Bucket([]byte("n")).Stats()
			return float64(st.LeafInuse) / float64(st.LeafAlloc)
		}
		if f := fill("blocked"); f < 0.9 {
			t.Errorf("blocked index pages %.2f full after compaction; want packed, as the engine writes them", f)
		}
		if f := fill("keyed"); f < 0.55 || f > 0.8 {
			t.Errorf("keys-layout index pages %.2f full after compaction; want the engine's room, about 0.7", f)
		}
	})
}
