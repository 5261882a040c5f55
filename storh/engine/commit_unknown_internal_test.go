package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// commitUnknown is a store whose next write commit is carried out and
// then reported as unknown, as a store over a network reports a commit
// whose connection was lost when it cannot ask the server how it ended.
type commitUnknown struct {
	kv.Store
	armed  atomic.Bool
	writes atomic.Int32 // write transactions begun
}

func (s *commitUnknown) Begin(writable bool) (kv.Tx, error) {
	tx, err := s.Store.Begin(writable)
	if err != nil || !writable {
		return tx, err
	}
	s.writes.Add(1)
	return &unknownTx{Tx: tx, s: s}, nil
}

type unknownTx struct {
	kv.Tx
	s *commitUnknown
}

func (t *unknownTx) Commit() error {
	err := t.Tx.Commit()
	if err == nil && t.s.armed.CompareAndSwap(true, false) {
		return fmt.Errorf("test: the connection was lost: %w", kv.ErrCommitUnknown)
	}
	return err
}

// A commit whose outcome is unknown is never run again (a second run
// would store its writes twice), and every write of the group commit that
// carried it gets ErrCommitUnknown.
func TestCommitUnknownIsNotRunAgain(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "u.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := &commitUnknown{Store: db.store}
	db.store = s

	value, err := AppendValue(nil, map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]*WriteOp, 8)
	for i := range batch {
		batch[i] = &WriteOp{Coll: Handle{Name: "notes", Kind: KindDocs}, ID: uuidv7.New(), Value: append([]byte(nil), value...)}
	}
	s.armed.Store(true)
	db.commit(batch)
	for i, op := range batch {
		if !errors.Is(op.err, errs.ErrCommitUnknown) {
			t.Errorf("op %d of the batch: %v, want errs.ErrCommitUnknown", i, op.err)
		}
	}
	if n := s.writes.Load(); n != 1 {
		t.Errorf("the batch ran in %d transactions, want 1", n)
	}

	runs := 0
	s.armed.Store(true)
	if err := db.Update(func(*Tx) error { runs++; return nil }); !errors.Is(err, errs.ErrCommitUnknown) {
		t.Errorf("Update whose commit is unknown: %v, want errs.ErrCommitUnknown", err)
	}
	if runs != 1 {
		t.Errorf("the Update callback ran %d times, want 1", runs)
	}
}
