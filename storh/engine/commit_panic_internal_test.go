package engine

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/kv"
)

// commitPanics is a store whose next write commit panics, as bbolt does
// when it meets a damaged page while it rebalances or spills.
type commitPanics struct {
	kv.Store
	armed atomic.Bool
}

func (s *commitPanics) Begin(writable bool) (kv.Tx, error) {
	tx, err := s.Store.Begin(writable)
	if err != nil || !writable {
		return tx, err
	}
	return &panickyTx{Tx: tx, s: s}, nil
}

type panickyTx struct {
	kv.Tx
	s *commitPanics
}

func (t *panickyTx) Commit() error {
	if t.s.armed.CompareAndSwap(true, false) {
		panic("damaged page met during commit")
	}
	return t.Tx.Commit()
}

// TestCommitPanicRollsBack: a write transaction whose commit panics is
// rolled back. Found by TestCorruptFile (scatter-64-bytes, seed
// 1796131885526388032): Repair's commit met a damaged page, the
// transaction stayed open holding bbolt's writer lock, and Close waited
// for it forever.
func TestCommitPanicRollsBack(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "p.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &commitPanics{Store: db.store}
	db.store = s
	s.armed.Store(true)
	if err := db.UpdateSafe(func(*Tx) error { return nil }); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a commit that panicked: %v, want errs.ErrCorrupt", err)
	}
	done := make(chan error, 1)
	go func() {
		err := db.Update(func(*Tx) error { return nil })
		if err == nil {
			err = db.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the next write and Close still wait: the transaction whose commit panicked was never rolled back")
	}
}
