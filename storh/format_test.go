package storh_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The on-disk format is pinned by a database file written by this format
// (testdata/format1/format1.db) and the exact stored bytes of every record
// in it (testdata/format1/values.hex: collection, id, header + payload in
// hex). Today's code must read that file and write those bytes. A change to
// the value layout, the checksum, the msgpack encoding or the bucket layout
// fails these tests: that is their purpose. Such a change needs a new format
// version and a migration, never a regenerated file.
//
// -write-format1 wrote the files once. It refuses to overwrite them.
var writeFormat1 = flag.Bool("write-format1", false, "write testdata/format1 (only where it does not exist yet)")

const format1Dir = "testdata/format1"

// formatRecord is one record of the pinned file: where it lives, its id and
// the data written under it.
type formatRecord struct {
	coll string
	id   uuidv7.UUID
	data any
}

func formatID(n int) uuidv7.UUID {
	// ms 1_700_000_000_000 + n, fixed random bits: stable forever.
	id, err := uuidv7.NewAt(1_700_000_000_000 + int64(n))
	if err != nil {
		panic(err)
	}
	copy(id[8:], []byte{0x80 | byte(n), 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77})
	id[6], id[7] = 0x70|byte(n>>8&0x0f), byte(n)
	return id
}

// formatStruct is written as a struct whose fields are declared out of key
// order, with a nested struct, a pointer and typed maps.
type formatStruct struct {
	Zeta   string            `msgpack:"zeta"`
	Alpha  int32             `msgpack:"alpha"`
	Inner  formatInner       `msgpack:"inner"`
	Ptr    *formatInner      `msgpack:"ptr"`
	Counts map[string]uint16 `msgpack:"counts"`
	Score  float32           `msgpack:"score"`
	Skip   string            `msgpack:"skip,omitempty"`
}

type formatInner struct {
	Y []string `msgpack:"y"`
	X bool     `msgpack:"x"`
}

// formatRecords is every record the pinned file holds, in writing order.
// Between them they use every value type storh stores, each integer and
// length encoding at its boundaries, every timestamp form, nesting, and map
// keys that must be sorted.
func formatRecords() []formatRecord {
	ints := storh.Map{
		"zero": 0, "fix": 127, "u8": 128, "u8max": 255, "u16": 256, "u16max": 65535, "u32": 65536,
		"u32max": uint32(math.MaxUint32), "u64": int64(math.MaxUint32) + 1, "i64max": int64(math.MaxInt64),
		"u64max": uint64(math.MaxUint64), "neg1": -1, "negfix": -32, "i8": -33, "i8min": int8(math.MinInt8),
		"i16": -129, "i16min": int16(math.MinInt16), "i32": -32769, "i32min": int32(math.MinInt32),
		"i64": int64(math.MinInt32) - 1, "i64min": int64(math.MinInt64),
	}
	floats := storh.Map{
		"f32": float32(1.5), "f64": 0.1, "negzero": math.Copysign(0, -1), "inf": math.Inf(1),
		"neginf": math.Inf(-1), "nan": math.NaN(), "big": 1e300, "tiny": 5e-324, "integral": 2.0,
	}
	strs := storh.Map{
		"empty": "", "one": "a", "fix31": strings.Repeat("s", 31), "str8": strings.Repeat("t", 32),
		"str8max": strings.Repeat("u", 255), "str16": strings.Repeat("v", 256), "str32": strings.Repeat("w", 65536),
		"unicode": "héllo, 世界 🎉", "nul": "a\x00b", "newline": "line\nbreak",
	}
	bins := storh.Map{
		"empty": []byte{}, "small": []byte{0, 1, 2, 0xff}, "bin16": bytes.Repeat([]byte{0xab}, 256),
		"bin32": bytes.Repeat([]byte{0xcd}, 65536),
	}
	times := storh.Map{
		"t32":    time.Unix(1_700_000_000, 0).UTC(),                               // 4-byte form
		"t64":    time.Unix(1_700_000_000, 123_456_789).UTC(),                     // 8-byte form
		"t96":    time.Date(1969, 7, 20, 20, 17, 40, 5, time.UTC),                 // 12-byte form (before 1970)
		"far":    time.Date(2600, 1, 1, 0, 0, 0, 999_999_999, time.UTC),           // 12-byte form (past 2^34 s)
		"zoned":  time.Date(2024, 2, 29, 23, 30, 0, 0, time.FixedZone("x", 7200)), // stored as the instant
		"epoch":  time.Unix(0, 0).UTC(),
		"millis": time.UnixMilli(1_718_000_000_123).UTC(),
	}
	nested := storh.Map{
		"b": storh.Map{"y": storh.Map{"q": 1, "p": []any{storh.Map{"z": nil, "a": true}}}, "x": []any{}},
		"a": []any{1, "two", 3.5, nil, false, []byte("bin"), []any{[]any{}}, storh.Map{}},
		"":  "empty key", "B": "upper", "é": "accent", "a b": "space",
	}
	return []formatRecord{
		{"docs", formatID(1), ints},
		{"docs", formatID(2), floats},
		{"docs", formatID(3), strs},
		{"docs", formatID(4), bins},
		{"docs", formatID(5), times},
		{"docs", formatID(6), nested},
		{"docs", formatID(7), storh.Map{}},
		{"docs", formatID(8), storh.Map{"null": nil, "yes": true, "no": false}},
		{"docs", formatID(9), formatStruct{Zeta: "z", Alpha: -7, Inner: formatInner{Y: []string{"b", "a"}, X: true},
			Ptr: &formatInner{}, Counts: map[string]uint16{"c": 3, "a": 1, "b": 2, "e": 5, "d": 4}, Score: 0.25}},
		{"docs", formatID(10), map[string][]int{"odd": {1, 3}, "even": {2, 4}, "none": nil}},
		{"events", formatID(11), storh.Map{"type": "created", "n": 1}},
		{"events", formatID(12), storh.Map{"type": "updated", "n": 2, "at": time.UnixMilli(1_700_000_000_012).UTC()}},
		{"events", formatID(13), storh.Map{"type": "deleted", "n": 3}},
		{"other", formatID(14), storh.Map{"version": 1}},
		{"other", formatID(15), storh.Map{"doomed": true}},
	}
}

