package engine

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/kv/kvtest"
)

// TestKVContract runs package kv's conformance suite against the bbolt
// backend.
func TestKVContract(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Store {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "kv.db"), 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// The suite has closed the store already, unless one of its
			// transactions hangs; then Close would wait for it forever.
			closed := make(chan error, 1)
			go func() { closed <- db.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("closing the bbolt file: %v", err)
				}
			case <-time.After(2 * time.Second):
				t.Logf("the bbolt file is left open: a transaction in it never ended")
			}
		})
		return boltStore{db: db}
	})
}
