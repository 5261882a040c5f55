package storh_test

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/postgres"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// deadlocked is set when a test has detected a deadlock: closing a database
// then would hang the test binary instead of reporting the failure.
var deadlocked atomic.Bool

// onPostgres runs the package's tests on the PostgreSQL backend
// (STORH_TEST_BACKEND=postgres): every store a test opens through newPath,
// openAt or openTemp is then a fresh schema on the test server, and the
// tests of what only a file has skip (fileOnly). The same test code checks
// both backends.
var onPostgres = os.Getenv("STORH_TEST_BACKEND") == "postgres"

// fileOnly skips a test of what only a database file has (its bytes, its
// lock, backup and compaction) when the tests run on PostgreSQL.
func fileOnly(t testing.TB) {
	t.Helper()
	if onPostgres {
		t.Skip("a database file's behaviour: not on the PostgreSQL backend")
	}
}

// tuneFor applies tune settings (see package tune) for the rest of the
// test: smaller index blocks and folds, or a forced index layout.
func tuneFor(t testing.TB, settings string) {
	t.Helper()
	restore, err := tune.Set(settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
}

// newPath returns where a fresh database goes: a path in a per-test
// directory, or on PostgreSQL the URL of a fresh schema.
func newPath(t testing.TB) string {
	t.Helper()
	if onPostgres {
		return pgtest.SchemaURL(t)
	}
	return filepath.Join(t.TempDir(), "test.db")
}

// openAt opens path without fsync (durability is not what these tests
// measure) and closes it when the test ends, unless the test closed it.
func openAt(t testing.TB, path string, opts ...storh.Option) *storh.DB {
	t.Helper()
	db, err := storh.Open(path, append([]storh.Option{storh.WithoutSync()}, opts...)...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if deadlocked.Load() {
			return
		}
		if err := db.Close(); err != nil && !errors.Is(err, storh.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func openTemp(t testing.TB, opts ...storh.Option) *storh.DB {
	t.Helper()
	return openAt(t, newPath(t), opts...)
}

// idAt mints a UUIDv7 at exactly ms.
func idAt(t testing.TB, ms int64) uuidv7.UUID {
	t.Helper()
	id, err := uuidv7.NewAt(ms)
	if err != nil {
		t.Fatalf("NewAt(%d): %v", ms, err)
	}
	return id
}

// v4ID is a well-formed random (version 4) UUID: a valid UUID, not a UUIDv7.
var v4ID = uuidv7.UUID{0x1b, 0x4e, 0x28, 0xba, 0x2f, 0xa1, 0x41, 0xd2, 0x88, 0x3f, 0x0b, 0x4e, 0x28, 0xba, 0x2f, 0xa1}

// badVariantID has version 7 but the variant bits 11 (Microsoft) instead of 10.
func badVariantID(t testing.TB) uuidv7.UUID {
	id := idAt(t, 1_700_000_000_000)
	id[8] = id[8]&0x3f | 0xc0
	return id
}

// digest hashes every bucket, key and value of the open database, read from
// a consistent backup, so a test can prove that a failed call changed
// nothing.
func digest(t testing.TB, db *storh.DB) string {
	t.Helper()
	if onPostgres {
		return digestPostgres(t, db.Path())
	}
	path := filepath.Join(t.TempDir(), "digest.db")
	if _, err := db.BackupFile(path); err != nil {
		t.Fatalf("digest: backup: %v", err)
	}
	return digestFile(t, path)
}

// digestFile is digest for a database that is not open.
func digestFile(t testing.TB, path string) string {
	t.Helper()
	if onPostgres {
		return digestPostgres(t, path)
	}
	return boltDigest(t, path)
}

// boltDigest is digestFile for a file whatever STORH_TEST_BACKEND says,
// for tests that name their files and servers themselves.
func boltDigest(t testing.TB, path string) string {
	t.Helper()
	var sum string
	testkit.ViewBolt(t, path, func(tx *bolt.Tx) { sum = testkit.DigestBolt(tx) })
	return sum
}

// digestPostgres is digest on the PostgreSQL backend: the same walk of
// every bucket, key and value, through a second connection's snapshot.
func digestPostgres(t testing.TB, url string) string {
	t.Helper()
	store, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("digest: %v", err)
	}
	defer store.Close()
	tx, err := store.Begin(false)
	if err != nil {
		t.Fatalf("digest: %v", err)
	}
	defer tx.Rollback()
	sum, err := testkit.DigestKV(tx)
	if err != nil {
		t.Fatalf("digest: %v", err)
	}
	return sum
}

// collect drains a stream, failing the test on an error.
func collect(t testing.TB, seq func(func(storh.Record, error) bool)) []storh.Record {
	t.Helper()
	var out []storh.Record
	for rec, err := range seq {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		out = append(out, rec)
	}
	return out
}

// streamErr drains a stream and returns the records before the first error
// and that error.
func streamErr(seq func(func(storh.Record, error) bool)) ([]storh.Record, error) {
	var out []storh.Record
	for rec, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
	return out, nil
}

func ids(recs []storh.Record) []uuidv7.UUID {
	out := make([]uuidv7.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func sameIDs(a, b []uuidv7.UUID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkErr asserts errors.Is(err, want), the package prefix of the message,
// and that the message names every string in mention.
func checkErr(t testing.TB, err, want error, mention ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v; want errors.Is(err, %v)", err, want)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "storh: ") {
		t.Errorf("message %q does not start with %q", msg, "storh: ")
	}
	// A message goes to logs and terminals: no raw control characters or
	// invalid UTF-8 from user input (names are quoted with escapes).
	if !utf8.ValidString(msg) || strings.IndexFunc(msg, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		t.Errorf("message %q holds unprintable characters", msg)
	}
	for _, m := range mention {
		if !strings.Contains(msg, m) {
			t.Errorf("message %q does not mention %q", msg, m)
		}
	}
}

func mustCount(t testing.TB, c interface{ Count() (int, error) }) int {
	t.Helper()
	n, err := c.Count()
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	return n
}

func all() query.Query { return query.All() }

// seal writes the checksum of a stored value for key into its header, as
// the engine does on every put: CRC-32C (Castagnoli) of the payload and
// then the key, big-endian in bytes 1-4. Tests use it to forge values that
// pass the checksum; it restates the format on purpose.
func seal(value []byte, key uuidv7.UUID) {
	crc := crc32.Update(crc32.Checksum(value[5:], castagnoli), castagnoli, key[:])
	binary.BigEndian.PutUint32(value[1:5], crc)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// startChild runs the test named test of this test binary as a second OS
// process, with env added to this process's environment, and returns it
// started, with pipes to its stdin and from its stdout; its stderr is
// this process's. The caller ends it (closing in, or killing it).
func startChild(t *testing.T, test string, env ...string) (cmd *exec.Cmd, in io.WriteCloser, out io.ReadCloser) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, in, out
}
