package storh_test

import (
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
)

// Two stores on one schema, each with goroutines patching one record
// directly and inside Update: the row lock of the read makes every Inc
// count, whichever store runs it.
func TestPatchConcurrentIncTwoStores(t *testing.T) {
	skipOnPostgresPass(t)
	url := pgtest.SchemaURL(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	docs, err := a.Docs("counter")
	if err != nil {
		t.Fatal(err)
	}
	r, err := docs.Put(storh.Map{"n": 0})
	if err != nil {
		t.Fatal(err)
	}
	incConcurrently(t, []*storh.DB{a, b}, "counter", r.ID, 8, 500)
}
