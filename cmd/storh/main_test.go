package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	_ "time/tzdata" // TZ in scripts works without the system zone database

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
)

// TestMain makes the test binary double as the storh command, so scripts
// run `storh …` as a real process: exit codes, stdout and stderr included.
func TestMain(m *testing.M) {
	testscript.Main(withPostgres{m}, map[string]func(){"storh": main})
}

// withPostgres stops the PostgreSQL server of the tests (postgresSchema)
// once they are done.
type withPostgres struct{ m *testing.M }

func (w withPostgres) Run() int {
	code := w.m.Run()
	if err := stopPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "postgres:", err)
		code = max(code, 1)
	}
	return code
}

// TestScripts runs the end-to-end scripts in testdata/script.
func TestScripts(t *testing.T) {
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("TESTDATA", testdata)
			env.Setenv("TZ", "UTC")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"gen-jsonl":       cmdGenJSONL,
			"corrupt-value":   cmdCorruptValue,
			"set-count":       cmdSetCount,
			"hold-lock":       cmdHoldLock,
			"make-queue":      cmdMakeQueue,
			"release-lock":    cmdReleaseLock,
			"write-bytes":     cmdWriteBytes,
			"env-bytes":       cmdEnvBytes,
			"env-repeat":      cmdEnvRepeat,
			"gen-long":        cmdGenLong,
			"truncate-file":   cmdTruncateFile,
			"gen-dup-ids":     cmdGenDupIDs,
			"keys":            cmdKeys,
			"interrupt-index": cmdInterruptIndex,
		},
		RequireExplicitExec: true,
	})
}

// cmdGenJSONL writes N generated bare rows: gen-jsonl FILE N [bad-line].
// With bad-line, that line is not JSON.
func cmdGenJSONL(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: gen-jsonl FILE N [bad-line]")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	bad := -1
	if len(args) == 3 {
		bad, err = strconv.Atoi(args[2])
		ts.Check(err)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), genRows(n, bad), 0o644))
}

// genRows makes n realistic bare JSONL rows; line bad (1-based) is broken.
func genRows(n, bad int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	levels := []string{"info", "warn", "error"}
	for i := 1; i <= n; i++ {
		if i == bad {
			b.WriteString(`{"level":"info","n":` + "\n")
			continue
		}
		fmt.Fprintf(&b, `{"level":%q,"service":"api","path":"/pages/%d","status":%d,"ms":%.3f,"user":"u%04d","ok":%t,"n":%d,"tags":["a","b"]}`+"\n",
			levels[r.IntN(3)], r.IntN(1000), 200+r.IntN(4), r.Float64()*100, r.IntN(10000), r.IntN(2) == 0, i)
	}
	return b.Bytes()
}

// openBolt opens a database file with bbolt directly, to damage it.
func openBolt(ts *testscript.TestScript, path string) *bolt.DB {
	db, err := bolt.Open(ts.MkAbs(path), 0o600, nil)
	ts.Check(err)
	return db
}

// cmdCorruptValue flips a payload byte of the first record of a
// collection, so its checksum fails: corrupt-value DB COLL.
func cmdCorruptValue(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: corrupt-value DB COLL")
	}
	db := openBolt(ts, args[0])
	defer db.Close()
	ts.Check(db.Update(func(tx *bolt.Tx) error {
		recs := tx.Bucket([]byte(args[1])).Bucket([]byte("r"))
		k, v := recs.Cursor().First()
		if k == nil {
			return fmt.Errorf("collection %s is empty", args[1])
		}
		bad := bytes.Clone(v)
		bad[len(bad)-1] ^= 0xff
		return recs.Put(bytes.Clone(k), bad)
	}))
}

// cmdSetCount overwrites a collection's stored record count:
// set-count DB COLL N.
func cmdSetCount(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: set-count DB COLL N")
	}
	n, err := strconv.ParseInt(args[2], 10, 64)
	ts.Check(err)
	db := openBolt(ts, args[0])
	defer db.Close()
	ts.Check(db.Update(func(tx *bolt.Tx) error {
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(n))
		return tx.Bucket([]byte(args[1])).Bucket([]byte("m")).Put([]byte("count"), v[:])
	}))
}