// formatEdits run after formatRecords: an upsert and a delete, so the file
// also pins counters that moved both ways.
func formatEdits(t testing.TB, db *storh.DB) {
	other, err := db.Docs("other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.PutWithID(formatID(14), storh.Map{"version": 2, "replaced": true}); err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(formatID(15)); err != nil {
		t.Fatal(err)
	}
}

// formatFinal is what each collection holds after the edits: id → data.
func formatFinal() map[string]map[uuidv7.UUID]any {
	out := map[string]map[uuidv7.UUID]any{}
	for _, r := range formatRecords() {
		if out[r.coll] == nil {
			out[r.coll] = map[uuidv7.UUID]any{}
		}
		out[r.coll][r.id] = r.data
	}
	out["other"][formatID(14)] = storh.Map{"version": 2, "replaced": true}
	delete(out["other"], formatID(15))
	return out
}

// writeFormatDB writes the pinned content into a new database at path.
func writeFormatDB(t testing.TB, path string) {
	t.Helper()
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	handles := map[string]interface {
		PutWithID(uuidv7.UUID, any) (storh.Record, error)
	}{}
	for _, r := range formatRecords() {
		h, ok := handles[r.coll]
		if !ok {
			if r.coll == "events" {
				h, err = db.Log(r.coll)
			} else {
				h, err = db.Docs(r.coll)
			}
			if err != nil {
				t.Fatal(err)
			}
			handles[r.coll] = h
		}
		if _, err := h.PutWithID(r.id, r.data); err != nil {
			t.Fatalf("write %s %s: %v", r.coll, r.id, err)
		}
	}
	formatEdits(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// rawValues reads every stored value of the closed database at path:
// "collection id" → the stored bytes.
func rawValues(t testing.TB, path string) map[string][]byte {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	out := map[string][]byte{}
	err = bdb.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if name[0] == 0 {
				return nil
			}
			return b.Bucket([]byte("r")).ForEach(func(k, v []byte) error {
				var id uuidv7.UUID
				copy(id[:], k)
				out[string(name)+" "+id.String()] = bytes.Clone(v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readVectors(t *testing.T) map[string][]byte {
	t.Helper()
	return readHexLines(t, filepath.Join(format1Dir, "values.hex"))
}

// readHexLines reads a pinned file of lines "a b hex" (and # comments):
// "a b" → the bytes.
func readHexLines(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			t.Fatalf("%s: bad line %q", path, line)
		}
		v, err := hex.DecodeString(fields[2])
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[fields[0]+" "+fields[1]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFormat1WriteFiles writes the pinned files when asked to and they do
// not exist yet.
func TestFormat1WriteFiles(t *testing.T) {
	if !*writeFormat1 {
		t.Skip("run with -write-format1 to write testdata/format1 (once)")
	}
	if _, err := os.Stat(format1Dir); err == nil {
		t.Fatalf("%s exists: the format-1 files are never rewritten", format1Dir)
	}
	if err := os.MkdirAll(format1Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "format1.db")
	writeFormatDB(t, tmp)
	// Compact packs it into a few pages, instead of bbolt's 16 MiB step.
	if _, err := storh.Compact(tmp, filepath.Join(format1Dir, "format1.db")); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# collection id stored-value-hex (version byte, CRC-32C of payload and key, msgpack payload)\n")
	b.WriteString("# Format 1, pinned: these bytes must never change. See storh/format_test.go.\n")
	vals := rawValues(t, tmp)
	for _, r := range formatRecords() {
		key := r.coll + " " + r.id.String()
		if v, ok := vals[key]; ok {
			fmt.Fprintf(&b, "%s %x\n", key, v)
		}
	}
	if err := os.WriteFile(filepath.Join(format1Dir, "values.hex"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFormat1FileReads: today's code opens the pinned file and reads every
// record, with exactly its pinned bytes and its data, in order, with the
// right counters and a clean Verify; no other record appears.
func TestFormat1FileReads(t *testing.T) {
	vectors := readVectors(t)
	path := filepath.Join(t.TempDir(), "format1.db")
	orig, err := os.ReadFile(filepath.Join(format1Dir, "format1.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if raw := rawValues(t, path); len(raw) != len(vectors) {
		t.Errorf("the file holds %d values, values.hex %d", len(raw), len(vectors))
	} else {
		for key, v := range raw {
			if !bytes.Equal(v, vectors[key]) {
				t.Errorf("%s: stored bytes differ from values.hex", key)
			}
		}
	}
	db, err := storh.Open(path, storh.WithReadOnly())
	if err != nil {
		t.Fatalf("open the format-1 file: %v", err)
	}
	defer db.Close()
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 || rep.Collections != 3 {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
	final := formatFinal()
	for coll, recs := range final {
		var c interface {
			Get(uuidv7.UUID) (storh.Record, error)
			Stream(query.Query) func(func(storh.Record, error) bool)
			Count() (int, error)
		}
		if coll == "events" {
			l, err := db.Log(coll)
			if err != nil {
				t.Fatal(err)
			}
			c = logAdapter{l}
		} else {
			d, err := db.Docs(coll)
			if err != nil {
				t.Fatal(err)
			}
			c = docsAdapter{d}
		}
		if n, err := c.Count(); err != nil || n != len(recs) {
			t.Errorf("%s: Count = %d, %v; want %d", coll, n, err, len(recs))
		}
		streamed := collect(t, c.Stream(query.All()))
		if len(streamed) != len(recs) {
			t.Errorf("%s: Stream returned %d records; want %d", coll, len(streamed), len(recs))
		}
		for i, rec := range streamed {
			if i > 0 && rec.ID.Compare(streamed[i-1].ID) <= 0 {
				t.Errorf("%s: Stream out of id order at %d", coll, i)
			}
		}
		for id, data := range recs {
			rec, err := c.Get(id)
			if err != nil {
				t.Errorf("%s %s: Get: %v", coll, id, err)
				continue
			}
			want := vectors[coll+" "+id.String()]
			if len(want) < 5 || !bytes.Equal(rec.Raw(), want[5:]) {
				t.Errorf("%s %s: payload differs from values.hex", coll, id)
			}
			if got, want := fmt.Sprintf("%#v", rec.Data()), fmt.Sprintf("%#v", normalized(t, data)); got != want {
				t.Errorf("%s %s: Data\n got %s\nwant %s", coll, id, got, want)
			}
		}
	}
}

// TestFormat1EncoderWritesThePinnedBytes: writing the same records with
// today's code gives the pinned bytes, byte for byte: header, checksum and
// payload.
func TestFormat1EncoderWritesThePinnedBytes(t *testing.T) {
	vectors := readVectors(t)
	path := filepath.Join(t.TempDir(), "again.db")
	writeFormatDB(t, path)
	got := rawValues(t, path)
	if len(got) != len(vectors) {
		t.Errorf("wrote %d values; values.hex has %d", len(got), len(vectors))
	}
	for key, want := range vectors {
		if !bytes.Equal(got[key], want) {
			t.Errorf("%s: today's encoder writes\n %x\nvalues.hex pins\n %x", key, got[key], want)
		}
	}
}

// normalized is data in the types Record.Data returns.
func normalized(t *testing.T, data any) any {
	t.Helper()
	if s, ok := data.(formatStruct); ok {
		// msgpack field names, the types the struct carries, omitempty.
		data = storh.Map{"zeta": s.Zeta, "alpha": s.Alpha, "score": s.Score,
			"inner":  storh.Map{"y": []any{s.Inner.Y[0], s.Inner.Y[1]}, "x": s.Inner.X},
			"ptr":    storh.Map{"y": nil, "x": false},
			"counts": storh.Map{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}}
	}
	n, err := mpack.Normalize(data)
	if err != nil {
		t.Fatalf("normalize %T: %v", data, err)
	}
	return n
}

type docsAdapter struct{ *storh.Docs }

func (d docsAdapter) Stream(q query.Query) func(func(storh.Record, error) bool) {
	return d.Docs.Stream(q)
}

type logAdapter struct{ *storh.Log }

func (l logAdapter) Stream(q query.Query) func(func(storh.Record, error) bool) {
	return l.Log.Stream(q)
}
