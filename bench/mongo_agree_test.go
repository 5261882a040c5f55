package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestDriverAgreementMongoImport checks `storh import --mongo` against the
// MongoDB Go driver: every line of the test corpus is imported by the storh
// command, built from this repository, and each stored record is compared
// with the document bson.UnmarshalExtJSON reads from the same line, after
// mapping the driver's types to the storh types docs/bulk-data.md promises
// (see expectValue). The import code is in package main and an internal
// package, so it is driven as a user drives it: through the binary and the
// database file.
//
// Every difference must be on intendedDiffs (the allow-list, each entry
// with its reason) or on knownBugs (reported, waiting for a fix); anything
// else fails the test with the input line and both values.
//
// Run it with: go test -run '^TestDriverAgreement' ./...
func TestDriverAgreementMongoImport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the storh command")
	}
	root := repoRoot(t)
	cli := buildStorhCLI(t, root)
	seen := newFindings()

	t.Run("samples", func(t *testing.T) {
		// The migration samples: whole files, as a user imports them.
		// orders.jsonl is canonical Extended JSON, users.jsonl relaxed.
		for _, s := range []struct {
			file      string
			canonical bool
		}{
			{"users.jsonl", false},
			{"orders.jsonl", true},
		} {
			t.Run(s.file, func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(root, "cmd", "storh", "testdata", "mongo", s.file)
				checkFile(t, cli, path, s.canonical, seen)
			})
		}
	})

	t.Run("lines", func(t *testing.T) {
		// Every other line of the corpus, one import each, so that a line
		// the import refuses is seen on its own.
		for _, c := range corpusLines(t, root) {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				checkLine(t, cli, c, seen)
			})
		}
	})

	t.Run("generated", func(t *testing.T) {
		// Documents of every BSON type storh maps, written by the driver's
		// own Extended JSON writer (the one mongoexport uses), in both
		// formats.
		docs := generateDocs(mongoSeed(t), 400)
		for _, canonical := range []bool{false, true} {
			t.Run(map[bool]string{false: "relaxed", true: "canonical"}[canonical], func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(t.TempDir(), "generated.jsonl")
				var buf bytes.Buffer
				for _, d := range docs {
					b, err := bson.MarshalExtJSON(d, canonical, false)
					if err != nil {
						t.Fatalf("bson.MarshalExtJSON(%v): %v", d, err)
					}
					buf.Write(b)
					buf.WriteByte('\n')
				}
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				checkFile(t, cli, path, canonical, seen)
			})
		}
	})

	// Every allowed difference and known bug must still occur: an entry
	// that matches nothing is stale (the driver or the import changed) and
	// must be removed, with its line in the documentation. Only a run of
	// the whole test can tell.
	if !ranWhole() {
		t.Log("part of the test was selected with -run or -skip: not checking for stale allow-list entries")
		return
	}
	for _, a := range intendedDiffs {
		if seen.count(a.name) == 0 {
			t.Errorf("allowed difference %q was not seen: remove it here and in the \"Agreement with the MongoDB Go driver\" section", a.name)
		}
	}
	for _, b := range knownBugs {
		if seen.count(b.name) == 0 {
			t.Errorf("known bug %q no longer occurs: it is fixed, so remove it from knownBugs (the test then guards the fix)", b.name)
		}
	}
	for _, a := range intendedDiffs {
		t.Logf("allowed difference %-22s seen %d times", a.name, seen.count(a.name))
	}
	for _, b := range knownBugs {
		t.Logf("known bug          %-22s seen %d times", b.name, seen.count(b.name))
	}
}

// ranWhole reports whether no subtest of this test was filtered out.
func ranWhole() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && (strings.Contains(f.Value.String(), "/") || name == "test.skip" && f.Value.String() != "") {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Intended differences and known bugs.

// difference is one way a stored record (or the import's verdict on a
// line) differs from what the driver reads.
type difference struct {
	kind string // see the kind* constants
	path string // field path, "" for the whole line
	line []byte
	// got is the stored value, bsonV the driver's value at path, and want
	// the storh value the documented mapping gives for bsonV.
	got, bsonV, want any
	// storhErr and bsonErr are the two verdicts for line-level kinds.
	storhErr, bsonErr string
}

const (
	kindValue        = "value"         // both read the line; the values differ
	kindStorhRejects = "storh-rejects" // the driver reads the line, import refuses it
	kindBSONRejects  = "bson-rejects"  // import stores the line, the driver refuses it
	kindSkipped      = "skipped"       // import stores nothing and reports no error
	kindDuplicateKey = "duplicate-key" // the driver's bson.D keeps a repeated key twice
	kindUnmapped     = "unmapped"      // a BSON type with no documented storh mapping
	kindNoEquivalent = "no-equivalent" // MinKey, MaxKey, DBPointer in a stored record
	kindRecordID     = "record-id"     // the record id is not the one _id maps to
)

func (d difference) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", d.kind)
	if d.path != "" {
		fmt.Fprintf(&b, " at %s", d.path)
	}
	fmt.Fprintf(&b, "\n    line:  %s", clipForMessage(d.line))
	switch d.kind {
	case kindStorhRejects, kindBSONRejects, kindSkipped:
		fmt.Fprintf(&b, "\n    storh: %s\n    bson:  %s", orOK(d.storhErr), orOK(d.bsonErr))
	default:
		fmt.Fprintf(&b, "\n    storh: %s\n    bson:  %s\n    want:  %s", describeValue(d.got), describeValue(d.bsonV), describeValue(d.want))
	}
	return b.String()
}

