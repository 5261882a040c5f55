package storh_test

import (
	"context"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestWatchSkipsExpired: a Watch through a handle with a time to live or a
// retention does not deliver what has expired when it reads it, as Get
// and Find do not return it: in its catch-up, and in the commits it
// follows, written by this store or (on PostgreSQL) by another.
func TestWatchSkipsExpired(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
		// other opens the store that writes: the watcher's own, or another.
		other bool
	}{
		{"this store", newPathT, false},
		{"another store", pgURL, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url(t)
			clk := newTestClock()
			db := openAt(t, url, storh.WithClock(clk.Now), storh.WithoutBackground())
			writer := db
			if tc.other {
				writer = openAt(t, url, storh.WithoutBackground())
			}
			now := clk.Now()
			past, future := now.Add(-time.Second), now.Add(time.Hour)
			sessions, err := db.Docs("sessions", storh.WithTTL("exp"))
			if err != nil {
				t.Fatal(err)
			}
			events, err := db.Log("events", storh.WithRetention(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			ws, err := writer.Docs("sessions")
			if err != nil {
				t.Fatal(err)
			}
			we, err := writer.Log("events")
			if err != nil {
				t.Fatal(err)
			}
			put := func(v storh.Map) storh.Record {
				t.Helper()
				r, err := ws.Put(v)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			// Before the watch: what its catch-up reads.
			from := put(storh.Map{"n": "from", "exp": future})
			put(storh.Map{"n": "expired before", "exp": past})
			put(storh.Map{"n": "expired before, as text", "exp": past.Format(time.RFC3339Nano)})
			put(storh.Map{"n": "live before", "exp": future})

			docs := watchReady(t, sessions, from.ID, 4, func() {
				put(storh.Map{"n": "expired after", "exp": past})
				put(storh.Map{"n": "live after"})
				put(storh.Map{"n": "a list, no time", "exp": []any{past}}) // never expires
				put(storh.Map{"n": "last", "exp": future})
			})
			var names []string
			for _, r := range docs {
				var v map[string]any
				if err := r.Decode(&v); err != nil {
					t.Fatal(err)
				}
				names = append(names, v["n"].(string))
			}
			if want := []string{"live before", "live after", "a list, no time", "last"}; !slices.Equal(names, want) {
				t.Fatalf("the watch of the docs delivered %q, want %q", names, want)
			}

			logRecs := watchReady(t, events, uuidv7.UUID{}, 2, func() {
				for _, at := range []time.Duration{-2 * time.Hour, -time.Minute, -61 * time.Minute, 0} {
					expired := at < -time.Hour
					if _, err := we.PutWithID(idAt(t, now.Add(at).UnixMilli()), storh.Map{"expired": expired}); err != nil {
						t.Fatal(err)
					}
				}
			})
			for _, r := range logRecs {
				var v map[string]any
				if err := r.Decode(&v); err != nil {
					t.Fatal(err)
				}
				if v["expired"] != false {
					t.Fatalf("the watch of the log delivered %s, older than its retention", r.ID)
				}
			}
		})
	}
}

// watchReady watches c from from, runs write once the watch has
// subscribed, and returns the first n records it delivers.
func watchReady(t *testing.T, c interface {
	WatchReady(context.Context, uuidv7.UUID, func()) iter.Seq2[storh.Record, error]
}, from uuidv7.UUID, n int, write func()) []storh.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []storh.Record
	for r, err := range c.WatchReady(ctx, from, write) {
		if err != nil {
			t.Fatalf("the watch ended after %d of %d records: %v", len(got), n, err)
		}
		if got = append(got, r); len(got) == n {
			break
		}
	}
	return got
}
