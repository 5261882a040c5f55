package reliability

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// content is the data of the record tagged tag, a pure function of the tag.
// Every suite writes records this way, so a checker that knows a record's
// tag knows its exact stored bytes (encoded) without shipping them around.
// The mix of types (negative ints, floats, bytes, lists, a nested map) makes
// a byte-level mistake show.
func content(tag string) storh.Map {
	h := fnv.New64a()
	h.Write([]byte(tag))
	r := rand.New(rand.NewPCG(h.Sum64(), 0x5eed))
	s := make([]byte, r.IntN(120))
	for i := range s {
		s[i] = 'a' + byte(r.IntN(26))
	}
	b := make([]byte, r.IntN(16))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	m := storh.Map{
		"t": tag,
		"n": r.Int64() - math.MaxInt64/2,
		"s": string(s),
		"f": r.Float64(),
		"b": b,
		"l": []any{r.IntN(1000), "x"},
		"m": storh.Map{"ok": r.IntN(2) == 1},
	}
	if strings.HasPrefix(tag, "big.") {
		// Larger than a page: stored on overflow pages.
		pad := make([]byte, 12000+r.IntN(20000))
		for i := range pad {
			pad[i] = byte(r.Uint32())
		}
		m["pad"] = pad
	}
	return m
}

// encoded is the stored value (header and payload) of content(tag).
// encoded returns the exact stored value of tag's content under id (the
// checksum covers the id).
func encoded(tb testing.TB, id uuidv7.UUID, tag string) []byte {
	v, err := storhEncode(id, tag)
	if err != nil {
		tb.Fatalf("encode %s: %v", tag, err)
	}
	return v
}

func storhEncode(id uuidv7.UUID, tag string) ([]byte, error) {
	v, err := engine.AppendValue(nil, content(tag))
	if err == nil {
		seal(v, id)
	}
	return v, err
}

// tagOf returns the tag inside a stored value, or "" when the value is
// damaged or has none.
func tagOf(id uuidv7.UUID, value []byte) string {
	p, err := engine.Payload(id[:], value)
	if err != nil {
		return ""
	}
	raw, ok, err := mpack.Field(p, "t")
	if err != nil || !ok {
		return ""
	}
	v, _, err := mpack.Decode(raw)
	if err != nil {
		return ""
	}
	s, _ := v.(string)
	return s
}

// rawDB is a collection-by-collection copy of every record bucket,
// collection → id → stored value, read through bbolt without storh.
type rawDB map[string]map[uuidv7.UUID][]byte

// readRaw copies the records of every collection of the closed database at
// path.
func readRaw(tb testing.TB, path string) rawDB {
	tb.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		tb.Fatalf("raw open %s: %v", path, err)
	}
	defer bdb.Close()
	out := rawDB{}
	err = bdb.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if name[0] == 0 {
				return nil // the database metadata bucket
			}
			recs := b.Bucket([]byte("r"))
			if recs == nil {
				return errors.New("collection " + string(name) + " has no records bucket")
			}
			m := map[uuidv7.UUID][]byte{}
			err := recs.ForEach(func(k, v []byte) error {
				var id uuidv7.UUID
				if len(k) != len(id) || v == nil {
					return errors.New("odd key in " + string(name))
				}
				copy(id[:], k)
				m[id] = bytes.Clone(v)
				return nil
			})
			out[string(name)] = m
			return err
		})
	})
	if err != nil {
		tb.Fatalf("raw read %s: %v", path, err)
	}
	return out
}

// digestFile is testkit.DigestBolt over the closed database at path.
func digestFile(tb testing.TB, path string) string {
	tb.Helper()
	var sum string
	testkit.ViewBolt(tb, path, func(tx *bolt.Tx) { sum = testkit.DigestBolt(tx) })
	return sum
}

// digestOpen is testkit.DigestBolt over an open database, read from a consistent
// backup of it.
func digestOpen(tb testing.TB, db *storh.DB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "digest.db")
	if _, err := db.BackupFile(path); err != nil {
		tb.Fatalf("digest: backup: %v", err)
	}
	return digestFile(tb, path)
}

// manifest records which tag every record of a test database carries:
// collection → id → tag. With content it is the whole expected database.
type manifest map[string]map[uuidv7.UUID]string

func (m manifest) total() int {
	n := 0
	for _, c := range m {
		n += len(c)
	}
	return n
}

// buildDB creates the database at path with nDocs records in the Docs
// collection "docs", nLog in the Log "events" and nBig overflow-page-sized
// records in the Docs "big", in transactions of 200, and returns its
// manifest. The very last transaction writes one "docs" record alone, tagged
// "last.<id>" (a damaged newest meta page rolls back exactly that one). Ids
// are minted in ascending time order like real ones.
func buildDB(tb testing.TB, path string, nDocs, nLog, nBig int) manifest {
	tb.Helper()
	db, err := storh.Open(path, storh.WithoutSync())
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	defer db.Close()
	m := manifest{}
	gen := uuidv7.NewDeterministic(7, 1_700_000_000_000, 1)
	write := func(coll, prefix string, n int, put func([]any) ([]storh.Record, error)) {
		if m[coll] == nil {
			m[coll] = map[uuidv7.UUID]string{}
		}
		const batch = 200
		for start := 0; start < n; start += batch {
			var items []any
			for i := start; i < min(n, start+batch); i++ {
				id := gen.New()
				tag := prefix + "." + id.String()
				m[coll][id] = tag
				items = append(items, storh.Entry{ID: id, Data: content(tag)})
			}
			if _, err := put(items); err != nil {
				tb.Fatalf("build %s: %v", coll, err)
			}
		}
	}
	docs, err := db.Docs("docs")
	if err != nil {
		tb.Fatal(err)
	}
	events, err := db.Log("events")
	if err != nil {
		tb.Fatal(err)
	}
	write("docs", "docs", nDocs, docs.PutMany)
	write("events", "events", nLog, events.PutMany)
	if nBig > 0 {
		big, err := db.Docs("big")
		if err != nil {
			tb.Fatal(err)
		}
		write("big", "big", nBig, big.PutMany)
	}
	write("docs", "last", 1, docs.PutMany)
	return m
}

// copyFile copies src to dst (a test database template to a scratch file).
func copyFile(tb testing.TB, src, dst string) {
	tb.Helper()
	in, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
}

// scratch returns a path for a new database file in the test's temp dir.
func scratch(tb testing.TB, name string) string {
	return filepath.Join(tb.TempDir(), name)
}

func sha(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// hasPackagePrefix reports whether an error message starts with the name of the
// package that produced it, as every message of this module must.
func hasPackagePrefix(msg string) bool {
	for _, p := range []string{"storh: ", "uuidv7: ", "objectid: ", "query: "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// seal writes the checksum of a stored value for key into its header, as
// the engine does on every put: CRC-32C (Castagnoli) of the payload and
// then the key, big-endian in bytes 1-4. Tests use it to forge values that
// pass the checksum; it restates the format on purpose.
func seal(value []byte, key uuidv7.UUID) {
	crc := crc32.Update(crc32.Checksum(value[5:], castagnoli), castagnoli, key[:])
	binary.BigEndian.PutUint32(value[1:5], crc)
}