func orOK(s string) string {
	if s == "" {
		return "accepted"
	}
	return s
}

// exception is an entry of intendedDiffs or knownBugs.
type exception struct {
	name string
	// why is the justification (intendedDiffs) or the report (knownBugs).
	why   string
	match func(d difference) bool
}

// intendedDiffs lists the intended differences. Each is also written up, with the
// same name, in the "Agreement with the MongoDB Go driver" section of
// docs/bulk-data.md. The documented type mapping itself (Int32 → int64,
// Decimal128 → string, Binary → []byte and so on) is not a difference: it is
// what expectValue computes.
var intendedDiffs = []exception{
	{
		name: "blank-line",
		why: "JSON lines: import skips blank lines; the driver reads one document and finds none. " +
			"mongoexport writes no blank lines.",
		match: func(d difference) bool {
			return d.kind == kindSkipped && len(bytes.TrimSpace(d.line)) == 0
		},
	},
	{
		name: "byte-order-mark",
		why: "import ignores a UTF-8 byte order mark at the start of a file (editors on Windows write one); " +
			"the driver's reader sees an invalid character.",
		match: func(d difference) bool {
			return d.kind == kindBSONRejects && bytes.HasPrefix(d.line, []byte("\xef\xbb\xbf"))
		},
	},
	{
		name: "trailing-content",
		why: "import reads exactly one object per line and refuses anything after it; bson.UnmarshalExtJSON " +
			"reads the first value and ignores the rest of its input.",
		match: func(d difference) bool {
			return d.kind == kindStorhRejects && hasTrailingContent(d.line)
		},
	},
	{
		name: "no-storh-equivalent",
		why: "MinKey, MaxKey, DBPointer and code with scope have no storh type, so import stops at them with " +
			"the field name (docs/bulk-data.md, Limits) rather than store something a query would misread.",
		match: func(d difference) bool {
			return d.kind == kindStorhRejects && strings.Contains(d.storhErr, "has no storh equivalent") &&
				containsType(d.line, func(v any) bool {
					switch v.(type) {
					case bson.MinKey, bson.MaxKey, bson.DBPointer, bson.CodeWithScope:
						return true
					}
					return false
				})
		},
	},
	{
		name: "oid-field-taken",
		why: "import keeps an ObjectID _id as the field _oid; a document that already has _oid would lose " +
			"one of the two, so import stops and asks for a rename.",
		match: func(d difference) bool {
			return d.kind == kindStorhRejects && strings.Contains(d.storhErr, "already has an _oid field")
		},
	},
	{
		name: "wrapper-with-extra-keys",
		why: "an object with a wrapper key ($date, $oid, …) and other keys is not a wrapper: import keeps it " +
			"as a map, as it does every object with unknown $ keys; the driver refuses the line.",
		match: func(d difference) bool {
			return d.kind == kindBSONRejects && hasWrapperWithExtraKeys(d.line)
		},
	},
	{
		name: "date-nanoseconds",
		why: "a $date string with more than millisecond precision keeps every digit in storh (time.Time is " +
			"nanoseconds, and storh's own export writes nanoseconds); BSON dates are milliseconds, so the " +
			"driver truncates.",
		match: func(d difference) bool {
			g, ok1 := d.got.(time.Time)
			b, ok2 := d.bsonV.(bson.DateTime)
			return d.kind == kindValue && ok1 && ok2 && g.Truncate(time.Millisecond).Equal(b.Time()) && !g.Equal(b.Time())
		},
	},
	{
		name: "integer-above-int64",
		why: "an integer literal between 2^63 and 2^64-1 is stored exactly as uint64 (the storh type mapping); " +
			"BSON has no unsigned type and the driver reads it as a rounded double.",
		match: func(d difference) bool {
			g, ok1 := d.got.(uint64)
			b, ok2 := d.bsonV.(float64)
			return d.kind == kindValue && ok1 && ok2 && float64(g) == b
		},
	},
	{
		name: "invalid-utf8",
		why: "a string with bytes that are not UTF-8, or with a \\u escape of half a surrogate pair, is refused " +
			"by import: storh strings are UTF-8 and the import does not change data silently. The driver keeps " +
			"the raw bytes (which a MongoDB server refuses to store) and turns the half surrogate into U+FFFD.",
		match: func(d difference) bool {
			if d.kind == kindStorhRejects {
				return strings.Contains(d.storhErr, "invalid UTF-8") || strings.Contains(d.storhErr, "surrogate")
			}
			// The decoder as committed before the refusal replaced each bad
			// byte with U+FFFD, as encoding/json does; Decoder.KeepInvalidUTF8
			// stores the bytes as binary data. Both keep this entry valid
			// while the change is under way.
			b, ok := d.bsonV.(string)
			if d.kind != kindValue || !ok || utf8.ValidString(b) {
				return false
			}
			switch g := d.got.(type) {
			case string:
				return g == replaceInvalidUTF8(b)
			case []byte:
				return string(g) == b
			}
			return false
		},
	},
	{
		name: "legacy-regex",
		why: `import reads the Extended JSON v1 form {"$regex":"p","$options":"o"} that mongoexport before 4.2 ` +
			`wrote, as the string "/p/o"; driver v2 reads it as a document with two $ keys (it cannot tell it from ` +
			`a $regex query operator).`,
		match: func(d difference) bool {
			g, ok1 := d.got.(string)
			b, ok2 := d.bsonV.(bson.D)
			if d.kind != kindValue || !ok1 || !ok2 || len(b) != 2 {
				return false
			}
			m := lastWins(b)
			p, okp := m["$regex"].(string)
			o, oko := m["$options"].(string)
			return okp && oko && g == "/"+p+"/"+o
		},
	},
	{
		name: "top-level-wrapper",
		why: "a line whose whole object has the shape of a wrapper, such as {\"$date\":\"2020-07-24T10:20:30Z\"}, " +
			"is that value in storh, not a document, and import says a row must be an object; the driver reads " +
			"a top-level document literally, with a field named $date. mongoexport cannot write such a line.",
		match: func(d difference) bool {
			return d.kind == kindStorhRejects && strings.Contains(d.storhErr, "a row must be") && strings.Contains(d.storhErr, "wrapper")
		},
	},
	{
		name: "double-go-syntax",
		why: "$numberDouble holds a JSON number or \"Infinity\", \"-Infinity\", \"NaN\" (Extended JSON " +
			"specification); the driver hands the string to strconv.ParseFloat, which also takes Go spellings " +
			"such as \"inf\" and hex floats \"0x1p4\". import refuses those.",
		match: func(d difference) bool {
			return d.kind == kindStorhRejects && strings.Contains(d.storhErr, "$numberDouble") &&
				strings.Contains(d.storhErr, "is not a number")
		},
	},
	{
		name: "duplicate-key",
		why: "an object that holds a key twice is refused by import, naming the key: a storh map holds a key " +
			"once, and keeping the last value (as encoding/json and bson.M do) would drop data silently. " +
			"bson.D keeps both members.",
		match: func(d difference) bool {
			// kindDuplicateKey is the decoder as committed before the
			// refusal, which kept the last value.
			return d.kind == kindDuplicateKey || d.kind == kindStorhRejects && strings.Contains(d.storhErr, "duplicate key")
		},
	},
}

