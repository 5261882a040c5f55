package engine

import (
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// A watcher that subscribes while a write transaction is between two of
// its writes gets none of that transaction: it could only have been told
// of the writes after it subscribed. The next transaction it gets whole.
func TestSubscribeMidTransactionGetsNoHalf(t *testing.T) {
	db := openCopyDB(t, t.TempDir(), "watch.db")
	h := Handle{Name: "c", Kind: KindDocs}
	put := func(tx *Tx, ms int64) uuidv7.UUID {
		t.Helper()
		c, err := tx.Use(h, true)
		if err != nil {
			t.Fatal(err)
		}
		id, err := uuidv7.NewAt(ms)
		if err != nil {
			t.Fatal(err)
		}
		value, err := AppendValue(nil, map[string]any{"ms": ms})
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Put(c, id, value, false); err != nil {
			t.Fatal(err)
		}
		return id
	}
	subs := make(chan *Sub, 1)
	if err := db.Update(func(tx *Tx) error {
		put(tx, 1)
		go func() {
			s, err := db.Subscribe("c")
			if err != nil {
				t.Error(err)
			}
			subs <- s
		}()
		// The watcher is registered (Subscribe then waits for this
		// transaction to end) before the second write.
		for deadline := time.Now().Add(10 * time.Second); !db.watched("c"); {
			if time.Now().After(deadline) {
				t.Fatal("Subscribe never registered the watcher")
			}
			time.Sleep(time.Millisecond)
		}
		put(tx, 2)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s := <-subs
	if s == nil {
		t.FailNow()
	}
	defer s.Close()
	if got, err := s.Take(); err != nil || len(got) != 0 {
		t.Fatalf("after the transaction that straddled Subscribe: %d changes, %v; want none", len(got), err)
	}
	var want []uuidv7.UUID
	if err := db.Update(func(tx *Tx) error {
		want = []uuidv7.UUID{put(tx, 3), put(tx, 4)}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Take()
	if err != nil || len(got) != 2 || got[0].ID != want[0] || got[1].ID != want[1] {
		t.Fatalf("the next transaction: %+v, %v; want %v", got, err, want)
	}
}
