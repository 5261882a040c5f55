package engine

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/engine/internal/blockindex"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// twoDBsOnOneStore opens two DBs over one bbolt file: as two processes on
// one PostgreSQL schema, each keeps its own views of the blocked indexes
// and learns the other's commits only from the store.
func twoDBsOnOneStore(t *testing.T) (a, b *DB) {
	t.Helper()
	bdb, err := bolt.Open(filepath.Join(t.TempDir(), "two.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bdb.Close() })
	for _, p := range []**DB{&a, &b} {
		if *p, err = OpenStore(boltStore{db: bdb}, "two", Options{}); err != nil {
			t.Fatal(err)
		}
	}
	// Closing a DB closes its store: stop the writers only.
	t.Cleanup(func() {
		for _, db := range []*DB{a, b} {
			close(db.group.stop)
			<-db.group.writerDone
		}
	})
	return a, b
}

// viewOf opens index name of coll in a read transaction of db and returns
// the view of its journal the transaction reads with.
func viewOf(t *testing.T, db *DB, coll, name string) *blockindex.View {
	t.Helper()
	var v *blockindex.View
	if err := db.View(func(tx *Tx) error {
		c, err := tx.Coll(coll, 0, false)
		if err != nil {
			return err
		}
		ix, err := c.index(name)
		if err != nil {
			return err
		}
		v, err = ix.committedView()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// A DB that reads an index while another folds it keeps only the changes
// after the other's last fold: extending its view past a fold it did not
// make drops what the fold put in the blocks. (It kept every change it had
// ever read: 561 of them after 600 commits, against 11.)
func TestViewOfAnotherWritersIndexStaysSmall(t *testing.T) {
	setTune(t, "layout=blocks,block=128,foldmin=4,foldmax=16,step=512")
	a, b := twoDBsOnOneStore(t)
	h := Handle{Name: "c", Kind: KindDocs, Indexes: []IndexSpec{{Name: "v", Paths: [][]string{{"v"}}}}}
	put := func(i int) {
		putAt(t, b, h, i, map[string]any{"v": i % 7}, true)
		if err := b.FoldError(); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	most := 0
	for i := 1; i <= 600; i++ {
		put(i)
		v := viewOf(t, a, "c", "v")
		most = max(most, v.Len())
		// Every fold is b's: a's view must follow b's floor, not keep
		// what b folded.
		if ours := viewOf(t, b, "c", "v"); v.Floor() != ours.Floor() {
			t.Fatalf("commit %d: a's view starts at %d, the index is folded to %d", i, v.Floor(), ours.Floor())
		}
	}
	// A fold comes once 16 changes wait at most: a view holds about that.
	if most > 32 {
		t.Fatalf("a's view held up to %d changes; the index never has more than 16 unfolded", most)
	}
}

func setTune(t testing.TB, settings string) {
	t.Helper()
	restore, err := tune.Set(settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
}

// putAt stores doc in h's collection of db under the id of millisecond i
// of a fixed start, in a transaction of its own, which runs the folds it
// brings due when foldNow is set (as Update does).
func putAt(t *testing.T, db *DB, h Handle, i int, doc map[string]any, foldNow bool) {
	t.Helper()
	value, err := AppendValue(nil, doc)
	if err != nil {
		t.Fatal(err)
	}
	id, err := uuidv7.NewAt(1_700_000_000_000 + int64(i))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.update(func(tx *Tx) error {
		c, err := tx.Use(h, true)
		if err != nil {
			return err
		}
		return tx.Put(c, id, value, false)
	}, foldNow); err != nil {
		t.Fatalf("put %d: %v", i, err)
	}
}