// knownBugs lists differences reported as bugs in the import, each with the
// input that shows it. They are not intended: when the import is fixed the
// entry stops matching, and the test fails until it is removed here.
var knownBugs = []exception{}

// classify returns the name of the allowed difference or known bug d is, or
// "" when it is neither.
func classify(d difference) string {
	for _, list := range [][]exception{intendedDiffs, knownBugs} {
		for _, e := range list {
			if e.match(d) {
				return e.name
			}
		}
	}
	return ""
}

// ---------------------------------------------------------------------------
// The corpus.

type corpusLine struct {
	name string // for t.Run
	src  string // where it comes from, for messages
	line []byte
}

// corpusLines gathers the Extended JSON lines of the import's tests besides
// the two sample files: the fuzz seed corpora of the row decoders, and every
// file embedded in a script test that holds Extended JSON.
func corpusLines(t *testing.T, root string) []corpusLine {
	var out []corpusLine
	// FuzzDecodeMongo and FuzzDecodeRow seeds are JSON lines;
	// FuzzAppendPayload seeds are msgpack, not JSON, and are left out.
	for _, target := range []string{"FuzzDecodeMongo", "FuzzDecodeRow"} {
		dir := filepath.Join(root, "storh", "jsonl", "testdata", "fuzz", target)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			line, err := fuzzSeed(b)
			if err != nil {
				t.Fatalf("%s/%s: %v", target, e.Name(), err)
			}
			name := target + "/" + e.Name()
			out = append(out, corpusLine{name: name, src: "storh/jsonl/testdata/fuzz/" + name, line: line})
		}
	}
	scripts, err := filepath.Glob(filepath.Join(root, "cmd", "storh", "testdata", "script", "*.txtar"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no script tests found: %v", err)
	}
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range txtarFiles(b) {
			if !bytes.Contains(f.data, []byte(`"$`)) && !bytes.Contains(f.data, []byte("ObjectId(")) {
				continue // no Extended JSON in it
			}
			for i, line := range bytes.Split(bytes.TrimSuffix(f.data, []byte("\n")), []byte("\n")) {
				name := fmt.Sprintf("%s/%s:%d", strings.TrimSuffix(filepath.Base(s), ".txtar"), f.name, i+1)
				src := fmt.Sprintf("cmd/storh/testdata/script/%s, file %s, line %d", filepath.Base(s), f.name, i+1)
				out = append(out, corpusLine{name: name, src: src, line: line})
			}
		}
	}
	for i, p := range probes {
		name := fmt.Sprintf("probe/%02d", i)
		out = append(out, corpusLine{name: name, src: name + " (bench/mongo_agree_test.go)", line: []byte(p)})
	}
	return out
}

