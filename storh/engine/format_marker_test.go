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
		path := editedFile(t, func(tx *bolt.Tx) error {
			return tx.Bucket(dbMetaBucket).Put(keyFormat, binary.BigEndian.AppendUint64(nil, tc.marker))
		})
		db, err := Open(path, Options{})
		if err == nil {
			db.Close()
			t.Fatalf("marker %d: Open succeeded", tc.marker)
		}
		if !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("marker %d: %v, want errs.ErrCorrupt saying %q", tc.marker, err, tc.want)
		}
	}
}

// A file with buckets but no metadata bucket is refused either way; Open
// says "damaged" when what is left is storh's own (a scattered write over
// the metadata bucket's name, as found by the corruption suite) and "not a
// storh database" for another program's file.
func TestMissingMetadataBucket(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(tx *bolt.Tx) error
		want string
	}{
		{"name-overwritten", func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket([]byte("\x00stor2"))
			return err
		}, "the file is damaged"},
		{"collection-left", func(tx *bolt.Tx) error {
			m, err := tx.CreateBucket([]byte("users"))
			if err == nil {
				m, err = m.CreateBucket(bucketMeta)
			}
			if err == nil {
				err = m.Put(keyKind, []byte{byte(KindDocs)})
			}
			return err
		}, "the file is damaged"},
		{"foreign", func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("users"))
			if err == nil {
				err = b.Put([]byte("k"), []byte("v"))
			}
			return err
		}, "not a storh database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := editedFile(t, func(tx *bolt.Tx) error {
				if err := tx.DeleteBucket(dbMetaBucket); err != nil {
					return err
				}
				return tc.edit(tx)
			})
			for _, ro := range []bool{false, true} {
				db, err := Open(path, Options{ReadOnly: ro})
				if err == nil {
					db.Close()
					t.Fatalf("read-only %v: Open succeeded", ro)
				}
				if !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("read-only %v: %v, want errs.ErrCorrupt saying %q", ro, err, tc.want)
				}
			}
		})
	}
}

// editedFile makes a new, empty storh file, edits it with bbolt, and
// returns its path.
func editedFile(t *testing.T, edit func(tx *bolt.Tx) error) string {
	t.Helper()
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
	err = bdb.Update(edit)
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	return path
}
