package boltpage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"
)

// fuzzPageSizes are the page sizes FuzzPages reads its bytes in: small
// ones, so that short inputs hold trees of several pages, up to the usual
// 4 KiB.
var fuzzPageSizes = []uint64{64, 128, 256, 512, 1024, 4096}

// seedFile writes a small bbolt file in pages of pageSize: a bucket whose
// records tree has a branch over leaves, a nested bucket among its keys
// and a value on overflow pages, beside a bucket small enough to sit
// inline. It returns the file's pages, the root page of the root tree and
// that of the records tree.
func seedFile(f *testing.F, pageSize int) (data []byte, root, recs uint64) {
	f.Helper()
	path := filepath.Join(f.TempDir(), "seed.db")
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, PageSize: pageSize})
	if err != nil {
		f.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		c, err := tx.CreateBucket([]byte("c"))
		if err != nil {
			return err
		}
		r, err := c.CreateBucket(recordsName)
		if err != nil {
			return err
		}
		for i := range 40 {
			k := binary.BigEndian.AppendUint32(nil, uint32(i*3))
			switch i {
			case 7:
				_, err = r.CreateBucket(k)
			case 20:
				err = r.Put(k, bytes.Repeat([]byte{'o'}, 3*pageSize))
			default:
				err = r.Put(k, bytes.Repeat([]byte{byte(i)}, 20))
			}
			if err != nil {
				return err
			}
		}
		small, err := tx.CreateBucket([]byte("s"))
		if err != nil {
			return err
		}
		return small.Put([]byte("k"), []byte("v"))
	})
	if err == nil {
		err = bdb.View(func(tx *bolt.Tx) error {
			root, recs = rootPage(tx), uint64(tx.Bucket([]byte("c")).Bucket(recordsName).Root())
			data = make([]byte, tx.Size())
			return nil
		})
	}
	if cerr := bdb.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		f.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	if _, err := file.ReadAt(data, 0); err != nil {
		f.Fatal(err)
	}
	return data, root, recs
}

// FuzzPages: any bytes read as a file's pages, of any of the page sizes,
// from any root page, give the reader's search, its cursor's walks and the
// page checks an answer or an error: never a panic, and the search and the
// checks always end. A cursor has no bound of its own (a damaged tree can
// hold a path to the same leaf many times over, which only the order of
// the keys gives away), but a tree the whole check passes is a tree: a walk
// of it steps at most once per element the bytes can hold.
func FuzzPages(f *testing.F) {
	data, root, recs := seedFile(f, 512)
	sizeIndex := uint8(3) // 512
	f.Add(data, uint16(root), sizeIndex, []byte{0, 0, 0, 30})
	f.Add(data, uint16(recs), sizeIndex, []byte{0, 0, 0, 60})
	f.Add(data, uint16(recs), sizeIndex, []byte{0, 0, 0, 21})
	f.Add(data[:len(data)/2], uint16(recs), sizeIndex, []byte{0, 0, 0, 100})
	f.Add([]byte{}, uint16(2), uint8(0), []byte("k"))
	f.Fuzz(func(t *testing.T, data []byte, root uint16, size uint8, key []byte) {
		pageSize := fuzzPageSizes[int(size)%len(fuzzPageSizes)]
		r := Reader{data: data, pageSize: pageSize}
		if v, err := r.Get(uint64(root), key); err != nil && (v != nil || !errors.Is(err, errs.ErrCorrupt)) {
			t.Fatalf("Get: %d bytes and %v, want no value and ErrCorrupt", len(v), err)
		}

		// The whole check, then the one for every open: both end, without
		// a panic, whatever the bytes.
		clean := true
		pc := newPageChecker(bytes.NewReader(data), pageSize, uint64(len(data)))
		pc.report = func(string, string) { clean = false }
		if err := pc.searchPaths("", uint64(root), 0, "the root bucket", true); err != nil {
			t.Fatalf("the check failed on a file it can read: %v", err)
		}
		shallow := newPageChecker(bytes.NewReader(data), pageSize, uint64(len(data)))
		shallow.shallow, shallow.report = true, func(string, string) {}
		shallow.loops = func(string, string) {}
		if err := shallow.searchPaths("", uint64(root), 0, "the root bucket", true); err != nil {
			t.Fatalf("the shallow check failed on a file it can read: %v", err)
		}

		// Every element takes a header of elemSize bytes.
		bound := len(data)/elemSize + 1
		steps := func(what string, k []byte, move func() ([]byte, []byte)) {
			t.Helper()
			n := 0
			for ; k != nil; k, _ = move() {
				if n++; n > bound {
					if clean {
						t.Fatalf("%s: more than %d steps over a tree the check passed", what, bound)
					}
					return
				}
			}
		}
		c := NewCursor(r, uint64(root))
		k, _ := c.First()
		steps("First then Next", k, c.Next)
		k, _ = c.Last()
		steps("Last then Prev", k, c.Prev)
		k, _ = c.Seek(key)
		steps("Seek then Next", k, c.Next)
		if err := c.Err(); err != nil && !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("the cursor's damage is %v, want ErrCorrupt", err)
		}
	})
}