// probes are Extended JSON forms the corpus above lacks: every wrapper of
// the specification in its canonical and relaxed forms, and malformed ones.
var probes = []string{
	// Dates: offsets, before 1970, beyond 9999, legacy number, sub-millisecond.
	`{"_id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d30"},"a":{"$date":"2020-07-24T10:20:30Z"},"b":{"$date":"2020-07-24T10:20:30.1+01:00"},"c":{"$date":"1960-07-24T10:20:30.5Z"}}`,
	`{"far":{"$date":{"$numberLong":"316516204800000"}},"old":{"$date":{"$numberLong":"-62198755200000"}},"legacy":{"$date":1595586030123}}`,
	`{"ns":{"$date":"2024-05-01T12:00:00.123456789Z"},"us":{"$date":"2024-05-01T12:00:00.123456+02:00"}}`,
	`{"bad":{"$date":"10000-07-24T10:20:30Z"}}`,
	// Numbers.
	`{"i":{"$numberInt":"-2147483648"},"j":{"$numberInt":"2147483647"},"l":{"$numberLong":"-9223372036854775808"},"p":{"$numberLong":"+5"}}`,
	`{"over":{"$numberInt":"2147483648"}}`,
	`{"over":{"$numberLong":"9223372036854775808"}}`,
	`{"frac":{"$numberLong":"1.0"}}`,
	`{"z":{"$numberDouble":"-0.0"},"one":{"$numberDouble":"1"},"max":{"$numberDouble":"1.7976931348623157E+308"},"min":{"$numberDouble":"5E-324"}}`,
	`{"x":{"$numberDouble":"1e400"}}`,
	`{"x":{"$numberDouble":"inf"}}`,
	`{"x":{"$numberDouble":"0x1p4"}}`,
	`{"x":1.0E+21,"y":1E3,"z":-0,"w":-0.0,"v":123456789012345678901234567890}`,
	`{"d":{"$numberDecimal":"1E+3"},"e":{"$numberDecimal":"19.990"},"n":{"$numberDecimal":"NaN"},"z":{"$numberDecimal":"-0.0"},"i":{"$numberDecimal":"-Infinity"}}`,
	`{"x":{"$numberDecimal":"abc"}}`,
	`{"x":{"$numberDecimal":"1.2345678901234567890123456789012345678"}}`,
	// Binary: subtypes, legacy form, UUIDs.
	`{"b3":{"$binary":{"base64":"c//SZESzTGmQ6OfR38A11A==","subType":"03"}},"b5":{"$binary":{"base64":"AAE=","subType":"05"}},"b80":{"$binary":{"base64":"AAE=","subType":"80"}},"b4":{"$binary":{"base64":"AAE=","subType":"4"}},"u":{"$binary":{"base64":"c//SZESzTGmQ6OfR38A11A==","subType":"04"}}}`,
	`{"x":{"$binary":{"subType":"00","base64":"AAE="}},"l":{"$binary":"AAE=","$type":"80"},"u":{"$binary":"c//SZESzTGmQ6OfR38A11A==","$type":"4"}}`,
	`{"x":{"$binary":{"base64":"AAE","subType":"00"}}}`,
	`{"u":{"$uuid":"73ffd264-44b3-4c69-90e8-e7d1dfc035d4"}}`,
	// ObjectIDs.
	`{"_id":{"$oid":"5F1A2B3C4D5E6F7A8B9C0D31"},"ref":{"$oid":"5F1A2B3C4D5E6F7A8B9C0D32"},"list":[{"$oid":"5f1a2b3c4d5e6f7a8b9c0d33"}]}`,
	`{"x":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d2"}}`,
	`{"x":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d25","y":1}}`,
	`{"_id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d34"},"_id":2}`,
	`{"_id":null}`,
	`{"_id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d35"},"nested":{"_id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d36"},"_oid":"kept"}}`,
	// Timestamps, regular expressions, code, symbols, undefined.
	`{"ts":{"$timestamp":{"i":1,"t":2}},"max":{"$timestamp":{"t":4294967295,"i":4294967295}}}`,
	`{"ts":{"$timestamp":{"t":4294967296,"i":1}}}`,
	`{"ts":{"$timestamp":{"t":-1,"i":1}}}`,
	`{"r":{"$regularExpression":{"options":"i","pattern":"a/b"}},"s":{"$regularExpression":{"pattern":"","options":""}}}`,
	`{"re":{"$regex":"^a","$options":"i"}}`,
	`{"sym":{"$symbol":"s"},"code":{"$code":"function() {}"}}`,
	`{"cws":{"$code":"f()","$scope":{"x":1}}}`,
	`{"u":{"$undefined":true}}`,
	`{"u":{"$undefined":false}}`,
	`{"m":{"$minKey":1}}`,
	`{"m":{"$maxKey":1}}`,
	`{"p":{"$dbPointer":{"$ref":"c","$id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d25"}}}}`,
	// Shapes.
	`{"$set":1,"$unknown":{"$foo":1}}`,
	`{"$date":"2020-07-24T10:20:30Z"}`,
	`{"x":{"$numberLong":"1","$numberInt":"2"}}`,
	`{"nul":"a\u0000b","sep":"\u2028","emoji":"\ud83d\ude00","lone":"\ud800"}`,
	`{"k\u0000":1}`,
	`{"a":{"$date":"2020-01-01T00:00:00Z"}} {"b":2}`,
}

