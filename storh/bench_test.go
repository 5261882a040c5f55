package storh_test

import (
	"testing"

	"github.com/storhdb/storh-go/storh"
)

// BenchmarkGetWhileCallbackOpen: the cost of the nested-transaction guard.
// A DB-level call checks whether its goroutine is inside an Update or View
// callback only while some callback is open; this measures a Get with none
// open and with a long View open on another goroutine.
func BenchmarkGetWhileCallbackOpen(b *testing.B) {
	db := openTemp(b, storh.WithoutSync())
	docs, _ := db.Docs("d")
	r, err := docs.Put(storh.Map{"name": "x", "n": 1})
	if err != nil {
		b.Fatal(err)
	}
	get := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := docs.Get(r.ID); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("callbacks=0", get)
	b.Run("callbacks=1", func(b *testing.B) {
		entered, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
		go func() {
			done <- db.View(func(*storh.Tx) error {
				close(entered)
				<-release
				return nil
			})
		}()
		<-entered
		get(b)
		close(release)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	})
}
