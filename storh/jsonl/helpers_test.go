package jsonl

import (
	"path/filepath"
	"testing"

	"github.com/storhdb/storh-go/storh"
)

// tb is what the helpers need of a *testing.T, *testing.B or *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
}

// openDB opens a database in a temporary directory, without fsync.
func openDB(t testing.TB) *storh.DB {
	t.Helper()
	db, err := storh.Open(filepath.Join(t.TempDir(), "test.db"), storh.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func docs(t tb, db *storh.DB, name string) *storh.Docs {
	t.Helper()
	c, err := db.Docs(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
