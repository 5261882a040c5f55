package engine

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/uuidv7"

	bolt "go.etcd.io/bbolt"
)

// The upgrade stopped between two of its build transactions, where a
// crash leaves a file (every commit is whole): the format is already
// formatLists, the index is building and unused, and the next open for
// writing finishes it; the index is then ready, made through lists, and
// Verify finds nothing.
func TestUpgradeListsResumes(t *testing.T) {
	restore, err := tune.Set("prelists=1,build=10")
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := Handle{Name: "orders", Kind: KindDocs, Indexes: []IndexSpec{
		{Name: "items.sku", Paths: [][]string{{"items", "sku"}}},
		{Name: "name", Paths: [][]string{{"name"}}},
	}}
	const n = 100
	if err := db.Update(func(tx *Tx) error {
		c, err := tx.Use(h, true)
		if err != nil {
			return err
		}
		for i := range n {
			v, err := AppendValue(nil, map[string]any{"name": i, "items": []any{map[string]any{"sku": i % 5}}})
			if err != nil {
				return err
			}
			if err := tx.Put(c, uuidv7.New(), v, true); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tune.PreLists = false
	building, skipped, err := db.startLists()
	if err != nil || skipped || len(building) != 1 {
		t.Fatalf("startLists = %v, %v, %v; want [orders]", building, skipped, err)
	}
	if err := db.Update(func(tx *Tx) error {
		c, err := tx.Use(h, false)
		if err != nil {
			return err
		}
		ix, err := c.index("items.sku")
		if err != nil {
			return err
		}
		_, err = tx.buildStep(c, ix, tune.IndexBuildBatch)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	defs := func() map[string]indexDef {
		out := map[string]indexDef{}
		db, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.View(func(tx *Tx) error {
			c, err := tx.Use(h, false)
			if err != nil {
				return err
			}
			all, err := c.indexes()
			for _, ix := range all {
				out[ix.name] = ix.def
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	meta := func() (format uint64, pending bool) {
		testkit.ViewBolt(t, path, func(btx *bolt.Tx) {
			b := btx.Bucket(dbMetaBucket)
			format, pending = binary.BigEndian.Uint64(b.Get(keyFormat)), b.Get(keyListsBuild) != nil
		})
		return format, pending
	}
	if format, pending := meta(); format != formatLists || !pending {
		t.Fatalf("stopped part way: format %d, pending %v; want %d, true", format, pending, formatLists)
	}
	if d := defs()["items.sku"]; !d.Building || !d.Lists || d.Built != 10 {
		t.Fatalf("stopped part way: items.sku building %v, lists %v, built %d; want true, true, 10", d.Building, d.Lists, d.Built)
	}

	if db, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	var problems []string
	if _, err := db.Verify(context.Background(), nil, func(p api.Problem) { problems = append(problems, p.String()) }); err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("Verify after the upgrade finished: %q", problems)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if format, pending := meta(); format != formatLists || pending {
		t.Errorf("finished: format %d, pending %v; want %d, false", format, pending, formatLists)
	}
	for name, d := range defs() {
		// The index on a single field keeps its definition: its entries
		// are the same either way.
		if d.Building || d.Lists != (name == "items.sku") {
			t.Errorf("finished: index %s building %v, lists %v; want false, %v", name, d.Building, d.Lists, name == "items.sku")
		}
	}
	if d := defs()["items.sku"]; d.Entries != 2*n {
		t.Errorf("finished: items.sku counts %d entries, want %d (a value and a mark per record)", d.Entries, 2*n)
	}
}
