package reliability

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/mpack"
)

// TestLimitsBoundaries writes exactly at each documented limit (which must
// work and read back intact) and one past it (which must fail with the
// typed error and store nothing): MaxRecordSize, MaxDepth for maps and for
// lists, MaxNameLength in bytes (also with multi-byte characters).
func TestLimitsBoundaries(t *testing.T) {
	t.Parallel()
	db, err := storh.Open(scratch(t, "limits.db"), storh.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	docs, err := db.Docs("docs")
	if err != nil {
		t.Fatal(err)
	}
	// {"b": bin32 of n bytes} encodes to 1 (map) + 2 ("b") + 5 (bin32
	// header) + n bytes.
	const overhead = 8
	for _, tc := range []struct {
		name string
		data storh.Map
		ok   bool
	}{
		{"record-at-limit", storh.Map{"b": bytes.Repeat([]byte{7}, storh.MaxRecordSize-overhead)}, true},
		{"record-past-limit", storh.Map{"b": bytes.Repeat([]byte{7}, storh.MaxRecordSize-overhead+1)}, false},
		{"maps-at-depth", nest(storh.MaxDepth), true},
		{"maps-past-depth", nest(storh.MaxDepth + 1), false},
		{"lists-at-depth", nestList(storh.MaxDepth), true},
		{"lists-past-depth", nestList(storh.MaxDepth + 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := mustCount(t, docs)
			rec, err := docs.Put(tc.data)
			if !tc.ok {
				if !errors.Is(err, storh.ErrInvalidData) {
					t.Fatalf("Put = %v; want ErrInvalidData", err)
				}
				if n := mustCount(t, docs); n != before {
					t.Errorf("a refused Put changed the count: %d → %d", before, n)
				}
				return
			}
			if err != nil {
				t.Fatalf("Put at the limit: %v", err)
			}
			got, err := docs.Get(rec.ID)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := mpack.Normalize(map[string]any(tc.data))
			if !mpack.Equal(got.Data(), want) {
				t.Errorf("the record at the limit did not read back intact")
			}
		})
	}
	for _, tc := range []struct {
		name string
		coll string
		ok   bool
	}{
		{"name-at-limit", strings.Repeat("n", storh.MaxNameLength), true},
		{"name-past-limit", strings.Repeat("n", storh.MaxNameLength+1), false},
		{"name-multibyte-at-limit", strings.Repeat("é", storh.MaxNameLength/2), true},
		{"name-multibyte-past-limit", strings.Repeat("é", storh.MaxNameLength/2) + "x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.Log(tc.coll)
			if tc.ok && err != nil {
				t.Errorf("a %d-byte name: %v", len(tc.coll), err)
			}
			if !tc.ok && !errors.Is(err, storh.ErrInvalidName) {
				t.Errorf("a %d-byte name: %v; want ErrInvalidName", len(tc.coll), err)
			}
		})
	}
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}

func mustCount(t *testing.T, c interface{ Count() (int, error) }) int {
	t.Helper()
	n, err := c.Count()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