// fuzzSeed decodes a "go test fuzz v1" file holding one []byte value.
func fuzzSeed(b []byte) ([]byte, error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		return nil, errors.New("not a one-value go test fuzz v1 file")
	}
	v, ok := strings.CutPrefix(lines[1], "[]byte(")
	if !ok || !strings.HasSuffix(v, ")") {
		return nil, fmt.Errorf("not a []byte value: %s", lines[1])
	}
	s, err := strconv.Unquote(strings.TrimSuffix(v, ")"))
	return []byte(s), err
}

type txtarFile struct {
	name string
	data []byte
}

// txtarFiles returns the files of a txtar archive ("-- name --" markers).
func txtarFiles(b []byte) []txtarFile {
	var files []txtarFile
	var cur *txtarFile
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		l := strings.TrimRight(string(line), "\r\n")
		if strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") && len(l) > 6 {
			files = append(files, txtarFile{name: strings.TrimSpace(l[3 : len(l)-3])})
			cur = &files[len(files)-1]
			continue
		}
		if cur != nil {
			cur.data = append(cur.data, line...)
		}
	}
	return files
}

// ---------------------------------------------------------------------------
// Running the command.

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/storhdb/storh-go\n")) {
		t.Fatalf("%s is not the storh-go repository root (go.mod: %v)", root, err)
	}
	return root
}

// buildStorhCLI builds ./cmd/storh of the repository into a temporary
// directory.
func buildStorhCLI(t *testing.T, root string) string {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "storh")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command(gobin, "build", "-o", bin, "./cmd/storh")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/storh: %v\n%s", err, out)
	}
	return bin
}

// importFile runs `storh --db DB -q import --mongo docs FILE` and returns
// the error the command reported, "" on success.
func importFile(t *testing.T, cli, db, file string) string {
	cmd := exec.Command(cli, "--db", db, "-q", "import", "--mongo", "docs", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		// A refused line: the command ran and said why.
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = "exit status 1 without a message"
		}
		return msg
	default:
		t.Fatalf("storh import %s: %v\n%s", file, err, stderr.Bytes())
		return ""
	}
}