// runStorh runs one command line in-process and returns its output and
// exit code.
func runStorh(ctx context.Context, stdin string, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(ctx, args, strings.NewReader(stdin), &out, &errb, func(string) string { return "" })
	return out.String(), errb.String(), code
}

// Locks held by scripts, by absolute path. The test process opens the file
// with bbolt, which takes the same exclusive lock a writing storh process
// holds, so the storh processes a script starts meet a locked database.
var (
	locksMu sync.Mutex
	locks   = map[string]*bolt.DB{}
)

// cmdHoldLock opens a database for writing until release-lock: hold-lock DB.
func cmdHoldLock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: hold-lock DB")
	}
	db := openBolt(ts, args[0])
	locksMu.Lock()
	defer locksMu.Unlock()
	locks[ts.MkAbs(args[0])] = db
	ts.Defer(func() { db.Close() })
}

// cmdReleaseLock closes what hold-lock opened: release-lock DB.
func cmdReleaseLock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: release-lock DB")
	}
	locksMu.Lock()
	defer locksMu.Unlock()
	path := ts.MkAbs(args[0])
	db, ok := locks[path]
	if !ok {
		ts.Fatalf("%s is not locked", args[0])
	}
	delete(locks, path)
	ts.Check(db.Close())
}

// cmdMakeQueue creates an empty queue collection, which the command cannot
// do yet: make-queue DB NAME. The library creates a collection with its
// first write, and a queue has no writes yet, so when opening it left
// nothing behind the queue's buckets are written directly, as the engine
// lays them out: NAME/m (kind 3, count and bytes 0) and NAME/r.
func cmdMakeQueue(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: make-queue DB NAME")
	}
	db, err := storh.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	_, err = db.Queue(args[1])
	ts.Check(err)
	st, err := db.Stats()
	ts.Check(err)
	ts.Check(db.Close())
	for _, c := range st.Collections {
		if c.Name == args[1] {
			return
		}
	}
	bdb := openBolt(ts, args[0])
	defer bdb.Close()
	ts.Check(bdb.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucket([]byte(args[1]))
		if err != nil {
			return err
		}
		meta, err := root.CreateBucket([]byte("m"))
		if err != nil {
			return err
		}
		if _, err := root.CreateBucket([]byte("r")); err != nil {
			return err
		}
		var zero [8]byte
		for k, v := range map[string][]byte{"kind": {3}, "count": zero[:], "bytes": zero[:]} {
			if err := meta.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	}))
}

// unescapeBytes reads the escapes \n, \t, \\ and \xHH, so scripts can
// write bytes that are not UTF-8 (which a txtar file cannot hold).
func unescapeBytes(ts *testscript.TestScript, s string) []byte {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b = append(b, s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b = append(b, '\n')
		case 't':
			b = append(b, '\t')
		case 'x':
			if i+2 >= len(s) {
				ts.Fatalf("\\x needs two hex digits")
			}
			n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			ts.Check(err)
			b = append(b, byte(n))
			i += 2
		default:
			b = append(b, s[i])
		}
	}
	return b
}

// cmdWriteBytes writes TEXT, with escapes (\n, \t, \xHH), to FILE:
// write-bytes FILE TEXT.
func cmdWriteBytes(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: write-bytes FILE TEXT")
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), unescapeBytes(ts, args[1]), 0o644))
}

// cmdEnvBytes sets VAR to TEXT with escapes, for arguments that are not
// UTF-8: env-bytes VAR TEXT.
func cmdEnvBytes(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: env-bytes VAR TEXT")
	}
	ts.Setenv(args[0], string(unescapeBytes(ts, args[1])))
}

// cmdEnvRepeat sets VAR to TEXT repeated N times, for very long arguments:
// env-repeat VAR TEXT N.
func cmdEnvRepeat(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: env-repeat VAR TEXT N")
	}
	n, err := strconv.Atoi(args[2])
	ts.Check(err)
	ts.Setenv(args[0], strings.Repeat(args[1], n))
}

