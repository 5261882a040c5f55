package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// rerunStore is a store whose first write transaction fails with a
// conflict (a store over a network reports one when a concurrent writer
// won) and whose second fails to commit.
type rerunStore struct {
	kv.Store
	runs atomic.Int32
}

var errDiskFailed = errors.New("test: the disk failed")

func (s *rerunStore) Begin(writable bool) (kv.Tx, error) {
	tx, err := s.Store.Begin(writable)
	if err != nil || !writable {
		return tx, err
	}
	return &rerunTx{Tx: tx, run: s.runs.Add(1)}, nil
}

type rerunTx struct {
	kv.Tx
	run int32
}

func (t *rerunTx) Err() error {
	if t.run == 1 {
		return fmt.Errorf("test: a concurrent writer won: %w", kv.ErrConflict)
	}
	return t.Tx.Err()
}

func (t *rerunTx) Commit() error {
	if t.run == 2 {
		t.Tx.Rollback()
		return errDiskFailed
	}
	return t.Tx.Commit()
}

// A group commit whose first run conflicted, with one op failing in it,
// and whose run after that failed to commit: no op is acknowledged, the
// one that failed in the first run no more than the others (that run's
// failure is not its fault in the last one).
func TestGroupCommitRerunForgetsEarlierFailures(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "r.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	value, err := AppendValue(nil, map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	h := Handle{Name: "notes", Kind: KindDocs}
	if err := db.Update(func(tx *Tx) error {
		c, err := tx.Use(h, true)
		if err != nil {
			return err
		}
		return tx.Put(c, uuidv7.New(), append([]byte(nil), value...), false)
	}); err != nil {
		t.Fatal(err)
	}
	s := &rerunStore{Store: db.store}
	db.store = s

	batch := make([]*WriteOp, 4)
	for i := range batch {
		batch[i] = &WriteOp{Coll: h, ID: uuidv7.New(), Value: append([]byte(nil), value...)}
	}
	batch[1] = &WriteOp{Coll: h, ID: uuidv7.New(), Fn: func(tx *Tx, c *Coll) error {
		if tx.ktx.(*rerunTx).run == 1 {
			return errors.New("test: a read of the conflicting run failed")
		}
		return tx.Put(c, batch[1].ID, append([]byte(nil), value...), false)
	}}
	db.commit(batch)
	for i, op := range batch {
		var stored bool
		if err := db.View(func(tx *Tx) error {
			c, err := tx.Use(h, false)
			stored = err == nil && c.has(op.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if op.err == nil && !stored {
			t.Errorf("op %d was acknowledged, and is not stored", i)
		}
	}
	if !errors.Is(batch[1].err, errDiskFailed) {
		t.Errorf("the op that failed in the conflicting run: %v, want the failed commit's error", batch[1].err)
	}
}