// readRecords opens db read-only and returns the records of "docs"; no
// database or no collection is no records.
func readRecords(t *testing.T, path string) []storh.Record {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	db, err := storh.Open(path, storh.WithReadOnly())
	if err != nil {
		t.Fatalf("storh.Open(%s): %v", path, err)
	}
	defer db.Close()
	docs, err := db.Docs("docs")
	if errors.Is(err, storh.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var recs []storh.Record
	for r, err := range docs.Stream(query.All()) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// ---------------------------------------------------------------------------
// Comparing.

// findings counts, per allowed difference or known bug, how often it was
// seen; subtests run in parallel.
type findings struct {
	mu sync.Mutex
	n  map[string]int
}

func newFindings() *findings { return &findings{n: map[string]int{}} }

func (f *findings) add(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n[name]++
}

func (f *findings) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[name]
}

// reportDiffs fails t for every difference that is neither allowed nor a known
// bug, and counts the others.
func reportDiffs(t *testing.T, src string, diffs []difference, seen *findings) {
	t.Helper()
	for _, d := range diffs {
		if name := classify(d); name != "" {
			seen.add(name)
			if testing.Verbose() {
				t.Logf("%s: %s (allowed or known): %s", src, name, d)
			}
			continue
		}
		t.Errorf("%s: the import disagrees with the MongoDB Go driver: %s", src, d)
	}
}

// parseBSON reads line as the driver does; canonical also requires it to
// be canonical Extended JSON.
func parseBSON(line []byte, canonical bool) (bson.D, error) {
	var d bson.D
	err := bson.UnmarshalExtJSON(line, canonical, &d)
	return d, err
}

// checkLine imports one line into a database of its own and compares.
func checkLine(t *testing.T, cli string, c corpusLine, seen *findings) {
	dir := t.TempDir()
	file, db := filepath.Join(dir, "line.jsonl"), filepath.Join(dir, "storh.db")
	if err := os.WriteFile(file, append(slices.Clip(c.line), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	storhErr := importFile(t, cli, db, file)
	recs := readRecords(t, db)
	doc, bsonErr := parseBSON(c.line, false)
	if bytes.HasPrefix(c.line, []byte("\xef\xbb\xbf")) && bsonErr != nil && storhErr == "" {
		// The one allowed line-level difference that still has a value to
		// compare: the document after the byte order mark.
		reportDiffs(t, c.src, []difference{{kind: kindBSONRejects, line: c.line, bsonErr: bsonErr.Error()}}, seen)
		c.line = c.line[3:]
		doc, bsonErr = parseBSON(c.line, false)
	}
	var diffs []difference
	switch {
	case storhErr != "" && len(recs) != 0:
		t.Fatalf("%s: import failed (%s) but stored %d records", c.src, storhErr, len(recs))
	case storhErr != "" && bsonErr != nil:
		// Both refuse the line: agreement.
	case storhErr != "":
		diffs = append(diffs, difference{kind: kindStorhRejects, line: c.line, storhErr: storhErr})
	case len(recs) == 0:
		e := ""
		if bsonErr != nil {
			e = bsonErr.Error()
		}
		diffs = append(diffs, difference{kind: kindSkipped, line: c.line, storhErr: "no record stored, no error", bsonErr: e})
	case len(recs) > 1:
		t.Fatalf("%s: one line stored %d records", c.src, len(recs))
	case bsonErr != nil:
		diffs = append(diffs, difference{kind: kindBSONRejects, line: c.line, bsonErr: bsonErr.Error()})
	default:
		diffs = compareRecord(recs[0], doc, c.line)
	}
	reportDiffs(t, c.src, diffs, seen)
}

// checkFile imports a whole file and compares every line with the record
// its ObjectID _id maps to (or, for other _ids, the record holding that
// _id).
func checkFile(t *testing.T, cli, path string, canonical bool, seen *findings) {
	db := filepath.Join(t.TempDir(), "storh.db")
	if e := importFile(t, cli, db, path); e != "" {
		// Every line of these files is meant to import; which one failed
		// is in the message.
		t.Fatalf("storh import --mongo %s: %s", path, e)
	}
	recs := readRecords(t, db)
	byID := make(map[uuidv7.UUID]storh.Record, len(recs))
	foreign := map[string]storh.Record{}
	for _, r := range recs {
		byID[r.ID] = r
		if id, ok := r.Data()["_id"]; ok {
			foreign[describeValue(id)] = r
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<26)
	n := 0
	for sc.Scan() {
		n++
		line := slices.Clone(sc.Bytes())
		src := fmt.Sprintf("%s:%d", filepath.Base(path), n)
		doc, err := parseBSON(line, false)
		if err != nil {
			t.Fatalf("%s: the driver cannot read a line of a sample file: %v", src, err)
		}
		if canonical {
			cdoc, err := parseBSON(line, true)
			if err != nil {
				t.Fatalf("%s: not canonical Extended JSON: %v", src, err)
			}
			if a, b := fmt.Sprintf("%#v", cdoc), fmt.Sprintf("%#v", doc); a != b {
				t.Fatalf("%s: the driver reads canonical and relaxed differently:\n%s\n%s", src, a, b)
			}
		}
		m := lastWins(doc)
		var rec storh.Record
		var ok bool
		if oid, isOID := m["_id"].(bson.ObjectID); isOID {
			rec, ok = byID[uuidv7.UUID(objectid.ObjectID(oid).UUIDv7())]
		} else {
			want, _ := expectValue(m["_id"])
			rec, ok = foreign[describeValue(want)]
		}
		if !ok {
			t.Errorf("%s: no record for _id %v", src, m["_id"])
			continue
		}
		reportDiffs(t, src, compareRecord(rec, doc, line), seen)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Errorf("%s: %d lines, %d records", path, n, len(recs))
	}
}

// compareRecord compares a stored record with the driver's document,
// including the _id → record id mapping and the kept _oid.
func compareRecord(rec storh.Record, doc bson.D, line []byte) []difference {
	var diffs []difference
	data := rec.Data()
	if data == nil {
		return []difference{{kind: kindValue, line: line, path: "(record)", got: "undecodable record", bsonV: doc}}
	}
	m := lastWins(doc)
	top := doc
	if oid, ok := m["_id"].(bson.ObjectID); ok {
		// An ObjectID _id becomes the record id: the UUIDv7 objectid maps
		// it to (creation second in whole milliseconds, then the 8 bytes
		// after the seconds), and stays as the field _oid.
		want := uuidv7.UUID(objectid.ObjectID(oid).UUIDv7())
		back, err := objectid.FromUUIDv7(rec.ID)
		if rec.ID != want || err != nil || back != objectid.ObjectID(oid) ||
			rec.ID.TimestampMs() != oid.Timestamp().UnixMilli() || !rec.Time().Equal(oid.Timestamp()) {
			diffs = append(diffs, difference{kind: kindRecordID, line: line, path: "(id)", got: rec.ID.String(), bsonV: oid, want: want.String()})
		}
		top = slices.DeleteFunc(slices.Clone(doc), func(e bson.E) bool { return e.Key == "_id" })
		if _, taken := m["_oid"]; !taken {
			top = append(top, bson.E{Key: "_oid", Value: oid})
		}
	}
	compareValue(&diffs, line, "", data, top)
	return diffs
}

// lastWins turns a bson.D into a map; a repeated key keeps its last value.
func lastWins(d bson.D) map[string]any {
	m := make(map[string]any, len(d))
	for _, e := range d {
		m[e.Key] = e.Value
	}
	return m
}

// expectValue maps a value the driver decoded to the storh value the
// documented type mapping gives (docs/bulk-data.md, "Type mapping"). ok is
// false for types with no mapping; their difference kind is in want.
func expectValue(v any) (want any, ok bool) {
	switch b := v.(type) {
	case nil, bson.Undefined, bson.Null:
		return nil, true // $undefined → null
	case bool:
		return b, true
	case string:
		return b, true
	case bson.Symbol: // $symbol → the string
		return string(b), true
	case bson.JavaScript: // $code → the string
		return string(b), true
	case int32: // $numberInt and relaxed integers → int64
		return int64(b), true
	case int64:
		return b, true
	case float64:
		return b, true
	case bson.ObjectID: // → a typed objectid.ObjectID
		return objectid.ObjectID(b), true
	case bson.DateTime: // → time.Time in UTC
		return b.Time().UTC(), true
	case bson.Binary: // → []byte; subtype 4 of 16 bytes → a typed UUID
		if b.Subtype == bson.TypeBinaryUUID && len(b.Data) == 16 {
			return uuidv7.UUID(b.Data), true
		}
		return slices.Clone(b.Data), true
	case bson.Decimal128: // → the decimal string (every digit kept)
		return wantDecimal{b}, true
	case bson.Timestamp: // → {"t": seconds, "i": increment}
		return map[string]any{"t": int64(b.T), "i": int64(b.I)}, true
	case bson.Regex: // → "/pattern/options"
		return "/" + b.Pattern + "/" + b.Options, true
	case bson.D:
		m := make(map[string]any, len(b))
		for _, e := range b {
			w, ok := expectValue(e.Value)
			if !ok {
				return w, false
			}
			m[e.Key] = w
		}
		return m, true
	case bson.A:
		a := make([]any, len(b))
		for i, e := range b {
			w, ok := expectValue(e)
			if !ok {
				return w, false
			}
			a[i] = w
		}
		return a, true
	case bson.MinKey, bson.MaxKey, bson.DBPointer:
		return kindNoEquivalent, false
	}
	return kindUnmapped, false
}

// wantDecimal stands for a Decimal128 in expected values: the stored string
// must parse to the same Decimal128 (the import keeps the literal, so
// "19.990" stays "19.990", and parsing keeps the trailing zero too).
type wantDecimal struct{ d bson.Decimal128 }

// compareValue appends to diffs every place where got (stored) differs from
// b (the driver's value) after the type mapping.
func compareValue(diffs *[]difference, line []byte, path string, got, b any) {
	add := func(kind string, want any) {
		*diffs = append(*diffs, difference{kind: kind, line: line, path: pathOr(path), got: got, bsonV: b, want: want})
	}
	switch bv := b.(type) {
	case bson.D:
		gm, ok := got.(map[string]any)
		if !ok {
			w, _ := expectValue(b)
			add(kindValue, w)
			return
		}
		m := lastWins(bv)
		if len(m) != len(bv) {
			for i, e := range bv {
				if slices.IndexFunc(bv[:i], func(p bson.E) bool { return p.Key == e.Key }) >= 0 {
					*diffs = append(*diffs, difference{kind: kindDuplicateKey, line: line, path: joinPath(path, e.Key), got: gm[e.Key], bsonV: b})
				}
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		for k := range gm {
			if _, ok := m[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			gv, gok := gm[k]
			bv, bok := m[k]
			switch {
			case !gok:
				w, _ := expectValue(bv)
				*diffs = append(*diffs, difference{kind: kindValue, line: line, path: joinPath(path, k), got: absent{}, bsonV: bv, want: w})
			case !bok:
				*diffs = append(*diffs, difference{kind: kindValue, line: line, path: joinPath(path, k), got: gv, bsonV: absent{}, want: absent{}})
			default:
				compareValue(diffs, line, joinPath(path, k), gv, bv)
			}
		}
	case bson.A:
		ga, ok := got.([]any)
		if !ok || len(ga) != len(bv) {
			w, _ := expectValue(b)
			add(kindValue, w)
			return
		}
		for i := range bv {
			compareValue(diffs, line, fmt.Sprintf("%s[%d]", path, i), ga[i], bv[i])
		}
	default:
		want, ok := expectValue(b)
		if !ok {
			add(want.(string), nil)
			return
		}
		if !sameValue(got, want) {
			add(kindValue, want)
		}
	}
}

type absent struct{}

func pathOr(p string) string {
	if p == "" {
		return "(document)"
	}
	return p
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// sameValue compares a stored value with an expected one: same Go type and
// value, NaN equal to NaN, -0 different from 0, times equal and in UTC.
func sameValue(got, want any) bool {
	switch w := want.(type) {
	case nil:
		return got == nil
	case float64:
		g, ok := got.(float64)
		if !ok {
			return false
		}
		if math.IsNaN(w) {
			return math.IsNaN(g)
		}
		return g == w && math.Signbit(g) == math.Signbit(w)
	case time.Time:
		g, ok := got.(time.Time)
		return ok && g.Equal(w) && g.Location() == time.UTC
	case []byte:
		g, ok := got.([]byte)
		return ok && bytes.Equal(g, w)
	case wantDecimal:
		g, ok := got.(string)
		if !ok {
			return false
		}
		d, err := bson.ParseDecimal128(g)
		if err != nil {
			return false
		}
		gh, gl := d.GetBytes()
		wh, wl := w.d.GetBytes()
		return gh == wh && gl == wl
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !sameValue(gv, wv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameValue(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return got == want
}

// describeValue prints a value with its Go type, short enough for a
// failure message.
func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case absent:
		return "(absent)"
	case time.Time:
		return fmt.Sprintf("time.Time(%s)", x.Format(time.RFC3339Nano))
	case bson.DateTime:
		return fmt.Sprintf("bson.DateTime(%s)", x.Time().UTC().Format(time.RFC3339Nano))
	case wantDecimal:
		return fmt.Sprintf("bson.Decimal128(%s)", x.d)
	case bson.Decimal128:
		return fmt.Sprintf("bson.Decimal128(%s)", x)
	case string:
		return clipForMessage([]byte(strconv.Quote(x)))
	}
	return clipForMessage([]byte(fmt.Sprintf("%T(%#v)", v, v)))
}

func clipForMessage(b []byte) string {
	const limit = 400
	if len(b) > limit {
		return string(b[:limit]) + "…"
	}
	return string(b)
}

// replaceInvalidUTF8 replaces each invalid byte with U+FFFD, as
// encoding/json does (strings.ToValidUTF8 would merge runs).
func replaceInvalidUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// hasTrailingContent reports a line with something after its first JSON
// value.
func hasTrailingContent(line []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(line))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return false
	}
	return len(bytes.TrimSpace(line[dec.InputOffset():])) > 0
}

// wrapperKeys are the keys of Extended JSON wrappers, and their allowed
// partner key in the two-key forms.
var wrapperKeys = map[string]string{
	"$oid": "", "$date": "", "$numberLong": "", "$numberInt": "", "$numberDouble": "",
	"$numberDecimal": "", "$binary": "$type", "$type": "$binary", "$timestamp": "",
	"$regularExpression": "", "$symbol": "", "$code": "$scope", "$scope": "$code",
	"$undefined": "", "$minKey": "", "$maxKey": "", "$dbPointer": "", "$uuid": "",
	"$regex": "$options", "$options": "$regex",
}

// hasWrapperWithExtraKeys reports a line holding an object with a wrapper
// key and a key that does not belong to that wrapper.
func hasWrapperWithExtraKeys(line []byte) bool {
	var v any
	if json.Unmarshal(line, &v) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			if len(x) > 1 {
				for k := range x {
					partner, ok := wrapperKeys[k]
					if ok && (len(x) > 2 || partner == "" || x[partner] == nil) {
						return true
					}
				}
			}
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// containsType reports whether the driver's document for line holds a
// value for which is reports true.
func containsType(line []byte, is func(any) bool) bool {
	doc, err := parseBSON(line, false)
	if err != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		if is(v) {
			return true
		}
		switch x := v.(type) {
		case bson.D:
			for _, e := range x {
				if walk(e.Value) {
					return true
				}
			}
		case bson.A:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(doc)
}
