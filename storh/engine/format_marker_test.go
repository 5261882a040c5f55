package engine

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"
)

// A format marker just above this build's is a newer storh's; one far
// above it, or below it, is damage, and Open says which.
func TestFormatMarker(t *testing.T) {
	for _, tc := range []struct {
		marker uint64
		want   string
	}{
		{formatVersion + 1, "written by a newer storh"},
		{maxPlausibleFormat, "written by a newer storh"},
		{maxPlausibleFormat + 1, "damaged"},
		{6291457, "damaged"}, // a scattered write over the marker, as found by the corruption suite
		{0, "damaged"},
	} {
		path := filepath.Join(t.TempDir(), "f.db")
		db, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		bdb, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = bdb.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(dbMetaBucket).Put(keyFormat, binary.BigEndian.AppendUint64(nil, tc.marker))
		})
		bdb.Close()
		if err != nil {
			t.Fatal(err)
		}
		db, err = Open(path, Options{})
		if err == nil {
			db.Close()
			t.Fatalf("marker %d: Open succeeded", tc.marker)
		}
		if !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("marker %d: %v, want errs.ErrCorrupt saying %q", tc.marker, err, tc.want)
		}
	}
}