// cmdGenLong writes one JSON line of N bytes (and a short line after it):
// gen-long FILE N.
func cmdGenLong(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: gen-long FILE N")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	f, err := os.Create(ts.MkAbs(args[0]))
	ts.Check(err)
	defer f.Close()
	_, err = fmt.Fprintf(f, "{\"s\":\"%s\"}\n{\"n\":2}\n", strings.Repeat("x", max(0, n-8)))
	ts.Check(err)
}

// cmdTruncateFile cuts FILE to SIZE bytes: truncate-file FILE SIZE.
func cmdTruncateFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: truncate-file FILE SIZE")
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	ts.Check(os.Truncate(ts.MkAbs(args[0]), n))
}

// cmdGenDupIDs writes N export rows with distinct ids, except that line
// LATER repeats the id of line FIRST: gen-dup-ids FILE N FIRST LATER.
func cmdGenDupIDs(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: gen-dup-ids FILE N FIRST LATER")
	}
	var n [3]int
	for i, a := range args[1:] {
		v, err := strconv.Atoi(a)
		ts.Check(err)
		n[i] = v
	}
	var b bytes.Buffer
	for i := 1; i <= n[0]; i++ {
		id := i
		if i == n[2] {
			id = n[1]
		}
		fmt.Fprintf(&b, `{"id":"0190a4f4-5c3b-7def-8123-%012d","data":{"n":%d}}`+"\n", id, i)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), b.Bytes(), 0o644))
}

// cmdKeys checks which records the last command printed, and in which
// order, by their field k: keys [none | K...]. Scripts stay short and the
// comparison exact.
func cmdKeys(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: keys none | keys K...")
	}
	want := strings.Join(args, " ")
	if want == "none" {
		want = ""
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(ts.ReadFile("stdout")), "\n") {
		if line == "" {
			continue
		}
		var rec struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			ts.Fatalf("stdout line %q is not a record: %v", line, err)
		}
		got = append(got, fmt.Sprint(rec.Data["k"]))
	}
	if g := strings.Join(got, " "); g != want {
		ts.Fatalf("records printed: %q, want %q", g, want)
	}
}

// cmdInterruptIndex makes an index look like its build was cut short by a
// crash before its first commit: marked building, no progress, no entries.
// interrupt-index DB COLL NAME.
func cmdInterruptIndex(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: interrupt-index DB COLL NAME")
	}
	db := openBolt(ts, args[0])
	defer db.Close()
	ts.Check(db.Update(func(tx *bolt.Tx) error {
		coll := tx.Bucket([]byte(args[1]))
		defs := coll.Bucket([]byte("x"))
		var def map[string]any
		if err := msgpack.Unmarshal(defs.Get([]byte(args[2])), &def); err != nil {
			return err
		}
		def["building"], def["entries"] = true, 0
		delete(def, "mark")
		// A blocked index's journal is empty too: nothing of it committed.
		if def["layout"] != nil {
			def["pending"], def["floor"] = 0, def["seq"]
			if err := emptyBucket(coll.Bucket([]byte("l")), args[2]); err != nil {
				return err
			}
		}
		b, err := msgpack.Marshal(def)
		if err != nil {
			return err
		}
		if err := defs.Put([]byte(args[2]), b); err != nil {
			return err
		}
		if err := emptyBucket(coll.Bucket([]byte("i")), args[2]); err != nil {
			return err
		}
		if def["chained"] == true {
			// Its blocks are the head block alone, holding nothing, as the
			// index was created.
			return coll.Bucket([]byte("i")).Bucket([]byte(args[2])).Put(headKey, emptyHeadBlock())
		}
		return nil
	}))
}

// headKey and emptyHeadBlock are the only block of an empty blocked index
// (storh/engine/internal/blockindex/block.go): version 2, its checksum (CRC-32C of the
// rest, then of its key), no entries, no restarts, no successor.
var headKey = []byte{0}

func emptyHeadBlock() []byte {
	v := make([]byte, 11)
	v[0] = 2
	table := crc32.MakeTable(crc32.Castagnoli)
	binary.BigEndian.PutUint32(v[1:], crc32.Update(crc32.Checksum(v[5:], table), table, headKey))
	return v
}

func emptyBucket(parent *bolt.Bucket, name string) error {
	if err := parent.DeleteBucket([]byte(name)); err != nil {
		return err
	}
	_, err := parent.CreateBucket([]byte(name))
	return err
}
