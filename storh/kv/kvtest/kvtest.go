// Package kvtest checks that a backend keeps package kv's contract, the
// way testing/fstest checks a file system: a backend's test calls Run with
// a function that opens a fresh, empty store, and every rule of the
// contract the engine relies on is checked against it.
//
//	func TestKVContract(t *testing.T) {
//		kvtest.Run(t, func(t *testing.T) kv.Store {
//			s := openEmptyStore(t)
//			t.Cleanup(func() { removeStore(s) })
//			return s
//		})
//	}
//
// The suite uses only the kv interfaces, so it runs unchanged on every
// backend. It holds at most one writable transaction at a time, so a store
// that allows a single writer (bbolt) never waits on the suite itself; where
// it opens a read-only transaction beside a writable one, it does so from
// another goroutine and accepts a store that makes one wait for the other.
// Where the contract leaves a choice open (which of two errors, what a
// cursor does after running off an end), the suite accepts either.
//
// Reads over pages emptied in their own transaction run under a watchdog:
// if one does not return within a few seconds, the subtest fails and the
// store is left open (its transaction is still running), so a cleanup that
// open registers must not wait forever for that store to close.
//
// The larger subtests use fewer keys and the model-based one shorter runs,
// except in storh's long run (STORH_LONG=1 without -short). rapid's flags (-rapid.checks, -rapid.seed,
// -rapid.nofailfile) apply to the model-based subtest; on failure rapid
// saves the failing case under testdata/rapid of the calling package unless
// told not to.
package kvtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/kv"
)

// Run runs the conformance suite as subtests of t. open must return a
// fresh, empty store each time it is called; it is called once per
// subtest, with that subtest's t, and should register with t.Cleanup
// whatever removes the store's resources. The suite closes every store it
// opens once the subtest is done with it (and checks that Close succeeds),
// so a cleanup that closes the store again must tolerate a closed store.
func Run(t *testing.T, open func(t *testing.T) kv.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s kv.Store)
	}{
		{"Values", testValues},
		{"KeyReuse", testKeyReuse},
		{"EmptyKey", testEmptyKey},
		{"Buckets", testBuckets},
		{"BucketErrors", testBucketErrors},
		{"DeleteBucket", testDeleteBucket},
		{"Cursor", testCursor},
		{"Order", testOrder},
		{"OwnWrites", testOwnWrites},
		{"CursorDelete", testCursorDelete},
		{"EmptiedPages", testEmptiedPages},
		{"Rollback", testRollback},
		{"Commit", testCommit},
		{"ReadOnly", testReadOnly},
		{"Snapshot", testSnapshot},
		{"ReadDuringWrite", testReadDuringWrite},
		{"ClosedStore", testClosedStore},
		{"ManyKeys", testManyKeys},
		{"LargeValues", testLargeValues},
		{"Insert", testInsert},
		{"SequenceRun", testSequenceRun},
		{"Identity", testIdentity},
		{"Range", testRange},
		{"Lasting", testLasting},
		{"Exclusive", testExclusive},
		{"Pipeline", testPipeline},
		{"Model", testModel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, openStore(t, open))
		})
	}
}

// ---------------------------------------------------------------------------
// Helpers

// tb is what the checks need of *testing.T and *rapid.T alike.
type tb interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
}

// closingStore closes the store at the end of the subtest unless the
// subtest closed it itself.
type closingStore struct {
	kv.Store
	mu     sync.Mutex
	closed bool
	// abandoned: a transaction hangs, so Close would wait forever.
	abandoned bool
}

func (s *closingStore) abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abandoned = true
}

func (s *closingStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.Store.Close()
}

func openStore(t *testing.T, open func(t *testing.T) kv.Store) kv.Store {
	t.Helper()
	s := open(t)
	if s == nil {
		t.Fatalf("open returned a nil store")
	}
	cs := &closingStore{Store: s}
	t.Cleanup(func() {
		cs.mu.Lock()
		closed, abandoned := cs.closed, cs.abandoned
		cs.mu.Unlock()
		if abandoned {
			t.Logf("the store is left open: one of its transactions hangs")
			return
		}
		if !closed {
			if err := cs.Close(); err != nil {
				t.Errorf("Store.Close at the end of the subtest: %v", err)
			}
		}
	})
	return cs
}

// begin starts a transaction and checks that it reports the writability
// asked for.
func begin(t tb, s kv.Store, writable bool) kv.Tx {
	t.Helper()
	tx, err := s.Begin(writable)
	if err != nil {
		t.Fatalf("Begin(%v): %v", writable, err)
	}
	if tx == nil {
		t.Fatalf("Begin(%v) returned a nil transaction and no error", writable)
	}
	if tx.Writable() != writable {
		t.Fatalf("Begin(%v): Tx.Writable() = %v", writable, tx.Writable())
	}
	return tx
}

// checkTxErr checks that no read of tx failed; call it before the
// transaction ends.
func checkTxErr(t tb, where string, tx kv.Tx) {
	t.Helper()
	if err := tx.Err(); err != nil {
		t.Fatalf("%s: Tx.Err() = %v, want nil", where, err)
	}
}

// update runs fn in a writable transaction and commits it. If fn stops the
// test, the transaction is rolled back.
func update(t tb, s kv.Store, fn func(tx kv.Tx)) {
	t.Helper()
	inTx(t, s, true, fn)
}

// view runs fn in a read-only transaction and rolls it back.
func view(t tb, s kv.Store, fn func(tx kv.Tx)) {
	t.Helper()
	inTx(t, s, false, fn)
}

// inTx runs fn in a transaction, checks Err, and ends it: a writable one
// by Commit, a read-only one by Rollback, either by Rollback if fn stops
// the test.
func inTx(t tb, s kv.Store, writable bool, fn func(tx kv.Tx)) {
	t.Helper()
	tx := begin(t, s, writable)
	ended := false
	defer func() {
		if !ended {
			_ = tx.Rollback()
		}
	}()
	fn(tx)
	if writable {
		checkTxErr(t, "writable transaction", tx)
		ended = true
		if err := tx.Commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		return
	}
	checkTxErr(t, "read-only transaction", tx)
	ended = true
	if err := tx.Rollback(); err != nil {
		t.Fatalf("Rollback of a read-only transaction: %v", err)
	}
}

// wantErr checks that err matches one of targets with errors.Is, or is nil
// if there are none.
func wantErr(t tb, what string, err error, targets ...error) bool {
	t.Helper()
	if len(targets) == 0 {
		if err != nil {
			t.Errorf("%s: unexpected error %v", what, err)
			return false
		}
		return true
	}
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	var names []string
	for _, target := range targets {
		names = append(names, fmt.Sprintf("%q", target))
	}
	t.Errorf("%s: got error %v, want one that errors.Is %s", what, err, strings.Join(names, " or "))
	return false
}

// must fails the test now if err is not nil.
func must(t tb, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func mustBucket(t tb, what string, b kv.Bucket, err error) kv.Bucket {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if b == nil {
		t.Fatalf("%s: returned a nil bucket and no error", what)
	}
	return b
}

// fmtKey formats a key for messages, telling nil from empty.
func fmtKey(k []byte) string {
	if k == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", k)
}

// fmtVal formats a value for messages, telling nil from empty and
// shortening long ones.
func fmtVal(v []byte) string {
	switch {
	case v == nil:
		return "nil"
	case len(v) > 24:
		return fmt.Sprintf("%d bytes %q…", len(v), v[:16])
	}
	return fmt.Sprintf("%q", v)
}

// sameValue reports whether got is want, telling nil from empty.
func sameValue(got, want []byte) bool {
	if (got == nil) != (want == nil) {
		return false
	}
	return bytes.Equal(got, want)
}

// checkGet checks b.Get(key); want nil means a missing key or a bucket.
func checkGet(t tb, where string, b kv.Bucket, key, want []byte) {
	t.Helper()
	got := b.Get(key)
	if !sameValue(got, want) {
		t.Errorf("%s: Get(%s) = %s, want %s", where, fmtKey(key), fmtVal(got), fmtVal(want))
	}
}

func fmtPath(path []string) string {
	if len(path) == 0 {
		return "<top level>"
	}
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = fmt.Sprintf("%q", p)
	}
	return strings.Join(parts, "/")
}

// ---------------------------------------------------------------------------
// The reference: a tree of buckets in memory.

// node models a bucket: each key holds a value ([]byte, never nil) or a
// nested bucket (node).
type node map[string]any

func (n node) clone() node {
	c := make(node, len(n))
	for k, e := range n {
		switch e := e.(type) {
		case node:
			c[k] = e.clone()
		case []byte:
			c[k] = bytes.Clone(e)
		}
	}
	return c
}

// pair is one key a cursor should land on; a nil value marks a bucket.
type pair struct{ k, v []byte }

func (p pair) String() string {
	if p.k == nil {
		return "the end (nil key)"
	}
	if p.v == nil {
		return fmt.Sprintf("key %s with a nil value (bucket)", fmtKey(p.k))
	}
	return fmt.Sprintf("key %s = %s", fmtKey(p.k), fmtVal(p.v))
}

// entries lists n in key order, as a cursor should show it.
func (n node) entries() []pair {
	keys := slices.Sorted(maps.Keys(n)) // Go orders strings bytewise
	out := make([]pair, len(keys))
	for i, k := range keys {
		out[i].k = []byte(k)
		if v, ok := n[k].([]byte); ok {
			out[i].v = v
		}
	}
	return out
}

// samePair reports whether a cursor's (k, v) is want, telling nil from
// empty values.
func samePair(k, v []byte, want pair) bool {
	if want.k == nil {
		return k == nil
	}
	return k != nil && bytes.Equal(k, want.k) && sameValue(v, want.v)
}

func gotPair(k, v []byte) pair {
	if k == nil {
		return pair{}
	}
	return pair{k, v}
}

// seekIndex returns the index of the first entry at or after key.
func seekIndex(es []pair, key []byte) int {
	i, _ := slices.BinarySearchFunc(es, key, func(p pair, k []byte) int { return bytes.Compare(p.k, k) })
	return i
}

// checkWalk walks c from one end to the other and checks that it lands on
// want (in key order) in turn, then on a nil key.
func checkWalk(t tb, where string, c kv.Cursor, want []pair, reverse bool) bool {
	t.Helper()
	dir, first, next := "forward", "First", "Next"
	if reverse {
		dir, first, next = "reverse", "Last", "Prev"
	}
	var k, v []byte
	if reverse {
		k, v = c.Last()
	} else {
		k, v = c.First()
	}
	move := first
	for i := 0; i <= len(want); i++ {
		var w pair
		if i < len(want) {
			if reverse {
				w = want[len(want)-1-i]
			} else {
				w = want[i]
			}
		}
		if !samePair(k, v, w) {
			t.Errorf("%s: %s walk, step %d (%s): want %v, got %v", where, dir, i, move, w, gotPair(k, v))
			return false
		}
		if w.k == nil && v != nil {
			t.Errorf("%s: %s walk: past the end the value is %s, want nil", where, dir, fmtVal(v))
			return false
		}
		if i < len(want) {
			if reverse {
				k, v = c.Prev()
			} else {
				k, v = c.Next()
			}
			move = next
		}
	}
	return true
}

// bucketParent is what a Tx and a Bucket share: nested buckets.
type bucketParent interface {
	Bucket(name []byte) kv.Bucket
	CreateBucket(name []byte) (kv.Bucket, error)
	CreateBucketIfNotExists(name []byte) (kv.Bucket, error)
	DeleteBucket(name []byte) error
	Cursor() kv.Cursor
}

// checkTree checks everything tx shows against want: the top-level names,
// and every bucket beneath (see checkBucket).
func checkTree(t tb, where string, tx kv.Tx, want node) bool {
	t.Helper()
	return checkLevel(t, where, nil, tx, nil, want)
}

// checkBucket checks b against want: walks both ways, Get of every key,
// Bucket of every key, recursively.
func checkBucket(t tb, where string, path []string, b kv.Bucket, want node) bool {
	t.Helper()
	return checkLevel(t, where, path, b, b, want)
}

func checkLevel(t tb, where string, path []string, p bucketParent, b kv.Bucket, want node) bool {
	t.Helper()
	at := where + ": bucket " + fmtPath(path)
	es := want.entries()
	if !checkWalk(t, at, p.Cursor(), es, false) || !checkWalk(t, at, p.Cursor(), es, true) {
		return false
	}
	ok := true
	for _, e := range es {
		sub := p.Bucket(e.k)
		if e.v != nil {
			if sub != nil {
				t.Errorf("%s: Bucket(%s) on a key holding a value returned a bucket, want nil", at, fmtKey(e.k))
				ok = false
			}
			if got := b.Get(e.k); !sameValue(got, e.v) {
				t.Errorf("%s: Get(%s) = %s, want %s", at, fmtKey(e.k), fmtVal(got), fmtVal(e.v))
				ok = false
			}
			continue
		}
		if b != nil {
			if got := b.Get(e.k); got != nil {
				t.Errorf("%s: Get(%s) on a nested bucket's key = %s, want nil", at, fmtKey(e.k), fmtVal(got))
				ok = false
			}
		}
		if sub == nil {
			t.Errorf("%s: Bucket(%s) = nil, want the nested bucket", at, fmtKey(e.k))
			ok = false
			continue
		}
		if !checkBucket(t, where, append(slices.Clip(path), string(e.k)), sub, want[string(e.k)].(node)) {
			ok = false
		}
	}
	return ok
}

// readTree reads everything tx shows into a node, for checks made from
// another goroutine. A key with a nil value whose Bucket is nil is recorded
// as a nil []byte, which no check expects.
func readTree(tx kv.Tx) node {
	return readLevel(tx, nil)
}

func readLevel(p bucketParent, b kv.Bucket) node {
	n := node{}
	c := p.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil {
			n[string(k)] = bytes.Clone(v)
			continue
		}
		if sub := p.Bucket(k); sub != nil {
			n[string(k)] = readLevel(sub, sub)
		} else {
			n[string(k)] = []byte(nil)
		}
	}
	return n
}

// diffTree describes the first difference between want and got, or
// returns "".
func diffTree(path []string, want, got node) string {
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		if !ok {
			return fmt.Sprintf("bucket %s: key %q missing, want %s", fmtPath(path), k, describe(want[k]))
		}
		switch w := want[k].(type) {
		case []byte:
			gv, isVal := g.([]byte)
			if !isVal || !sameValue(gv, w) {
				return fmt.Sprintf("bucket %s: key %q is %s, want %s", fmtPath(path), k, describe(g), describe(w))
			}
		case node:
			gn, isNode := g.(node)
			if !isNode {
				return fmt.Sprintf("bucket %s: key %q is %s, want a bucket", fmtPath(path), k, describe(g))
			}
			if d := diffTree(append(slices.Clip(path), k), w, gn); d != "" {
				return d
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("bucket %s: unexpected key %q holding %s", fmtPath(path), k, describe(got[k]))
		}
	}
	return ""
}

func describe(e any) string {
	switch e := e.(type) {
	case node:
		return fmt.Sprintf("a bucket of %d keys", len(e))
	case []byte:
		return "value " + fmtVal(e)
	}
	return "nothing"
}

// build creates want's buckets and values under p, which must not hold
// them yet; b is p as a Bucket, or nil at the top level (which holds only
// buckets).
func build(t tb, p bucketParent, b kv.Bucket, want node) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		switch e := want[k].(type) {
		case node:
			sub, err := p.CreateBucket([]byte(k))
			mustBucket(t, fmt.Sprintf("CreateBucket(%q)", k), sub, err)
			build(t, sub, sub, e)
		case []byte:
			if b == nil {
				t.Fatalf("kvtest: build: value %q at the top level", k)
			}
			must(t, fmt.Sprintf("Put(%q)", k), b.Put([]byte(k), bytes.Clone(e)))
		}
	}
}

// setup commits want into s in one transaction.
func setup(t tb, s kv.Store, want node) {
	t.Helper()
	update(t, s, func(tx kv.Tx) { build(t, tx, nil, want) })
}

// expect checks in a new read-only transaction that s holds want.
func expect(t tb, where string, s kv.Store, want node) {
	t.Helper()
	view(t, s, func(tx kv.Tx) { checkTree(t, where, tx, want) })
}

// bucketAt returns the bucket at path, failing the test if it is missing.
func bucketAt(t tb, tx kv.Tx, path ...string) kv.Bucket {
	t.Helper()
	var b kv.Bucket
	for i, name := range path {
		if i == 0 {
			b = tx.Bucket([]byte(name))
		} else {
			b = b.Bucket([]byte(name))
		}
		if b == nil {
			t.Fatalf("Bucket %s: nil, want a bucket", fmtPath(path[:i+1]))
		}
	}
	return b
}

// at checks that a cursor move landed on want.
func at(t tb, where, move string, k, v []byte, want pair) {
	t.Helper()
	if !samePair(k, v, want) {
		t.Errorf("%s: %s: want %v, got %v", where, move, want, gotPair(k, v))
	}
	if want.k == nil && v != nil {
		t.Errorf("%s: %s: past the end the value is %s, want nil", where, move, fmtVal(v))
	}
}

func p(k, v string) pair { return pair{[]byte(k), []byte(v)} }
func bkt(k string) pair  { return pair{[]byte(k), nil} }

var end = pair{}

// ---------------------------------------------------------------------------
// Values

// testKeyReuse: Put and Delete copy the key, so a caller may reuse one
// buffer for every key of a transaction (the engine does).
// testIdentity checks kv.Identifier, where the backend has it: every
// bucket has its own identity, the same in every transaction, and one
// deleted and created again under its name has a new one.
func testIdentity(t *testing.T, s kv.Store) {
	idOf := func(b kv.Bucket) uint64 {
		t.Helper()
		ider, ok := b.(kv.Identifier)
		if !ok {
			t.Skip("the store's buckets are not kv.Identifiers")
		}
		return ider.ID()
	}
	seen := map[uint64]string{}
	note := func(what string, id uint64) {
		t.Helper()
		if prev, ok := seen[id]; ok {
			t.Fatalf("%s has the identity %d of %s", what, id, prev)
		}
		seen[id] = what
	}
	var a, nested uint64
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucket([]byte("a"))
		mustBucket(t, `CreateBucket("a")`, b, err)
		n, err := b.CreateBucket([]byte("n"))
		mustBucket(t, `CreateBucket("a/n")`, n, err)
		a, nested = idOf(b), idOf(n)
		note("a", a)
		note("a/n", nested)
	})
	view(t, s, func(tx kv.Tx) {
		if got := idOf(tx.Bucket([]byte("a"))); got != a {
			t.Errorf("a's identity is %d in another transaction, was %d", got, a)
		}
		if got := idOf(tx.Bucket([]byte("a")).Bucket([]byte("n"))); got != nested {
			t.Errorf("a/n's identity is %d in another transaction, was %d", got, nested)
		}
	})
	update(t, s, func(tx kv.Tx) {
		must(t, "DeleteBucket", tx.DeleteBucket([]byte("a")))
		b, err := tx.CreateBucket([]byte("a"))
		mustBucket(t, `CreateBucket("a") again`, b, err)
		note("a created again", idOf(b))
	})
}

// testRange checks a kv.Ranger, where the backend's cursors have it:
// random moves of a cursor confined to a random range, with pages of
// random size, see exactly the keys of the bucket within the range, in
// order, nested buckets among them; past either bound a walk ends.
func testRange(t *testing.T, s kv.Store) {
	var all []pair
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucket([]byte("r"))
		mustBucket(t, "CreateBucket", b, err)
		for i := range 40 {
			k := []byte(fmt.Sprintf("k%02d", i))
			if i%9 == 4 {
				_, err := b.CreateBucket(k)
				must(t, "nested CreateBucket", err)
				all = append(all, pair{k, nil})
				continue
			}
			v := []byte(fmt.Sprintf("v%02d", i))
			must(t, "Put", b.Put(k, v))
			all = append(all, pair{k, v})
		}
	})
	tx := begin(t, s, false)
	defer tx.Rollback()
	if _, ok := tx.Bucket([]byte("r")).Cursor().(kv.Ranger); !ok {
		t.Skip("the store's cursors are not kv.Rangers")
	}
	bound := rapid.OneOf(rapid.Just(""), rapid.StringMatching(`k[0-4][0-9]?x?`))
	rapid.Check(t, func(rt *rapid.T) {
		c := tx.Bucket([]byte("r")).Cursor()
		lo, hi := bound.Draw(rt, "lo"), bound.Draw(rt, "hi")
		var loB, hiB []byte // "" is no bound
		if lo != "" {
			loB = []byte(lo)
		}
		if hi != "" {
			hiB = []byte(hi)
		}
		var in []pair
		for _, e := range all {
			if (loB == nil || bytes.Compare(e.k, loB) >= 0) && (hiB == nil || bytes.Compare(e.k, hiB) <= 0) {
				in = append(in, e)
			}
		}
		if ra, ok := c.(kv.ReadAhead); ok {
			ra.ReadAhead(rapid.IntRange(1, 8).Draw(rt, "page"))
		}
		c.(kv.Ranger).Range(loB, hiB)
		i := -1 // the model's position in; -1 before a jump or past an end
		for range rapid.IntRange(1, 30).Draw(rt, "moves") {
			var k, v []byte
			move := "First"
			if i < 0 {
				move = rapid.SampledFrom([]string{"First", "Last", "Seek"}).Draw(rt, "jump")
			} else {
				move = rapid.SampledFrom([]string{"First", "Last", "Seek", "Next", "Next", "Prev", "Prev"}).Draw(rt, "move")
			}
			switch move {
			case "First":
				k, v = c.First()
				i = 0
			case "Last":
				k, v = c.Last()
				i = len(in) - 1
			case "Seek":
				seek := rapid.StringMatching(`k[0-4][0-9]?x?`).Draw(rt, "seek")
				k, v = c.Seek([]byte(seek))
				i = seekIndex(in, []byte(seek))
			case "Next":
				k, v = c.Next()
				i++
			case "Prev":
				k, v = c.Prev()
				i--
			}
			want := end
			if i >= 0 && i < len(in) {
				want = in[i]
			} else {
				i = -1
			}
			at(rt, fmt.Sprintf("range [%q, %q]", lo, hi), move, k, v, want)
		}
		checkTxErr(rt, "range walk", tx)
	})
}

// testExclusive checks kv.Exclusive, where the backend has it: a lock
// another holder has is refused at once (a second call on the same store is
// another holder), locks of other names are not, a released lock is free
// again, writes go on while one is held, and a closed store refuses.
func testExclusive(t *testing.T, s kv.Store) {
	inner := s
	if cs, ok := s.(*closingStore); ok {
		inner = cs.Store
	}
	x, ok := inner.(kv.Exclusive)
	if !ok {
		t.Skip("the store is not kv.Exclusive")
	}
	try := func(name string, want bool) func() {
		t.Helper()
		release, ok, err := x.TryExclusive(name)
		if err != nil {
			t.Fatalf("TryExclusive(%q): %v", name, err)
		}
		if ok && release == nil {
			t.Fatalf("TryExclusive(%q) granted with a nil release", name)
		}
		var once sync.Once
		if ok {
			// Released at the end if the test fails first: a store may
			// wait for a held lock's connection when it closes.
			t.Cleanup(func() { once.Do(release) })
		}
		if ok != want {
			t.Fatalf("TryExclusive(%q) = %v, want %v", name, ok, want)
		}
		return func() { once.Do(release) }
	}
	releaseA := try("sweep/a", true)
	try("sweep/a", false)
	releaseB := try("sweep/b", true)
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucket([]byte("x"))
		mustBucket(t, "CreateBucket", b, err)
		must(t, "Put", b.Put([]byte("k"), []byte("v")))
	})
	releaseA()
	releaseA2 := try("sweep/a", true)
	try("sweep/b", false)
	releaseA2()
	releaseB()
	try("sweep/b", true)() // and released at once
	must(t, "Close", s.Close())
	if _, ok, err := x.TryExclusive("sweep/a"); err == nil || ok {
		t.Fatalf("TryExclusive on a closed store = %v, %v; want an error", ok, err)
	}
}

// testLasting checks a kv.Lasting cursor, where the backend has one: keys
// and values it returned keep their bytes after the transaction ends,
// and after later transactions of the store.
func testLasting(t *testing.T, s kv.Store) {
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucket([]byte("l"))
		mustBucket(t, "CreateBucket", b, err)
		for i := range 300 {
			must(t, "Put", b.Put([]byte(fmt.Sprintf("k%03d", i)), bytes.Repeat([]byte{byte(i)}, 100+i)))
		}
	})
	var kept []pair
	view(t, s, func(tx kv.Tx) {
		c := tx.Bucket([]byte("l")).Cursor()
		if _, ok := c.(kv.Lasting); !ok {
			t.Skip("the store's cursors are not kv.Lasting")
		}
		for k, v := c.First(); k != nil; k, v = c.Next() {
			kept = append(kept, pair{k, v})
		}
	})
	view(t, s, func(tx kv.Tx) {
		c := tx.Bucket([]byte("l")).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
		}
	})
	update(t, s, func(tx kv.Tx) {
		must(t, "DeleteBucket", tx.DeleteBucket([]byte("l")))
	})
	if len(kept) != 300 {
		t.Fatalf("walked %d keys, want 300", len(kept))
	}
	for i, e := range kept {
		if string(e.k) != fmt.Sprintf("k%03d", i) || !bytes.Equal(e.v, bytes.Repeat([]byte{byte(i)}, 100+i)) {
			t.Fatalf("key %d after its transaction: %s = %s", i, fmtKey(e.k), fmtVal(e.v))
		}
	}
}

// testPipeline checks kv.Pipeline, through the store's kv.Pipeliner where
// it has one: random reads of two buckets, ranges following their values
// into either, after random writes of the transaction, answer what the
// buckets hold, in the transaction's view, whether made alone or several
// at once. Nothing else holds a row, so the locking reads answer as plain
// ones.
func testPipeline(t *testing.T, s kv.Store) {
	names := []string{"p", "q"}
	keyGen := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "n", "x"})
	bound := rapid.OneOf(rapid.Just(""), keyGen)
	setup(t, s, node{
		"p": node{"a": []byte("pa"), "b": []byte("pb"), "d": []byte{}, "n": node{"in": []byte("x")}},
		"q": node{"b": []byte("qb"), "c": []byte("qc"), "e": []byte("qe")},
	})
	rapid.Check(t, func(rt *rapid.T) {
		model := map[string]map[string][]byte{ // nil: a nested bucket
			"p": {"a": []byte("pa"), "b": []byte("pb"), "d": []byte{}, "n": nil},
			"q": {"b": []byte("qb"), "c": []byte("qc"), "e": []byte("qe")},
		}
		tx := begin(rt, s, true)
		defer func() { _ = tx.Rollback() }() // nothing is committed: each check starts from setup
		buckets := map[string]kv.Bucket{"p": bucketAt(rt, tx, "p"), "q": bucketAt(rt, tx, "q")}
		for range rapid.IntRange(0, 6).Draw(rt, "writes") {
			name, k := rapid.SampledFrom(names).Draw(rt, "bucket"), keyGen.Draw(rt, "key")
			if v, ok := model[name][k]; ok && v == nil {
				continue // a nested bucket's key takes no value
			}
			if rapid.Bool().Draw(rt, "delete") {
				must(rt, "Delete", buckets[name].Delete([]byte(k)))
				delete(model[name], k)
				continue
			}
			// A value that is a key leads somewhere when a range follows it.
			v := []byte(rapid.OneOf(keyGen, rapid.StringMatching(`[a-z]{0,3}`)).Draw(rt, "value"))
			must(rt, "Put", buckets[name].Put([]byte(k), v))
			model[name][k] = v
		}
		reads := make([]*kv.Read, rapid.IntRange(1, 4).Draw(rt, "reads"))
		var where []string
		for i := range reads {
			name := rapid.SampledFrom(names).Draw(rt, "bucket")
			r := &kv.Read{Bucket: buckets[name], Op: rapid.SampledFrom([]kv.ReadOp{kv.Get, kv.LockKeys, kv.TryKeys, kv.LockRange, kv.After}).Draw(rt, "op")}
			if r.Op == kv.LockRange {
				if from := bound.Draw(rt, "from"); from != "" {
					r.From = []byte(from)
				}
				if to := bound.Draw(rt, "to"); to != "" {
					r.To = []byte(to)
				}
				r.N = rapid.IntRange(0, 5).Draw(rt, "n")
				for range rapid.IntRange(0, 2).Draw(rt, "follows") {
					r.Follow = append(r.Follow, kv.Follow{Bucket: buckets[rapid.SampledFrom(names).Draw(rt, "follow")], Lock: rapid.Bool().Draw(rt, "lock")})
				}
			} else {
				for _, k := range rapid.SliceOfN(keyGen, 0, 4).Draw(rt, "keys") {
					r.Keys = append(r.Keys, []byte(k))
					if r.Op == kv.After {
						r.Ends = append(r.Ends, []byte(bound.Draw(rt, "end")+"~"))
					}
				}
			}
			reads[i] = r
			what := fmt.Sprintf("keys %q", r.Keys)
			if r.Op == kv.After {
				what += fmt.Sprintf(", ends %q", r.Ends)
			}
			if r.Op == kv.LockRange {
				what = fmt.Sprintf("from %q to %q, n %d, %d follows", r.From, r.To, r.N, len(r.Follow))
			}
			where = append(where, fmt.Sprintf("read %d (op %d) of %s, %s", i, r.Op, name, what))
		}
		if rapid.Bool().Draw(rt, "alone") {
			for _, r := range reads {
				kv.Pipeline(tx, r)
			}
		} else {
			kv.Pipeline(tx, reads...)
		}
		checkTxErr(rt, "Pipeline", tx)
		for i, r := range reads {
			m := model[names[0]]
			if r.Bucket == buckets[names[1]] {
				m = model[names[1]]
			}
			if r.Op == kv.After {
				if len(r.Values) != len(r.Keys) || len(r.Found) != len(r.Keys) {
					rt.Fatalf("%s: %d values and %d keys found, want %d", where[i], len(r.Values), len(r.Found), len(r.Keys))
				}
				for j, k := range r.Keys {
					want := pair{}
					for _, mk := range slices.Sorted(maps.Keys(m)) {
						if mk > string(k) && mk < string(r.Ends[j]) {
							want = pair{[]byte(mk), m[mk]}
							break
						}
					}
					if want.k == nil && r.Found[j] != nil || want.k != nil && !samePair(r.Found[j], r.Values[j], want) {
						rt.Errorf("%s: after %s finds %s, want %s", where[i], fmtKey(k), gotPair(r.Found[j], r.Values[j]), want)
					}
				}
				continue
			}
			if r.Op != kv.LockRange {
				if len(r.Values) != len(r.Keys) || r.Found != nil {
					rt.Fatalf("%s: %d values and %d keys found, want %d values", where[i], len(r.Values), len(r.Found), len(r.Keys))
				}
				for j, k := range r.Keys {
					if want := m[string(k)]; !sameValue(r.Values[j], want) {
						rt.Errorf("%s: key %s reads %s, want %s", where[i], fmtKey(k), fmtVal(r.Values[j]), fmtVal(want))
					}
				}
				continue
			}
			var want []pair
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if len(want) < r.N && (r.From == nil || k >= string(r.From)) && (r.To == nil || k < string(r.To)) {
					want = append(want, pair{[]byte(k), m[k]})
				}
			}
			if len(r.Found) != len(want) || len(r.Values) != len(want) {
				rt.Fatalf("%s: found %d keys and %d values, want %v", where[i], len(r.Found), len(r.Values), want)
			}
			for j := range want {
				if !samePair(r.Found[j], r.Values[j], want[j]) {
					rt.Errorf("%s: entry %d is %s, want %s", where[i], j, gotPair(r.Found[j], r.Values[j]), want[j])
				}
			}
			if len(r.Followed) != len(r.Follow) {
				rt.Fatalf("%s: %d buckets followed, want %d", where[i], len(r.Followed), len(r.Follow))
			}
			for f, follow := range r.Follow {
				fm := model[names[0]]
				if follow.Bucket == buckets[names[1]] {
					fm = model[names[1]]
				}
				if len(r.Followed[f]) != len(want) {
					rt.Fatalf("%s: follow %d read %d values, want %d", where[i], f, len(r.Followed[f]), len(want))
				}
				for j, e := range want {
					if w := fm[string(e.v)]; !sameValue(r.Followed[f][j], w) {
						rt.Errorf("%s: follow %d of entry %d (%s) reads %s, want %s", where[i], f, j, fmtVal(e.v), fmtVal(r.Followed[f][j]), fmtVal(w))
					}
				}
			}
		}
	})
	// A read-only transaction reads through it too.
	view(t, s, func(tx kv.Tx) {
		r := &kv.Read{Bucket: bucketAt(t, tx, "q"), Op: kv.Get, Keys: [][]byte{[]byte("c"), []byte("a")}}
		kv.Pipeline(tx, r)
		checkTxErr(t, "read-only Pipeline", tx)
		if len(r.Values) != 2 || string(r.Values[0]) != "qc" || r.Values[1] != nil {
			t.Errorf("read-only Pipeline Get(c, a) = %q, want [qc nil]", r.Values)
		}
	})
}

// testSequenceRun: runs of entries numbered at commit (kv.Sequencer,
// kv.Settler), each stored under its first number, its entries' side
// values beside it, and the trim of whole runs with their side values,
// for a store whose buckets number them; others are skipped (their
// callers number entries in the transaction). Entries are 3 bytes, a flag
// and a 2-byte name that leads a side value's key.
func testSequenceRun(t *testing.T, s kv.Store) {
	be := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
	const tag, flag = 0x80, 0x10
	entry := func(flagged bool, name string) string {
		f := byte(1)
		if flagged {
			f |= flag
		}
		return string(f) + name
	}
	runAt := func(first uint64, entries ...string) pair {
		return pair{be(first), append([]byte{tag}, strings.Join(entries, "")...)}
	}
	sideAt := func(name string, n uint64, v string) pair { return pair{append([]byte(name), be(n)...), []byte(v)} }
	// The bucket of runs "r" holds values 1 and 2, stored one each before
	// its counter started, as a store's older layout may have left them,
	// with the counter "n" at 2.
	update(t, s, func(tx kv.Tx) {
		top, err := tx.CreateBucket([]byte("s"))
		mustBucket(t, `CreateBucket("s")`, top, err)
		for _, name := range []string{"r", "b"} {
			b, err := top.CreateBucket([]byte(name))
			mustBucket(t, "CreateBucket("+name+")", b, err)
		}
		must(t, "Put counter", top.Put([]byte("n"), be(2)))
		must(t, "Put counter", top.Put([]byte("o"), be(0)))
		r := top.Bucket([]byte("r"))
		must(t, "Put", r.Put(be(1), []byte("x")))
		must(t, "Put", r.Put(be(2), []byte("y")))
	})
	runs := func(tx kv.Tx) (top kv.Bucket, sq kv.Sequencer, shape kv.RunShape) {
		top = tx.Bucket([]byte("s"))
		sq, ok := top.Bucket([]byte("r")).(kv.Sequencer)
		if !ok {
			t.Skip("the store's buckets are not kv.Sequencers")
		}
		return top, sq, kv.RunShape{Tag: tag, Size: 3, Side: top.Bucket([]byte("b")), SideFlag: flag, SideKey: 2}
	}
	update(t, s, func(tx kv.Tx) {
		top, sq, _ := runs(tx)
		must(t, "StartSequence", sq.StartSequence(top, []byte("n")))
	})
	// entries is a run's entries, with side values by entry.
	type entries struct {
		es    []string
		sides map[int]string
	}
	// commit queues runs on counter, and trims with keep, slack and max
	// (keep 0: no trim).
	commit := func(where, counter string, keep, slack int64, max int, rs ...entries) error {
		t.Helper()
		tx := begin(t, s, true)
		defer func() { _ = tx.Rollback() }()
		top, sq, shape := runs(tx)
		for _, e := range rs {
			r := kv.Run{Shape: shape, Entries: []byte(strings.Join(e.es, ""))}
			for i := range e.es {
				if v, ok := e.sides[i]; ok {
					r.SideOf, r.Sides = append(r.SideOf, i), append(r.Sides, []byte(v))
				}
			}
			must(t, where+": SequenceRun", sq.SequenceRun(top, []byte(counter), r))
		}
		if keep > 0 {
			must(t, where+": TrimRuns", sq.TrimRuns(keep, slack, max, shape))
		}
		return tx.Commit()
	}
	check := func(where string, floor, settled uint64, feed []pair, sides ...pair) {
		t.Helper()
		view(t, s, func(tx kv.Tx) {
			top := tx.Bucket([]byte("s"))
			checkGet(t, where+": floor", top, []byte("n"), be(floor))
			checkWalk(t, where+": runs", top.Bucket([]byte("r")).Cursor(), feed, false)
			checkWalk(t, where+": side values", top.Bucket([]byte("b")).Cursor(), sides, false)
			st, ok := top.Bucket([]byte("r")).(kv.Settler)
			if !ok {
				t.Fatalf("%s: the buckets are kv.Sequencers, not kv.Settlers", where)
			}
			n, err := st.SettleSequence(context.Background(), top, []byte("n"))
			if err != nil || n != settled {
				t.Errorf("%s: SettleSequence = %d, %v; want %d", where, n, err, settled)
			}
		})
	}
	feed := []pair{{be(1), []byte("x")}, {be(2), []byte("y")}}
	check("started on kept values", 0, 2, feed)
	// The counter goes on after the kept values.
	a := []string{entry(false, "a0"), entry(true, "a1"), entry(false, "a2")}
	must(t, "a run", commit("a run", "n", 0, 0, 0, entries{a, map[int]string{1: "A1"}}))
	feed = append(feed, runAt(3, a...))
	check("a run", 0, 5, feed, sideAt("a1", 4, "A1"))
	// Two runs in one commit: one block of numbers, in the order queued.
	b := []string{entry(true, "b0"), entry(true, "a1")}
	c := []string{entry(false, "c0")}
	must(t, "two runs", commit("two runs", "n", 0, 0, 0, entries{b, map[int]string{0: "B0", 1: "B1"}}, entries{c, nil}))
	feed = append(feed, runAt(6, b...), runAt(8, c...))
	sides := []pair{sideAt("a1", 4, "A1"), sideAt("a1", 7, "B1"), sideAt("b0", 6, "B0")}
	check("two runs", 0, 8, feed, sides...)
	// A rollback draws no number anyone sees, and stores nothing.
	tx := begin(t, s, true)
	top, sq, shape := runs(tx)
	must(t, "SequenceRun", sq.SequenceRun(top, []byte("n"), kv.Run{Shape: shape, Entries: []byte(entry(true, "zz")), SideOf: []int{0}, Sides: [][]byte{[]byte("Z")}}))
	must(t, "Rollback", tx.Rollback())
	check("after a rollback", 0, 8, feed, sides...)
	// A run on a counter never started fails the commit rather than go
	// unnumbered, and stores nothing.
	if err := commit("no counter", "o", 0, 0, 0, entries{[]string{entry(true, "zz")}, map[int]string{0: "Z"}}); err == nil {
		t.Fatal("Commit of a run on a counter never started succeeded")
	}
	check("no counter", 0, 8, feed, sides...)
	// Keep 3 of up to 11: the bound is 8, and the values 1 and 2 (one
	// entry each), the runs 3-5 and 6-7 and the run 8 go, with their side
	// values; the floor rises to 8.
	d := []string{entry(false, "d0"), entry(false, "d1"), entry(true, "d2")}
	must(t, "a trim", commit("a trim", "n", 3, 0, 100, entries{d, map[int]string{2: "D2"}}))
	feed = []pair{runAt(9, d...)}
	check("a trim", 8, 11, feed, sideAt("d2", 11, "D2"))
	// Keep 4 of up to 14: the bound, 10, falls inside the run 9-11, which
	// stays whole.
	e := []string{entry(false, "e0"), entry(false, "e1"), entry(false, "e2")}
	must(t, "a run across the bound", commit("a run across the bound", "n", 4, 0, 100, entries{e, nil}))
	feed = append(feed, runAt(12, e...))
	check("a run across the bound", 8, 14, feed, sideAt("d2", 11, "D2"))
	// Keep 1, at most 1 entry: the first run found goes (more entries
	// than max: one run at least), and the next waits.
	must(t, "a bounded trim", commit("a bounded trim", "n", 1, 0, 1, entries{[]string{entry(true, "f0")}, map[int]string{0: "F0"}}))
	feed = append(feed[1:], runAt(15, entry(true, "f0")))
	check("a bounded trim", 11, 15, feed, sideAt("f0", 15, "F0"))
	// Slack 4: keep 1 of up to 16 bounds it at 15, 4 past the floor, 11:
	// no more than the slack, and nothing goes. With slack 3 the next
	// commit's bound, 16, is 5 past it: every run up to 16 goes.
	must(t, "within the slack", commit("within the slack", "n", 1, 4, 100, entries{[]string{entry(false, "g0")}, nil}))
	feed = append(feed, runAt(16, entry(false, "g0")))
	check("within the slack", 11, 16, feed, sideAt("f0", 15, "F0"))
	must(t, "past the slack", commit("past the slack", "n", 1, 3, 100, entries{[]string{entry(false, "h0")}, nil}))
	check("past the slack", 16, 17, []pair{runAt(17, entry(false, "h0"))})

	// Refused, and nothing queued: entries not of the shape's size, a
	// side value of an entry without the flag, or of no entry.
	tx = begin(t, s, true)
	defer func() { _ = tx.Rollback() }()
	top, sq, shape = runs(tx)
	for _, bad := range []struct {
		what string
		run  kv.Run
	}{
		{"no entries", kv.Run{Shape: shape}},
		{"a partial entry", kv.Run{Shape: shape, Entries: []byte("\x01a")}},
		{"a side value without the flag", kv.Run{Shape: shape, Entries: []byte(entry(false, "x0")), SideOf: []int{0}, Sides: [][]byte{[]byte("X")}}},
		{"a side value of no entry", kv.Run{Shape: shape, Entries: []byte(entry(true, "x0")), SideOf: []int{1}, Sides: [][]byte{[]byte("X")}}},
	} {
		if err := sq.SequenceRun(top, []byte("n"), bad.run); !errors.Is(err, kv.ErrIncompatibleValue) {
			t.Errorf("SequenceRun of %s: %v, want an error wrapping kv.ErrIncompatibleValue", bad.what, err)
		}
	}
	must(t, "Commit", tx.Commit())
	check("after refusals", 16, 17, []pair{runAt(17, entry(false, "h0"))})
}

// testInsert checks a kv.Inserter, where the backend has one: inserted keys
// read back like put ones; an insert after another write of its key in
// the same transaction stores the insert's value; an insert of a key that
// is present fails the transaction, and commits nothing of it, even when
// the transaction puts or deletes the key after it.
func testInsert(t *testing.T, s kv.Store) {
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucket([]byte("i"))
		mustBucket(t, `CreateBucket("i")`, b, err)
		must(t, "Put", b.Put([]byte("old"), []byte("1")))
		must(t, "Put", b.Put([]byte("twice"), []byte("0")))
	})
	tx := begin(t, s, true)
	defer func() { _ = tx.Rollback() }() // a failed check must not leave it open
	ins, ok := tx.Bucket([]byte("i")).(kv.Inserter)
	if !ok {
		t.Skip("the store's buckets are not kv.Inserters")
	}
	b := tx.Bucket([]byte("i"))
	key := []byte("new")
	must(t, "Insert", ins.Insert(key, []byte("2")))
	key[0] = 'x' // the key is copied
	// "twice" is stored: deleted here, it may be inserted again.
	must(t, "Delete", b.Delete([]byte("twice")))
	must(t, "Insert after a delete", ins.Insert([]byte("twice"), []byte("b")))
	checkGet(t, "same transaction", b, []byte("new"), []byte("2"))
	checkTxErr(t, "insert", tx)
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	view(t, s, func(tx kv.Tx) {
		b := tx.Bucket([]byte("i"))
		checkGet(t, "after commit", b, []byte("new"), []byte("2"))
		checkGet(t, "after commit", b, []byte("twice"), []byte("b"))
	})

	tx = begin(t, s, true)
	b = tx.Bucket([]byte("i"))
	must(t, "Put", b.Put([]byte("lost"), []byte("3")))
	err := b.(kv.Inserter).Insert([]byte("old"), []byte("4"))
	if err == nil {
		err = tx.Commit()
	}
	_ = tx.Rollback()
	if !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("Insert of a present key: %v, want an error wrapping kv.ErrConflict", err)
	}
	view(t, s, func(tx kv.Tx) {
		b := tx.Bucket([]byte("i"))
		checkGet(t, "after the failed insert", b, []byte("old"), []byte("1"))
		checkGet(t, "after the failed insert", b, []byte("lost"), nil)
	})

	// The insert of a present key fails the transaction whatever the
	// transaction writes to the key after it; one of an absent key ends as
	// the later writes leave it.
	for _, tc := range []struct {
		name     string
		key      string
		then     func(b kv.Bucket, key []byte) error
		conflict bool
		want     []byte
	}{
		{"present, then deleted", "old", func(b kv.Bucket, k []byte) error { return b.Delete(k) }, true, []byte("1")},
		{"present, then put", "old", func(b kv.Bucket, k []byte) error { return b.Put(k, []byte("5")) }, true, []byte("1")},
		{"absent, then deleted", "gone", func(b kv.Bucket, k []byte) error { return b.Delete(k) }, false, nil},
		{"absent, then put", "later", func(b kv.Bucket, k []byte) error { return b.Put(k, []byte("6")) }, false, []byte("6")},
		{"absent, then deleted and put", "back", func(b kv.Bucket, k []byte) error {
			if err := b.Delete(k); err != nil {
				return err
			}
			return b.Put(k, []byte("7"))
		}, false, []byte("7")},
	} {
		tx := begin(t, s, true)
		b := tx.Bucket([]byte("i"))
		key := []byte(tc.key)
		err := b.(kv.Inserter).Insert(key, []byte("4"))
		if err == nil {
			err = tc.then(b, key)
		}
		if err == nil {
			err = tx.Commit()
		}
		_ = tx.Rollback()
		switch {
		case tc.conflict && !errors.Is(err, kv.ErrConflict):
			t.Errorf("Insert of a key %s: %v, want an error wrapping kv.ErrConflict", tc.name, err)
		case !tc.conflict && err != nil:
			t.Errorf("Insert of a key %s: %v", tc.name, err)
		}
		view(t, s, func(tx kv.Tx) {
			checkGet(t, "after an insert of a key "+tc.name, tx.Bucket([]byte("i")), key, tc.want)
		})
	}
}

func testKeyReuse(t *testing.T, s kv.Store) {
	key := make([]byte, 2)
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucket([]byte("r"))
		mustBucket(t, `CreateBucket("r")`, b, err)
		for i := range 10 {
			key[0], key[1] = 'k', byte('0'+i)
			must(t, "Put", b.Put(key, []byte{byte(i)}))
		}
		key[0], key[1] = 'k', '3'
		must(t, "Delete", b.Delete(key))
		key[0], key[1] = 'x', 'x' // scribble over the last key used
		for i := range 10 {
			want := []byte{byte(i)}
			if i == 3 {
				want = nil
			}
			checkGet(t, "same transaction", b, []byte{'k', byte('0' + i)}, want)
		}
	})
	view(t, s, func(tx kv.Tx) {
		b := tx.Bucket([]byte("r"))
		if b == nil {
			t.Fatal(`bucket "r" missing after commit`)
		}
		for i := range 10 {
			want := []byte{byte(i)}
			if i == 3 {
				want = nil
			}
			checkGet(t, "after commit", b, []byte{'k', byte('0' + i)}, want)
		}
	})
}

func testValues(t *testing.T, s kv.Store) {
	want := node{"v": node{
		"k": []byte("two!"),
		"e": []byte{},
		"x": []byte("1"),
		"z": []byte("26"),
	}}
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucket([]byte("v"))
		mustBucket(t, `CreateBucket("v")`, b, err)
		checkGet(t, "empty bucket", b, []byte("k"), nil)
		must(t, "Put", b.Put([]byte("k"), []byte("one")))
		checkGet(t, "after Put", b, []byte("k"), []byte("one"))
		must(t, "Put", b.Put([]byte("k"), []byte("two!")))
		checkGet(t, "after overwriting Put", b, []byte("k"), []byte("two!"))
		must(t, "Put of an empty value", b.Put([]byte("e"), []byte{}))
		if got := b.Get([]byte("e")); got == nil || len(got) != 0 {
			t.Errorf("Get of an empty value in its transaction = %s, want a non-nil empty slice", fmtVal(got))
		}
		must(t, "Put", b.Put([]byte("k2"), []byte("2")))
		checkGet(t, "after Put", b, []byte("k2"), []byte("2"))
		wantErr(t, "Delete(k2)", b.Delete([]byte("k2")))
		checkGet(t, "after Delete", b, []byte("k2"), nil)
		wantErr(t, "Delete of a key deleted in the same transaction", b.Delete([]byte("k2")))
		wantErr(t, "Delete of a missing key", b.Delete([]byte("missing")))
		must(t, "Put", b.Put([]byte("x"), []byte("1")))
		must(t, "Put", b.Put([]byte("z"), []byte("26")))
		checkTree(t, "in the writing transaction", tx, want)
	})
	expect(t, "after commit", s, want)
	view(t, s, func(tx kv.Tx) {
		if got := bucketAt(t, tx, "v").Get([]byte("e")); got == nil || len(got) != 0 {
			t.Errorf("Get of an empty value after commit = %s, want a non-nil empty slice", fmtVal(got))
		}
		if _, v := bucketAt(t, tx, "v").Cursor().First(); v == nil || len(v) != 0 {
			t.Errorf("cursor on an empty value after commit: value %s, want a non-nil empty slice", fmtVal(v))
		}
		checkGet(t, "after commit", bucketAt(t, tx, "v"), []byte("k2"), nil)
	})

	// Overwrites: empty by non-empty, non-empty by empty, short by long.
	w := want["v"].(node)
	w["e"] = []byte("filled")
	w["k"] = []byte{}
	w["z"] = bytes.Repeat([]byte("z"), 300)
	delete(w, "x")
	update(t, s, func(tx kv.Tx) {
		b := bucketAt(t, tx, "v")
		must(t, "Put", b.Put([]byte("e"), []byte("filled")))
		must(t, "Put", b.Put([]byte("k"), []byte{}))
		must(t, "Put", b.Put([]byte("z"), bytes.Repeat([]byte("z"), 300)))
		must(t, "Delete", b.Delete([]byte("x")))
		checkTree(t, "overwrites, in their transaction", tx, want)
	})
	expect(t, "overwrites, after commit", s, want)
}

func testEmptyKey(t *testing.T, s kv.Store) {
	want := node{"b": node{"k": []byte("v")}}
	setup(t, s, want)
	update(t, s, func(tx kv.Tx) {
		b := bucketAt(t, tx, "b")
		wantErr(t, "Put with an empty key", b.Put([]byte{}, []byte("v")), kv.ErrKeyRequired)
		wantErr(t, "Put with a nil key", b.Put(nil, []byte("v")), kv.ErrKeyRequired)
		_, err := tx.CreateBucket([]byte{})
		wantErr(t, "Tx.CreateBucket with an empty name", err, kv.ErrKeyRequired)
		_, err = tx.CreateBucket(nil)
		wantErr(t, "Tx.CreateBucket with a nil name", err, kv.ErrKeyRequired)
		_, err = tx.CreateBucketIfNotExists([]byte{})
		wantErr(t, "Tx.CreateBucketIfNotExists with an empty name", err, kv.ErrKeyRequired)
		_, err = b.CreateBucket([]byte{})
		wantErr(t, "Bucket.CreateBucket with an empty name", err, kv.ErrKeyRequired)
		_, err = b.CreateBucketIfNotExists(nil)
		wantErr(t, "Bucket.CreateBucketIfNotExists with a nil name", err, kv.ErrKeyRequired)
		checkTree(t, "after refused empty keys", tx, want)
	})
	expect(t, "after refused empty keys, committed", s, want)
}

// ---------------------------------------------------------------------------
// Buckets

func testBuckets(t *testing.T, s kv.Store) {
	want := node{
		"a": node{
			"a1":   []byte("1"),
			"b":    node{"k": []byte("2"), "c": node{"k": []byte("3"), "e": []byte{}}},
			"m":    node{},
			"n":    node{},
			"via2": []byte("x"),
			"z":    []byte("26"),
		},
		"\x00top": node{},
		"\xfftop": node{"k": []byte("v")},
	}
	update(t, s, func(tx kv.Tx) {
		if tx.Bucket([]byte("a")) != nil {
			t.Fatalf("Bucket(a) in an empty store is not nil")
		}
		a, err := tx.CreateBucket([]byte("a"))
		mustBucket(t, `CreateBucket("a")`, a, err)
		if !a.Writable() {
			t.Errorf("Bucket.Writable() = false in a writable transaction")
		}
		must(t, "Put", a.Put([]byte("a1"), []byte("1")))
		b, err := a.CreateBucket([]byte("b"))
		mustBucket(t, `a.CreateBucket("b")`, b, err)
		must(t, "Put", b.Put([]byte("k"), []byte("2")))
		c, err := b.CreateBucket([]byte("c"))
		mustBucket(t, `a/b.CreateBucket("c")`, c, err)
		must(t, "Put", c.Put([]byte("k"), []byte("3")))
		must(t, "Put", c.Put([]byte("e"), []byte{}))
		must(t, "Put", a.Put([]byte("z"), []byte("26")))
		m, err := a.CreateBucket([]byte("m"))
		mustBucket(t, `a.CreateBucket("m")`, m, err)
		if k, v := m.Cursor().First(); k != nil {
			t.Errorf("a new bucket's cursor: First = %v, want the end", gotPair(k, v))
		}

		// CreateBucketIfNotExists of an existing bucket returns that bucket.
		a2, err := tx.CreateBucketIfNotExists([]byte("a"))
		mustBucket(t, `CreateBucketIfNotExists("a") of an existing bucket`, a2, err)
		checkGet(t, `the bucket CreateBucketIfNotExists("a") returned`, a2, []byte("a1"), []byte("1"))
		must(t, "Put", a2.Put([]byte("via2"), []byte("x")))
		checkGet(t, `a put through CreateBucketIfNotExists's bucket, read through Bucket("a")`, tx.Bucket([]byte("a")), []byte("via2"), []byte("x"))
		b2, err := a.CreateBucketIfNotExists([]byte("b"))
		mustBucket(t, `a.CreateBucketIfNotExists("b") of an existing bucket`, b2, err)
		checkGet(t, `the bucket a.CreateBucketIfNotExists("b") returned`, b2, []byte("k"), []byte("2"))
		c2, err := b2.CreateBucketIfNotExists([]byte("c"))
		mustBucket(t, `a/b.CreateBucketIfNotExists("c") of an existing bucket`, c2, err)
		checkGet(t, `the bucket a/b.CreateBucketIfNotExists("c") returned`, c2, []byte("k"), []byte("3"))
		// ... and creates a missing one.
		n, err := a.CreateBucketIfNotExists([]byte("n"))
		mustBucket(t, `a.CreateBucketIfNotExists("n")`, n, err)
		if k, v := n.Cursor().First(); k != nil {
			t.Errorf("a bucket new from CreateBucketIfNotExists: First = %v, want the end", gotPair(k, v))
		}
		for _, name := range []string{"\x00top", "\xfftop"} {
			tb, err := tx.CreateBucketIfNotExists([]byte(name))
			mustBucket(t, fmt.Sprintf("CreateBucketIfNotExists(%q)", name), tb, err)
		}
		must(t, "Put", tx.Bucket([]byte("\xfftop")).Put([]byte("k"), []byte("v")))

		checkGet(t, "3 deep, through Bucket", bucketAt(t, tx, "a", "b", "c"), []byte("k"), []byte("3"))
		checkGet(t, "Get of a nested bucket's key", a, []byte("b"), nil)
		checkTree(t, "in the creating transaction", tx, want)
	})
	expect(t, "after commit", s, want)
	view(t, s, func(tx kv.Tx) {
		if b := bucketAt(t, tx, "a", "b"); b.Writable() {
			t.Errorf("Bucket.Writable() = true in a read-only transaction")
		}
	})
}

func testBucketErrors(t *testing.T, s kv.Store) {
	want := node{"a": node{
		"val": []byte("v"),
		"sub": node{"k": []byte("1"), "deep": node{"d": []byte("2")}},
	}}
	setup(t, s, want)
	update(t, s, func(tx kv.Tx) {
		a := bucketAt(t, tx, "a")
		sub := bucketAt(t, tx, "a", "sub")
		_, err := tx.CreateBucket([]byte("a"))
		wantErr(t, "Tx.CreateBucket of an existing bucket", err, kv.ErrBucketExists)
		_, err = a.CreateBucket([]byte("sub"))
		wantErr(t, "CreateBucket of an existing nested bucket", err, kv.ErrBucketExists)
		_, err = sub.CreateBucket([]byte("deep"))
		wantErr(t, "CreateBucket of an existing bucket 3 deep", err, kv.ErrBucketExists)
		_, err = a.CreateBucket([]byte("val"))
		wantErr(t, "CreateBucket on a key holding a value", err, kv.ErrIncompatibleValue)
		_, err = a.CreateBucketIfNotExists([]byte("val"))
		wantErr(t, "CreateBucketIfNotExists on a key holding a value", err, kv.ErrIncompatibleValue)
		wantErr(t, "Put on a nested bucket's key", a.Put([]byte("sub"), []byte("x")), kv.ErrIncompatibleValue)
		wantErr(t, "Delete of a nested bucket's key", a.Delete([]byte("sub")), kv.ErrIncompatibleValue)
		wantErr(t, "Put on a nested bucket's key 3 deep", sub.Put([]byte("deep"), []byte("x")), kv.ErrIncompatibleValue)
		wantErr(t, "Delete of a nested bucket's key 3 deep", sub.Delete([]byte("deep")), kv.ErrIncompatibleValue)
		checkGet(t, "Get of a nested bucket's key", a, []byte("sub"), nil)
		checkGet(t, "Get of a nested bucket's key 3 deep", sub, []byte("deep"), nil)
		if a.Bucket([]byte("val")) != nil {
			t.Errorf("Bucket on a key holding a value is not nil")
		}
		if a.Bucket([]byte("missing")) != nil {
			t.Errorf("Bucket of a missing nested bucket is not nil")
		}
		if tx.Bucket([]byte("missing")) != nil {
			t.Errorf("Tx.Bucket of a missing bucket is not nil")
		}
		wantErr(t, "Tx.DeleteBucket of a missing bucket", tx.DeleteBucket([]byte("missing")), kv.ErrBucketNotFound)
		wantErr(t, "DeleteBucket of a missing nested bucket", a.DeleteBucket([]byte("missing")), kv.ErrBucketNotFound)
		wantErr(t, "DeleteBucket of a missing bucket 3 deep", sub.DeleteBucket([]byte("nope")), kv.ErrBucketNotFound)
		// The contract leaves open which of the two a bucket operation on
		// a value's key returns.
		wantErr(t, "DeleteBucket on a key holding a value", a.DeleteBucket([]byte("val")), kv.ErrBucketNotFound, kv.ErrIncompatibleValue)

		c := a.Cursor()
		k, v := c.Seek([]byte("sub"))
		at(t, "cursor", `Seek("sub")`, k, v, bkt("sub"))
		wantErr(t, "Cursor.Delete on a nested bucket's key", c.Delete(), kv.ErrIncompatibleValue)
		tc := tx.Cursor()
		k, v = tc.First()
		at(t, "top-level cursor", "First", k, v, bkt("a"))
		wantErr(t, "Cursor.Delete on a top-level bucket's name", tc.Delete(), kv.ErrIncompatibleValue)

		checkTree(t, "after refused operations, in their transaction", tx, want)
	})
	expect(t, "after refused operations, committed", s, want)
}

func testDeleteBucket(t *testing.T, s kv.Store) {
	want := node{
		"a": node{
			"x": []byte("1"),
			"b": node{"y": []byte("2"), "c": node{"z": []byte("3"), "e": []byte{}}},
			"q": []byte("4"),
		},
		"t": node{"k": []byte("v")},
	}
	setup(t, s, want)

	// A nested bucket, with everything beneath it; recreated empty.
	update(t, s, func(tx kv.Tx) {
		a := bucketAt(t, tx, "a")
		wantErr(t, `DeleteBucket("b")`, a.DeleteBucket([]byte("b")))
		if a.Bucket([]byte("b")) != nil {
			t.Errorf("Bucket of a nested bucket just deleted is not nil")
		}
		checkGet(t, "after DeleteBucket", a, []byte("b"), nil)
		delete(want["a"].(node), "b")
		checkTree(t, "after DeleteBucket, in its transaction", tx, want)
		wantErr(t, "DeleteBucket of a bucket just deleted", a.DeleteBucket([]byte("b")), kv.ErrBucketNotFound)

		b, err := a.CreateBucket([]byte("b"))
		mustBucket(t, "CreateBucket of a bucket deleted in the same transaction", b, err)
		if k, v := b.Cursor().First(); k != nil {
			t.Errorf("a recreated bucket: First = %v, want the end", gotPair(k, v))
		}
		if b.Bucket([]byte("c")) != nil {
			t.Errorf("a recreated bucket still holds the nested bucket c")
		}
		checkGet(t, "a recreated bucket", b, []byte("y"), nil)
		want["a"].(node)["b"] = node{}
		checkTree(t, "deleted and recreated, in their transaction", tx, want)
	})
	expect(t, "deleted and recreated, committed", s, want)

	// A top-level bucket.
	update(t, s, func(tx kv.Tx) {
		wantErr(t, `Tx.DeleteBucket("a")`, tx.DeleteBucket([]byte("a")))
		if tx.Bucket([]byte("a")) != nil {
			t.Errorf("Tx.Bucket of a bucket just deleted is not nil")
		}
		delete(want, "a")
		checkTree(t, "after Tx.DeleteBucket, in its transaction", tx, want)
		a, err := tx.CreateBucket([]byte("a"))
		mustBucket(t, "Tx.CreateBucket of a bucket deleted in the same transaction", a, err)
		if k, v := a.Cursor().First(); k != nil {
			t.Errorf("a recreated top-level bucket: First = %v, want the end", gotPair(k, v))
		}
		want["a"] = node{}
		checkTree(t, "top level deleted and recreated, in their transaction", tx, want)
	})
	expect(t, "top level deleted and recreated, committed", s, want)

	// Deleted in one transaction, recreated in the next.
	update(t, s, func(tx kv.Tx) { must(t, `Tx.DeleteBucket("t")`, tx.DeleteBucket([]byte("t"))) })
	delete(want, "t")
	expect(t, "after a committed Tx.DeleteBucket", s, want)
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucketIfNotExists([]byte("t"))
		mustBucket(t, "CreateBucketIfNotExists of a bucket deleted earlier", b, err)
		if k, v := b.Cursor().First(); k != nil {
			t.Errorf("a bucket recreated after a committed delete: First = %v, want the end", gotPair(k, v))
		}
	})
	want["t"] = node{}
	expect(t, "recreated after a committed delete", s, want)
}

// ---------------------------------------------------------------------------
// Cursors

func testCursor(t *testing.T, s kv.Store) {
	tree := node{
		"c":     node{"b": []byte("B"), "d": []byte("D"), "f": []byte("F")},
		"empty": node{},
		"one":   node{"only": []byte("1")},
	}
	check := func(where string, tx kv.Tx) {
		c := bucketAt(t, tx, "c").Cursor()
		step := func(move string, k, v []byte, want pair) { t.Helper(); at(t, where, move, k, v, want) }
		k, v := c.First()
		step("First", k, v, p("b", "B"))
		k, v = c.Next()
		step("First, Next", k, v, p("d", "D"))
		k, v = c.Next()
		step("First, Next, Next", k, v, p("f", "F"))
		k, v = c.Next()
		step("Next from the last key", k, v, end)
		k, v = c.First()
		step("First again after walking off the end", k, v, p("b", "B"))
		k, v = c.Prev()
		step("Prev from the first key", k, v, end)

		k, v = c.Last()
		step("Last", k, v, p("f", "F"))
		k, v = c.Prev()
		step("Last, Prev", k, v, p("d", "D"))
		k, v = c.Prev()
		step("Last, Prev, Prev", k, v, p("b", "B"))
		k, v = c.Prev()
		step("Last, Prev, Prev, Prev", k, v, end)

		k, v = c.First()
		step("First", k, v, p("b", "B"))
		k, v = c.Next()
		step("First, Next", k, v, p("d", "D"))
		k, v = c.Prev()
		step("First, Next, Prev", k, v, p("b", "B"))
		k, v = c.Last()
		step("Last", k, v, p("f", "F"))
		k, v = c.Prev()
		step("Last, Prev", k, v, p("d", "D"))
		k, v = c.Next()
		step("Last, Prev, Next", k, v, p("f", "F"))

		for _, tc := range []struct {
			seek string
			want pair
		}{
			{"d", p("d", "D")},         // exact
			{"c", p("d", "D")},         // between keys
			{"c\xff\xff", p("d", "D")}, // between keys
			{"a", p("b", "B")},         // before the first
			{"", p("b", "B")},          // the empty key is before all
			{"b", p("b", "B")},         // the first
			{"f", p("f", "F")},         // the last
			{"e\xff", p("f", "F")},     // just before the last
			{"f\x00", end},             // just past the last
			{"g", end},                 // past the last
			{"\xff\xff\xff", end},      // far past the last
		} {
			k, v = c.Seek([]byte(tc.seek))
			step(fmt.Sprintf("Seek(%q)", tc.seek), k, v, tc.want)
		}
		k, v = c.Seek([]byte("c"))
		step(`Seek("c")`, k, v, p("d", "D"))
		k, v = c.Next()
		step(`Seek("c"), Next`, k, v, p("f", "F"))
		k, v = c.Next()
		step(`Seek("c"), Next, Next`, k, v, end)
		k, v = c.Seek([]byte("c"))
		step(`Seek("c")`, k, v, p("d", "D"))
		k, v = c.Prev()
		step(`Seek("c"), Prev`, k, v, p("b", "B"))
		k, v = c.Seek([]byte("b"))
		step(`Seek("b")`, k, v, p("b", "B"))
		k, v = c.Prev()
		step(`Seek("b"), Prev`, k, v, end)
		k, v = c.Seek([]byte("f"))
		step(`Seek("f")`, k, v, p("f", "F"))
		k, v = c.Next()
		step(`Seek("f"), Next`, k, v, end)
		// Seek past the end lands nowhere; what Prev does then is left
		// open, but Last must still work.
		k, v = c.Seek([]byte("z"))
		step(`Seek("z")`, k, v, end)
		k, v = c.Last()
		step(`Seek("z"), Last`, k, v, p("f", "F"))

		ec := bucketAt(t, tx, "empty").Cursor()
		k, v = ec.First()
		step("empty bucket: First", k, v, end)
		k, v = ec.Last()
		step("empty bucket: Last", k, v, end)
		k, v = ec.Seek([]byte("a"))
		step(`empty bucket: Seek("a")`, k, v, end)
		k, v = ec.Seek(nil)
		step("empty bucket: Seek(nil)", k, v, end)

		oc := bucketAt(t, tx, "one").Cursor()
		k, v = oc.First()
		step("one key: First", k, v, p("only", "1"))
		k, v = oc.Next()
		step("one key: First, Next", k, v, end)
		k, v = oc.Last()
		step("one key: Last", k, v, p("only", "1"))
		k, v = oc.Prev()
		step("one key: Last, Prev", k, v, end)
		k, v = oc.Seek([]byte("only"))
		step(`one key: Seek("only")`, k, v, p("only", "1"))
		k, v = oc.Seek([]byte("onlz"))
		step(`one key: Seek("onlz")`, k, v, end)

		checkTree(t, where, tx, tree)
	}
	update(t, s, func(tx kv.Tx) {
		build(t, tx, nil, tree)
		check("in the writing transaction", tx)
	})
	view(t, s, func(tx kv.Tx) { check("after commit", tx) })
}

// orderKeys are keys whose bytewise order a backend comparing text,
// signed bytes or lengths first would get wrong.
func orderKeys() [][]byte {
	keys := [][]byte{
		{0x00}, {0x00, 0x00}, {0x00, 0x01}, {0x00, 0xff}, {0x01}, {0x01, 0x00},
		{0x7f}, {0x7f, 0xff}, {0x80}, {0x80, 0x00}, {0xc3, 0xa9}, {0xfe, 0xff},
		{0xff}, {0xff, 0x00}, {0xff, 0xff}, {0xff, 0xff, 0xff},
		[]byte("A"), []byte("Z"), []byte("a"), []byte("a\x00"), []byte("aa"), []byte("ab"), []byte("b"),
		[]byte("é"), []byte("\t"), []byte(" "), []byte("~"),
	}
	// 16-byte UUID-like keys: random ones, and one varied in its first and
	// last bytes.
	r := rand.New(rand.NewPCG(16, 16))
	for range 12 {
		u := make([]byte, 16)
		for i := range u {
			u[i] = byte(r.Uint32())
		}
		keys = append(keys, u)
	}
	base := []byte{0x01, 0x8f, 0x3a, 0x4b, 0x7c, 0x00, 0x7d, 0x12, 0x80, 0x00, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x00}
	for _, last := range []byte{0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff} {
		u := bytes.Clone(base)
		u[15] = last
		keys = append(keys, u)
	}
	for _, first := range []byte{0x00, 0x80, 0xff} {
		u := bytes.Clone(base)
		u[0] = first
		keys = append(keys, u)
	}
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

func testOrder(t *testing.T, s kv.Store) {
	keys := orderKeys()
	want := node{}
	inner := node{}
	for i, k := range keys {
		inner[string(k)] = []byte(fmt.Sprintf("v%d", i))
	}
	want["o"] = inner
	// Top-level names in bytewise order too.
	for _, name := range [][]byte{{0x00}, {0x7f}, {0x80}, {0xff}, {0xff, 0x00}, []byte("a")} {
		want[string(name)] = node{}
	}
	es := inner.entries()
	var probes [][]byte
	for _, k := range keys {
		probes = append(probes, k, append(bytes.Clone(k), 0x00), k[:len(k)-1])
	}
	probes = append(probes, nil, []byte{0x00, 0x00, 0x00}, []byte{0x7f, 0xff, 0xff}, []byte{0xff, 0xff, 0xff, 0xff})
	check := func(where string, tx kv.Tx) {
		checkTree(t, where, tx, want)
		c := bucketAt(t, tx, "o").Cursor()
		for _, pr := range probes {
			i := seekIndex(es, pr)
			k, v := c.Seek(pr)
			w := end
			if i < len(es) {
				w = es[i]
			}
			at(t, where, fmt.Sprintf("Seek(%s)", fmtKey(pr)), k, v, w)
			if k != nil && i+1 < len(es) {
				k, v = c.Next()
				at(t, where, fmt.Sprintf("Seek(%s), Next", fmtKey(pr)), k, v, es[i+1])
			}
		}
	}
	update(t, s, func(tx kv.Tx) {
		for _, name := range slices.Collect(maps.Keys(want)) {
			b, err := tx.CreateBucket([]byte(name))
			mustBucket(t, fmt.Sprintf("CreateBucket(%q)", name), b, err)
		}
		b := bucketAt(t, tx, "o")
		for i, k := range keys { // in shuffled order
			must(t, "Put", b.Put(bytes.Clone(k), []byte(fmt.Sprintf("v%d", i))))
		}
		check("in the writing transaction", tx)
	})
	view(t, s, func(tx kv.Tx) { check("after commit", tx) })
}

func testOwnWrites(t *testing.T, s kv.Store) {
	before := node{
		"w":   node{"a": []byte("1"), "c": []byte("3"), "e": []byte("5"), "g": []byte("7")},
		"old": node{"k": []byte("v")},
	}
	setup(t, s, before)
	after := before.clone()
	w := after["w"].(node)
	w["b"] = []byte("2")
	delete(w, "c")
	w["e"] = []byte("five")
	w["d"] = node{"in": []byte("x")}
	w["h"] = []byte{}
	after["new"] = node{}
	delete(after, "old")

	tx := begin(t, s, true)
	defer func() { _ = tx.Rollback() }()
	b := bucketAt(t, tx, "w")
	must(t, "Put", b.Put([]byte("b"), []byte("2")))
	must(t, "Delete", b.Delete([]byte("c")))
	must(t, "Put", b.Put([]byte("e"), []byte("five")))
	d, err := b.CreateBucket([]byte("d"))
	mustBucket(t, "CreateBucket", d, err)
	must(t, "Put", d.Put([]byte("in"), []byte("x")))
	must(t, "Put", b.Put([]byte("h"), []byte{}))
	_, err = tx.CreateBucket([]byte("new"))
	must(t, "Tx.CreateBucket", err)
	must(t, "Tx.DeleteBucket", tx.DeleteBucket([]byte("old")))

	checkTree(t, "reads of the transaction's own writes", tx, after)
	c := b.Cursor()
	k, v := c.Seek([]byte("c"))
	at(t, "own writes", `Seek("c") (c deleted, d a new bucket)`, k, v, bkt("d"))
	k, v = c.Prev()
	at(t, "own writes", `Seek("c"), Prev`, k, v, p("b", "2"))
	k, v = c.Seek([]byte("e"))
	at(t, "own writes", `Seek("e") (overwritten)`, k, v, p("e", "five"))
	checkGet(t, "own writes", b, []byte("c"), nil)

	// A write after the cursor was made, then a fresh move.
	must(t, "Delete", b.Delete([]byte("a")))
	delete(w, "a")
	k, v = b.Cursor().First()
	at(t, "own writes", "First after deleting the first key", k, v, p("b", "2"))
	checkTree(t, "reads of the transaction's own writes, after more", tx, after)

	checkTxErr(t, "own writes", tx)
	must(t, "Rollback", tx.Rollback())
	expect(t, "after rolling the writes back", s, before)
}

// deleteWalk walks c forward from First (or from Seek(from) if from is not
// nil), calls Cursor.Delete on the keys del picks, and checks that the walk
// still lands on every key of want in turn. It deletes the removed keys
// from want.
func deleteWalk(t tb, where string, c kv.Cursor, want node, from []byte, del func(i int, e pair) bool) {
	t.Helper()
	deleteWalkIn(t, where, true, c, want, from, del)
}

// deleteWalkIn is deleteWalk in a transaction that may be read-only, where
// every Cursor.Delete must fail.
func deleteWalkIn(t tb, where string, writable bool, c kv.Cursor, want node, from []byte, del func(i int, e pair) bool) {
	t.Helper()
	es := want.entries()
	var k, v []byte
	i := 0
	move := "First"
	if from != nil {
		i = seekIndex(es, from)
		k, v = c.Seek(from)
		move = fmt.Sprintf("Seek(%s)", fmtKey(from))
	} else {
		k, v = c.First()
	}
	deleted := false
	for ; ; i++ {
		w := end
		if i < len(es) {
			w = es[i]
		}
		if !samePair(k, v, w) {
			after := ""
			if deleted {
				after = " after Cursor.Delete of the key before"
			}
			t.Errorf("%s: walk deleting keys, step %d (%s%s): want %v, got %v", where, i, move, after, w, gotPair(k, v))
			return
		}
		if w.k == nil {
			return
		}
		deleted = false
		if del(i, w) {
			if !writable {
				accept := []error{kv.ErrTxNotWritable}
				if w.v == nil {
					accept = append(accept, kv.ErrIncompatibleValue)
				}
				wantErr(t, fmt.Sprintf("%s: Cursor.Delete on %s in a read-only transaction", where, fmtKey(w.k)), c.Delete(), accept...)
			} else if w.v == nil {
				wantErr(t, fmt.Sprintf("%s: Cursor.Delete on the nested bucket %s", where, fmtKey(w.k)), c.Delete(), kv.ErrIncompatibleValue)
			} else if wantErr(t, fmt.Sprintf("%s: Cursor.Delete on %s", where, fmtKey(w.k)), c.Delete()) {
				delete(want, string(w.k))
				deleted = true
			}
		}
		k, v = c.Next()
		move = "Next"
	}
}

// keys returns n keys "k0000"... with values of size bytes.
func keys(n, size int) node {
	m := node{}
	for i := range n {
		m[fmt.Sprintf("k%04d", i)] = bytes.Repeat([]byte{byte('a' + i%26)}, size)
	}
	return m
}

func testCursorDelete(t *testing.T, s kv.Store) {
	pattern := func(i int, _ pair) bool { return i <= 2 || i == 5 || i == 7 || i == 9 }
	want := node{"committed": keys(10, 1), "pages": keys(600, 200)}
	setup(t, s, want)

	// Keys committed earlier.
	update(t, s, func(tx kv.Tx) {
		deleteWalk(t, "committed keys", bucketAt(t, tx, "committed").Cursor(), want["committed"].(node), nil, pattern)
		checkTree(t, "committed keys, after the walk, in its transaction", tx, want)
	})
	expect(t, "committed keys, after the walk, committed", s, want)

	// Keys put in the same transaction.
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucket([]byte("own"))
		mustBucket(t, "CreateBucket", b, err)
		want["own"] = keys(10, 1)
		build(t, b, b, want["own"].(node))
		deleteWalk(t, "keys put in the same transaction", b.Cursor(), want["own"].(node), nil, pattern)
		checkTree(t, "keys put in the same transaction, after the walk", tx, want)
	})
	expect(t, "keys put in the same transaction, after the walk, committed", s, want)

	// Keys overwritten in the same transaction.
	update(t, s, func(tx kv.Tx) {
		b := bucketAt(t, tx, "committed")
		for _, k := range []string{"k0003", "k0004", "k0006", "k0008"} {
			want["committed"].(node)[k] = []byte("new")
			must(t, "Put", b.Put([]byte(k), []byte("new")))
		}
		deleteWalk(t, "keys overwritten in the same transaction", b.Cursor(), want["committed"].(node), nil, func(i int, _ pair) bool { return i%2 == 0 })
		checkTree(t, "keys overwritten in the same transaction, after the walk", tx, want)
	})
	expect(t, "keys overwritten in the same transaction, after the walk, committed", s, want)

	// Nested buckets among the values: their deletes fail, the walk goes on.
	update(t, s, func(tx kv.Tx) {
		m := node{"a": []byte("1"), "b": node{"x": []byte("y")}, "c": []byte("3"), "d": node{}, "e": []byte("5")}
		want["mixed"] = m
		build(t, tx, nil, node{"mixed": m.clone()})
		deleteWalk(t, "values and nested buckets", bucketAt(t, tx, "mixed").Cursor(), m, nil, func(int, pair) bool { return true })
		checkTree(t, "values and nested buckets, after deleting all", tx, want)
	})
	expect(t, "values and nested buckets, after deleting all, committed", s, want)

	// From a Seek, across many pages, every key.
	update(t, s, func(tx kv.Tx) {
		b := bucketAt(t, tx, "pages")
		deleteWalk(t, "after a Seek", b.Cursor(), want["pages"].(node), []byte("k0100x"), func(i int, _ pair) bool { return i%3 != 1 })
		checkTree(t, "after a Seek, after the walk", tx, want)
	})
	expect(t, "after a Seek, after the walk, committed", s, want)
	update(t, s, func(tx kv.Tx) {
		deleteWalk(t, "every key", bucketAt(t, tx, "pages").Cursor(), want["pages"].(node), nil, func(int, pair) bool { return true })
		// Last on the emptied pages is checked in EmptiedPages, under a
		// watchdog.
		if k, v := bucketAt(t, tx, "pages").Cursor().First(); k != nil {
			t.Errorf("after deleting every key with a cursor: First = %v, want the end", gotPair(k, v))
		}
	})
	expect(t, "every key deleted, committed", s, want)

	// Many keys put in the same transaction.
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucket([]byte("ownpages"))
		mustBucket(t, "CreateBucket", b, err)
		want["ownpages"] = keys(600, 200)
		build(t, b, b, want["ownpages"].(node))
		deleteWalk(t, "many keys put in the same transaction", b.Cursor(), want["ownpages"].(node), nil, func(i int, _ pair) bool { return i%3 != 1 })
		checkTree(t, "many keys put in the same transaction, after the walk", tx, want)
	})
	expect(t, "many keys put in the same transaction, after the walk, committed", s, want)
}

// guard runs checks that might never return (a cursor looping over pages
// emptied in its own transaction) in another goroutine, so that such a bug
// fails the subtest instead of hanging the run. check may only report with
// t.Errorf. If it does not return within a few seconds, guard reports it,
// abandons the store (its transaction is still in use, so neither it nor
// the store can be ended), and returns false: the caller must then return
// without touching the transaction.
func guard(t *testing.T, s kv.Store, what string, check func()) bool {
	t.Helper()
	const limit = 5 * time.Second
	done := make(chan struct{})
	go func() {
		defer close(done)
		check()
	}()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		t.Errorf("%s: no answer within %v; the cursor move hangs (the transaction and the store are left open)", what, limit)
		if cs, ok := s.(*closingStore); ok {
			cs.abandon()
		}
		return false
	}
}

// testEmptiedPages deletes ranges of keys from a bucket of many pages and
// reads it in the same transaction, before a page-based store has merged
// the emptied pages away.
func testEmptiedPages(t *testing.T, s kv.Store) {
	want := node{"p": keys(600, 200)}
	setup(t, s, want)
	for _, r := range []struct{ from, to int }{{200, 600}, {100, 500}, {0, 400}, {0, 600}} {
		for _, viaCursor := range []bool{false, true} {
			if !emptyPages(t, s, want["p"].(node), r.from, r.to, viaCursor) {
				return
			}
		}
	}
	expect(t, "after rolling back the deletes", s, want)

	update(t, s, func(tx kv.Tx) {
		b := bucketAt(t, tx, "p")
		for i := range 600 {
			must(t, "Delete", b.Delete([]byte(fmt.Sprintf("k%04d", i))))
		}
	})
	want["p"] = node{}
	expect(t, "every key deleted, committed", s, want)
}

// emptyPages deletes keys from to to-1 of bucket "p", which holds m, then
// reads it all in the same transaction, and rolls back. It returns false
// if a read hangs.
func emptyPages(t *testing.T, s kv.Store, m node, from, to int, viaCursor bool) bool {
	t.Helper()
	key := func(i int) string { return fmt.Sprintf("k%04d", i) }
	how := "Delete"
	if viaCursor {
		how = "Cursor.Delete"
	}
	where := fmt.Sprintf("keys %d to %d of %d deleted with %s in the same transaction", from, to-1, len(m), how)
	tx := begin(t, s, true)
	b := bucketAt(t, tx, "p")
	n := m.clone()
	if viaCursor {
		deleteWalk(t, where, b.Cursor(), n, []byte(key(from)), func(_ int, e pair) bool { return string(e.k) < key(to) })
	} else {
		for i := from; i < to; i++ {
			must(t, "Delete", b.Delete([]byte(key(i))))
			delete(n, key(i))
		}
	}
	es := n.entries()
	ok := guard(t, s, where, func() {
		checkWalk(t, where, b.Cursor(), es, false)
		checkWalk(t, where, b.Cursor(), es, true)
		c := b.Cursor()
		for _, probe := range []string{"k", key(from), key((from + to) / 2), key(to)} {
			i := seekIndex(es, []byte(probe))
			w := end
			if i < len(es) {
				w = es[i]
			}
			k, v := c.Seek([]byte(probe))
			at(t, where, fmt.Sprintf("Seek(%q)", probe), k, v, w)
			if k != nil {
				w = end
				if i > 0 {
					w = es[i-1]
				}
				k, v = c.Prev()
				at(t, where, fmt.Sprintf("Seek(%q), Prev", probe), k, v, w)
			}
		}
	})
	if !ok {
		return false
	}
	checkTxErr(t, where, tx)
	must(t, "Rollback", tx.Rollback())
	return true
}

// ---------------------------------------------------------------------------
// Transactions

func testRollback(t *testing.T, s kv.Store) {
	before := node{
		"keep": node{"a": []byte("1"), "b": []byte("2"), "n": node{"x": []byte("y"), "nn": node{"z": []byte("z")}}},
		"gone": node{"g": []byte("1"), "sub": node{"h": []byte("2")}},
	}
	setup(t, s, before)
	during := before.clone()
	keep := during["keep"].(node)
	keep["a"] = []byte("changed")
	delete(keep, "b")
	keep["c"] = []byte("new")
	delete(keep, "n")
	keep["m"] = node{"k": []byte("v")}
	delete(during, "gone")
	during["fresh"] = node{"inner": node{"q": []byte("r")}}

	tx := begin(t, s, true)
	defer func() { _ = tx.Rollback() }()
	b := bucketAt(t, tx, "keep")
	must(t, "Put", b.Put([]byte("a"), []byte("changed")))
	must(t, "Delete", b.Delete([]byte("b")))
	must(t, "Put", b.Put([]byte("c"), []byte("new")))
	must(t, "DeleteBucket", b.DeleteBucket([]byte("n")))
	build(t, b, b, node{"m": node{"k": []byte("v")}})
	must(t, "Tx.DeleteBucket", tx.DeleteBucket([]byte("gone")))
	build(t, tx, nil, node{"fresh": node{"inner": node{"q": []byte("r")}}})
	checkTree(t, "before Rollback", tx, during)
	checkTxErr(t, "before Rollback", tx)
	wantErr(t, "Rollback", tx.Rollback())
	expect(t, "after Rollback", s, before)

	// A rolled-back transaction leaves the store writable.
	update(t, s, func(tx kv.Tx) { must(t, "Put", bucketAt(t, tx, "keep").Put([]byte("after"), []byte("rollback"))) })
	before["keep"].(node)["after"] = []byte("rollback")
	expect(t, "a commit after a rollback", s, before)
}

func testCommit(t *testing.T, s kv.Store) {
	want := node{"c": node{"k": []byte("v"), "n": node{"x": []byte{}}}}
	tx := begin(t, s, true)
	defer func() { _ = tx.Rollback() }()
	build(t, tx, nil, want)
	b := bucketAt(t, tx, "c")
	checkTxErr(t, "before Commit", tx)
	wantErr(t, "Commit", tx.Commit())
	wantErr(t, "Rollback after Commit", tx.Rollback())
	wantErr(t, "Commit after Commit", tx.Commit(), kv.ErrTxClosed)
	_, err := tx.CreateBucket([]byte("late"))
	wantErr(t, "Tx.CreateBucket after Commit", err, kv.ErrTxClosed)
	wantErr(t, "Bucket.Put after Commit", b.Put([]byte("late"), []byte("x")), kv.ErrTxClosed)
	expect(t, "after Commit", s, want)

	// A second commit changes what the first wrote.
	update(t, s, func(tx kv.Tx) {
		b := bucketAt(t, tx, "c")
		must(t, "Delete", b.Delete([]byte("k")))
		must(t, "Put", b.Put([]byte("k2"), []byte("v2")))
		must(t, "Put", bucketAt(t, tx, "c", "n").Put([]byte("x"), []byte("not empty")))
	})
	c := want["c"].(node)
	delete(c, "k")
	c["k2"] = []byte("v2")
	c["n"].(node)["x"] = []byte("not empty")
	expect(t, "after a second Commit", s, want)

	// A read-only transaction rolls back; Rollback after that is the
	// caller's business, so it is not checked.
	rtx := begin(t, s, false)
	checkTree(t, "read-only", rtx, want)
	checkTxErr(t, "read-only", rtx)
	wantErr(t, "Rollback of a read-only transaction", rtx.Rollback())
}

func testReadOnly(t *testing.T, s kv.Store) {
	want := node{"r": node{"k": []byte("v"), "n": node{"x": []byte("y")}}}
	setup(t, s, want)
	view(t, s, func(tx kv.Tx) {
		if tx.Writable() {
			t.Errorf("Tx.Writable() = true in a read-only transaction")
		}
		b := bucketAt(t, tx, "r")
		if b.Writable() {
			t.Errorf("Bucket.Writable() = true in a read-only transaction")
		}
		n := bucketAt(t, tx, "r", "n")
		wantErr(t, "Put, read-only", b.Put([]byte("k"), []byte("w")), kv.ErrTxNotWritable)
		wantErr(t, "Put of a new key, read-only", b.Put([]byte("new"), []byte("w")), kv.ErrTxNotWritable)
		wantErr(t, "Put 2 deep, read-only", n.Put([]byte("x"), []byte("w")), kv.ErrTxNotWritable)
		wantErr(t, "Delete, read-only", b.Delete([]byte("k")), kv.ErrTxNotWritable)
		_, err := tx.CreateBucket([]byte("new"))
		wantErr(t, "Tx.CreateBucket, read-only", err, kv.ErrTxNotWritable)
		_, err = tx.CreateBucketIfNotExists([]byte("new"))
		wantErr(t, "Tx.CreateBucketIfNotExists of a missing bucket, read-only", err, kv.ErrTxNotWritable)
		_, err = b.CreateBucket([]byte("new"))
		wantErr(t, "CreateBucket, read-only", err, kv.ErrTxNotWritable)
		_, err = b.CreateBucketIfNotExists([]byte("new"))
		wantErr(t, "CreateBucketIfNotExists of a missing bucket, read-only", err, kv.ErrTxNotWritable)
		wantErr(t, "DeleteBucket, read-only", b.DeleteBucket([]byte("n")), kv.ErrTxNotWritable)
		wantErr(t, "Tx.DeleteBucket, read-only", tx.DeleteBucket([]byte("r")), kv.ErrTxNotWritable)
		c := b.Cursor()
		k, v := c.First()
		at(t, "read-only", "First", k, v, p("k", "v"))
		wantErr(t, "Cursor.Delete, read-only", c.Delete(), kv.ErrTxNotWritable)
		checkTree(t, "read-only, after refused writes", tx, want)
	})
	expect(t, "after a read-only transaction's refused writes", s, want)
	update(t, s, func(tx kv.Tx) {
		if !bucketAt(t, tx, "r", "n").Writable() {
			t.Errorf("Bucket.Writable() = false in a writable transaction")
		}
	})
}

// warm gives a page-based store free pages, so that a small write made
// while a read-only transaction is open need not grow its file (which
// bbolt cannot do under an open reader).
func warm(t tb, s kv.Store) {
	t.Helper()
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucket([]byte("kvtest.warm"))
		mustBucket(t, "CreateBucket", b, err)
		for i := range 16 {
			must(t, "Put", b.Put([]byte{byte(i)}, make([]byte, 64<<10)))
		}
	})
	update(t, s, func(tx kv.Tx) { must(t, "DeleteBucket", tx.DeleteBucket([]byte("kvtest.warm"))) })
}

// snapshotStates are the states before and after the concurrent write of
// testSnapshot and testReadDuringWrite.
func snapshotStates() (before, after node) {
	before = node{"s": node{
		"k1": []byte("old1"), "k2": []byte("old2"), "gone": []byte("x"),
		"nb": node{"in": []byte("old")},
	}}
	after = before.clone()
	a := after["s"].(node)
	a["k1"] = []byte("new1")
	delete(a, "gone")
	a["k3"] = []byte("new3")
	a["nb"].(node)["in"] = []byte("new")
	a["nb"].(node)["in2"] = []byte("new")
	after["s2"] = node{"x": node{"y": []byte("z")}}
	return before, after
}

// snapshotWrite makes the write, in tx.
func snapshotWrite(tx kv.Tx) error {
	b := tx.Bucket([]byte("s"))
	if b == nil {
		return errors.New(`Bucket("s") is nil`)
	}
	nb := b.Bucket([]byte("nb"))
	if nb == nil {
		return errors.New(`Bucket("s").Bucket("nb") is nil`)
	}
	s2, err := tx.CreateBucket([]byte("s2"))
	if err != nil {
		return fmt.Errorf("CreateBucket: %w", err)
	}
	x, err := s2.CreateBucket([]byte("x"))
	if err != nil {
		return fmt.Errorf("CreateBucket: %w", err)
	}
	for _, err := range []error{
		b.Put([]byte("k1"), []byte("new1")),
		b.Delete([]byte("gone")),
		b.Put([]byte("k3"), []byte("new3")),
		nb.Put([]byte("in"), []byte("new")),
		nb.Put([]byte("in2"), []byte("new")),
		x.Put([]byte("y"), []byte("z")),
	} {
		if err != nil {
			return err
		}
	}
	return tx.Err()
}

const waitConcurrent = 5 * time.Second

func testSnapshot(t *testing.T, s kv.Store) {
	before, after := snapshotStates()
	warm(t, s)
	setup(t, s, before)

	r := begin(t, s, false)
	readerOpen := true
	defer func() {
		if readerOpen {
			_ = r.Rollback()
		}
	}()
	checkTree(t, "reader, before the write", r, before)

	done := make(chan error, 1)
	go func() {
		tx, err := s.Begin(true)
		if err != nil {
			done <- fmt.Errorf("Begin(true): %w", err)
			return
		}
		if err := snapshotWrite(tx); err != nil {
			_ = tx.Rollback()
			done <- err
			return
		}
		done <- tx.Commit()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("writable transaction beside an open reader: %v", err)
		}
		checkTree(t, "read-only transaction begun before a write committed", r, before)
		checkTxErr(t, "reader", r)
		readerOpen = false
		must(t, "Rollback", r.Rollback())
	case <-time.After(waitConcurrent):
		t.Logf("a writable transaction did not commit within %v while a read-only one was open: the store serialises them, so only the reader's own view is checked", waitConcurrent)
		checkTree(t, "read-only transaction while a writer waits", r, before)
		checkTxErr(t, "reader", r)
		readerOpen = false
		must(t, "Rollback", r.Rollback())
		select {
		case err := <-done:
			must(t, "writable transaction after the reader ended", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("a writable transaction still waits 30s after the only read-only one ended")
		}
	}
	expect(t, "after the write committed", s, after)
}

func testReadDuringWrite(t *testing.T, s kv.Store) {
	before, after := snapshotStates()
	warm(t, s)
	setup(t, s, before)

	w := begin(t, s, true)
	writerOpen := true
	defer func() {
		if writerOpen {
			_ = w.Rollback()
		}
	}()
	if err := snapshotWrite(w); err != nil {
		t.Fatalf("write: %v", err)
	}
	checkTree(t, "the writer's own view", w, after)

	// A reader begun while the write is open must not see it.
	type read struct {
		tree node
		err  error
	}
	got := make(chan read, 1)
	go func() {
		tx, err := s.Begin(false)
		if err != nil {
			got <- read{err: fmt.Errorf("Begin(false): %w", err)}
			return
		}
		n := readTree(tx)
		err = tx.Err()
		if rerr := tx.Rollback(); err == nil {
			err = rerr
		}
		got <- read{n, err}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("read-only transaction beside an open writer: %v", r.err)
		}
		if d := diffTree(nil, before, r.tree); d != "" {
			t.Errorf("read-only transaction begun during an uncommitted write does not see the state before it: %s", d)
		}
		checkTxErr(t, "writer", w)
		writerOpen = false
		must(t, "Commit", w.Commit())
	case <-time.After(waitConcurrent):
		t.Logf("a read-only transaction did not begin within %v while a writable one was open: the store serialises them", waitConcurrent)
		checkTxErr(t, "writer", w)
		writerOpen = false
		must(t, "Commit", w.Commit())
		select {
		case r := <-got:
			must(t, "read-only transaction after the writer ended", r.err)
			// It began after the write, or waited and saw the state
			// before it: never anything in between.
			if diffTree(nil, before, r.tree) != "" {
				if d := diffTree(nil, after, r.tree); d != "" {
					t.Errorf("read-only transaction that waited for a writer sees neither the state before the write nor after it: against after: %s", d)
				}
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("a read-only transaction still waits 30s after the writable one ended")
		}
	}
	expect(t, "after the write committed", s, after)
}

func testClosedStore(t *testing.T, s kv.Store) {
	setup(t, s, node{"b": node{"k": []byte("v")}})
	wantErr(t, "Store.Close", s.Close())
	for _, writable := range []bool{false, true} {
		tx, err := s.Begin(writable)
		if err == nil {
			_ = tx.Rollback()
		}
		wantErr(t, fmt.Sprintf("Begin(%v) on a closed store", writable), err, kv.ErrTxClosed)
	}
}

// ---------------------------------------------------------------------------
// Volume

func testManyKeys(t *testing.T, s kv.Store) {
	n := 5000
	if !testkit.Long() {
		n = 1000
	}
	r := rand.New(rand.NewPCG(5000, 1))
	m := node{}
	var order [][]byte
	for len(order) < n {
		k := make([]byte, 16)
		for i := range k {
			k[i] = byte(r.Uint32())
		}
		if _, dup := m[string(k)]; dup {
			continue
		}
		v := make([]byte, r.IntN(40))
		for i := range v {
			v[i] = byte(r.Uint32())
		}
		if len(order)%97 == 0 {
			v = []byte{}
		}
		m[string(k)] = v
		order = append(order, k)
	}
	update(t, s, func(tx kv.Tx) {
		b, err := tx.CreateBucket([]byte("many"))
		mustBucket(t, "CreateBucket", b, err)
		b.SetFillPercent(0.5) // keys arrive anywhere
		for _, k := range order {
			must(t, "Put", b.Put(k, bytes.Clone(m[string(k)].([]byte))))
		}
	})
	check := func(where string) {
		view(t, s, func(tx kv.Tx) {
			b := bucketAt(t, tx, "many")
			es := m.entries()
			if !checkWalk(t, where, b.Cursor(), es, false) || !checkWalk(t, where, b.Cursor(), es, true) {
				return
			}
			for _, e := range es {
				if got := b.Get(e.k); !sameValue(got, e.v) {
					t.Errorf("%s: Get(%s) = %s, want %s", where, fmtKey(e.k), fmtVal(got), fmtVal(e.v))
					return
				}
			}
			c := b.Cursor()
			for range 300 {
				probe := make([]byte, 1+r.IntN(16))
				for i := range probe {
					probe[i] = byte(r.Uint32())
				}
				i := seekIndex(es, probe)
				k, v := c.Seek(probe)
				w := end
				if i < len(es) {
					w = es[i]
				}
				at(t, where, fmt.Sprintf("Seek(%s)", fmtKey(probe)), k, v, w)
				if k != nil {
					k, v = c.Next()
					w = end
					if i+1 < len(es) {
						w = es[i+1]
					}
					at(t, where, fmt.Sprintf("Seek(%s), Next", fmtKey(probe)), k, v, w)
				}
			}
		})
	}
	check(fmt.Sprintf("%d keys", n))

	update(t, s, func(tx kv.Tx) {
		b := bucketAt(t, tx, "many")
		for i, k := range order {
			if i%3 == 0 {
				must(t, "Delete", b.Delete(k))
				delete(m, string(k))
			}
		}
	})
	check(fmt.Sprintf("%d keys, a third deleted", n))
}

func testLargeValues(t *testing.T, s kv.Store) {
	sizes := []int{0, 1, 255, 4095, 4096, 4097, 10000, 32768, 65535, 65536}
	value := func(size, seed int) []byte {
		v := make([]byte, size)
		for i := range v {
			v[i] = byte((i*31 + seed) % 251)
		}
		return v
	}
	m := node{}
	nested := node{}
	for i, size := range sizes {
		m[fmt.Sprintf("v%06d", size)] = value(size, i)
	}
	nested["big"] = value(64<<10, 7)
	m["nested"] = nested
	want := node{"large": m}
	update(t, s, func(tx kv.Tx) {
		build(t, tx, nil, want)
		checkTree(t, "large values, in their transaction", tx, want)
	})
	expect(t, "large values, committed", s, want)

	// Overwrite small with large and large with small.
	update(t, s, func(tx kv.Tx) {
		b := bucketAt(t, tx, "large")
		for i, size := range sizes {
			k := fmt.Sprintf("v%06d", size)
			v := value(sizes[len(sizes)-1-i], i+100)
			m[k] = v
			must(t, "Put", b.Put([]byte(k), bytes.Clone(v)))
		}
		checkTree(t, "large values overwritten, in their transaction", tx, want)
	})
	expect(t, "large values overwritten, committed", s, want)
}

// ---------------------------------------------------------------------------
// The model-based test

// The model-based test runs random transactions over two levels of buckets
// with a few names each, so that keys collide, values and buckets swap
// places and buckets empty and fill, and compares every read with a plain
// in-memory tree: the state the open transaction should see, and a copy of
// the last committed one for rollbacks.
var (
	modelTop   = []string{"a", "b"}
	modelKeys  = []string{"\x00", "\x00\x00", "\x01", "a", "a\x00", "b", "\x80", "\xff"}
	modelSeeks = append(slices.Clone(modelKeys), "", "\x00\x00\x00", "\x7f", "a\x00\x00", "c", "\xff\xff")
	// Operation names, repeated to weight them, and mixed because rapid
	// draws the first ones a little more often.
	modelOps = []string{
		"put", "walk", "cursorDelete", "delete", "seek", "createBucket",
		"put", "get", "deleteBucket", "put", "walk", "commit",
		"createBucket", "seek", "delete", "put", "rollback", "cursorDelete",
	}
)

type model struct {
	t         *rapid.T
	s         kv.Store
	tx        kv.Tx // nil between transactions
	writable  bool
	cur       node // what tx should see
	committed node // what the store holds
}

func testModel(t *testing.T, s kv.Store) {
	maxSteps := 100
	if !testkit.Long() {
		maxSteps = 20
	}
	rapid.Check(t, func(rt *rapid.T) {
		m := &model{t: rt, s: s}
		defer m.abandon()
		m.reset()
		m.begin()
		steps := rapid.IntRange(1, maxSteps).Draw(rt, "steps")
		for range steps {
			switch op := rapid.SampledFrom(modelOps).Draw(rt, "op"); op {
			case "put":
				m.put()
			case "delete":
				m.delete()
			case "get":
				m.get()
			case "createBucket":
				m.createBucket()
			case "deleteBucket":
				m.deleteBucket()
			case "walk":
				m.walk()
			case "seek":
				m.seek()
			case "cursorDelete":
				m.cursorDelete()
			case "commit":
				m.end(true)
				m.begin()
			case "rollback":
				m.end(false)
				m.begin()
			default:
				rt.Fatalf("kvtest: unknown model operation %q", op)
			}
			if rt.Failed() {
				rt.FailNow()
			}
		}
		m.end(rapid.Bool().Draw(rt, "commit at the end"))
		view(rt, s, func(tx kv.Tx) { checkTree(rt, "the store at the end", tx, m.committed) })
	})
}

// reset empties the store, which the checks share, and commits a random
// first state into it.
func (m *model) reset() {
	m.committed = m.drawTree()
	update(m.t, m.s, func(tx kv.Tx) {
		var names [][]byte
		c := tx.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			names = append(names, bytes.Clone(k))
		}
		for _, name := range names {
			must(m.t, fmt.Sprintf("reset: Tx.DeleteBucket(%s)", fmtKey(name)), tx.DeleteBucket(name))
		}
		build(m.t, tx, nil, m.committed)
	})
}

// drawTree draws a first state, so that the operations find buckets and
// keys to work on from the start.
func (m *model) drawTree() node {
	root := node{}
	for _, top := range modelTop {
		kinds := rapid.SliceOfN(rapid.IntRange(0, 3), len(modelKeys), len(modelKeys)).
			Draw(m.t, fmt.Sprintf("first state of %q (per key, 0: none, 1: empty value, 2: value, 3: bucket)", top))
		if kinds[0] == 0 && kinds[1] == 0 {
			continue // no bucket
		}
		b := node{}
		for i, k := range modelKeys {
			switch kinds[i] {
			case 1:
				b[k] = []byte{}
			case 2:
				b[k] = []byte("first " + k)
			case 3:
				sub := node{}
				has := rapid.SliceOfN(rapid.Bool(), len(modelKeys), len(modelKeys)).
					Draw(m.t, fmt.Sprintf("first state of %q/%q (per key)", top, k))
				for j, k2 := range modelKeys {
					if has[j] {
						sub[k2] = []byte("first " + k2)
					}
				}
				b[k] = sub
			}
		}
		root[top] = b
	}
	return root
}

// drawValue draws a value, possibly empty, never nil.
func (m *model) drawValue() []byte {
	return append([]byte{}, rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(m.t, "value")...)
}

// begin starts a transaction, mostly a writable one, and checks all it
// sees.
func (m *model) begin() {
	m.writable = rapid.IntRange(0, 4).Draw(m.t, "writable (0: read-only)") != 0
	m.t.Logf("Begin(%v)", m.writable)
	m.tx = begin(m.t, m.s, m.writable)
	m.cur = m.committed.clone()
	checkTree(m.t, fmt.Sprintf("a new transaction (writable %v)", m.writable), m.tx, m.cur)
}

// end commits or rolls back the transaction.
func (m *model) end(commit bool) {
	checkTxErr(m.t, "before the end of the transaction", m.tx)
	tx := m.tx
	m.tx = nil
	if commit && m.writable {
		m.t.Logf("Commit")
		must(m.t, "Commit", tx.Commit())
		m.committed = m.cur
	} else {
		m.t.Logf("Rollback")
		must(m.t, "Rollback", tx.Rollback())
	}
	m.cur = nil
}

// abandon rolls back a transaction a failed check left open, so that the
// next check can write.
func (m *model) abandon() {
	if m.tx != nil {
		_ = m.tx.Rollback()
		m.tx = nil
	}
}

// drawPath draws the path of a bucket between levels min and max (0: the
// top level).
func (m *model) drawPath(min, max int) []string {
	level := rapid.IntRange(min, max).Draw(m.t, "level")
	var path []string
	if level >= 1 {
		path = append(path, rapid.SampledFrom(modelTop).Draw(m.t, "bucket"))
	}
	if level >= 2 {
		path = append(path, rapid.SampledFrom(modelKeys).Draw(m.t, "nested bucket"))
	}
	return path
}

// drawName draws a key for the bucket at path: a top-level name or a key.
func (m *model) drawName(path []string, label string) string {
	if len(path) == 0 {
		return rapid.SampledFrom(modelTop).Draw(m.t, label)
	}
	return rapid.SampledFrom(modelKeys).Draw(m.t, label)
}

// lookup returns the bucket at path (p is the Tx at the top level, and b
// nil) and its model, checking that the store and the model agree on its
// existence; ok is false if there is no bucket there.
func (m *model) lookup(path []string) (p bucketParent, b kv.Bucket, n node, ok bool) {
	p, n = m.tx, m.cur
	for i, name := range path {
		nb := p.Bucket([]byte(name))
		sub, isBucket := n[name].(node)
		if isBucket != (nb != nil) {
			got := "nil"
			if nb != nil {
				got = "a bucket"
			}
			m.t.Fatalf("Bucket %s = %s, want %s", fmtPath(path[:i+1]), got, describe(n[name]))
		}
		if !isBucket {
			return nil, nil, nil, false
		}
		p, b, n = nb, nb, sub
	}
	return p, b, n, true
}

// result checks err against accept, where a nil entry accepts success, and
// reports whether the operation succeeded.
func (m *model) result(what string, err error, accept ...error) bool {
	m.t.Helper()
	for _, a := range accept {
		if (a == nil && err == nil) || (a != nil && errors.Is(err, a)) {
			return err == nil
		}
	}
	var names []string
	for _, a := range accept {
		if a == nil {
			names = append(names, "success")
		} else {
			names = append(names, fmt.Sprintf("%q", a))
		}
	}
	m.t.Errorf("%s (writable %v): got error %v, want %s", what, m.writable, err, strings.Join(names, " or "))
	return false
}

// valueOp is the outcome the model expects of a Put or Delete on a key
// holding e.
func (m *model) valueOp(e any) []error {
	_, isBucket := e.(node)
	switch {
	case !m.writable && isBucket:
		return []error{kv.ErrTxNotWritable, kv.ErrIncompatibleValue}
	case !m.writable:
		return []error{kv.ErrTxNotWritable}
	case isBucket:
		return []error{kv.ErrIncompatibleValue}
	}
	return []error{nil}
}

func (m *model) put() {
	path := m.drawPath(1, 2)
	key := m.drawName(path, "key")
	val := m.drawValue()
	m.t.Logf("%s: Put(%q, %q)", fmtPath(path), key, val)
	_, b, n, ok := m.lookup(path)
	if !ok {
		return
	}
	what := fmt.Sprintf("%s: Put(%q) on %s", fmtPath(path), key, describe(n[key]))
	if m.result(what, b.Put([]byte(key), val), m.valueOp(n[key])...) {
		n[key] = bytes.Clone(val)
	}
}

func (m *model) delete() {
	path := m.drawPath(1, 2)
	key := m.drawName(path, "key")
	m.t.Logf("%s: Delete(%q)", fmtPath(path), key)
	_, b, n, ok := m.lookup(path)
	if !ok {
		return
	}
	what := fmt.Sprintf("%s: Delete(%q) of %s", fmtPath(path), key, describe(n[key]))
	if m.result(what, b.Delete([]byte(key)), m.valueOp(n[key])...) {
		delete(n, key)
	}
}

func (m *model) get() {
	path := m.drawPath(1, 2)
	key := m.drawName(path, "key")
	m.t.Logf("%s: Get(%q)", fmtPath(path), key)
	_, b, n, ok := m.lookup(path)
	if !ok {
		return
	}
	want, _ := n[key].([]byte)
	checkGet(m.t, fmtPath(path), b, []byte(key), want)
	_, isBucket := n[key].(node)
	if got := b.Bucket([]byte(key)) != nil; got != isBucket {
		m.t.Errorf("%s: Bucket(%q) != nil is %v, want %v (the key holds %s)", fmtPath(path), key, got, isBucket, describe(n[key]))
	}
}

func (m *model) createBucket() {
	path := m.drawPath(0, 1)
	name := m.drawName(path, "name")
	ifNotExists := rapid.Bool().Draw(m.t, "if not exists")
	op := "CreateBucket"
	if ifNotExists {
		op = "CreateBucketIfNotExists"
	}
	m.t.Logf("%s: %s(%q)", fmtPath(path), op, name)
	p, _, n, ok := m.lookup(path)
	if !ok {
		return
	}
	e := n[name]
	var nb kv.Bucket
	var err error
	if ifNotExists {
		nb, err = p.CreateBucketIfNotExists([]byte(name))
	} else {
		nb, err = p.CreateBucket([]byte(name))
	}
	var accept []error
	sub, isBucket := e.(node)
	switch {
	case e == nil:
		accept = []error{nil}
	case !isBucket:
		accept = []error{kv.ErrIncompatibleValue}
	case ifNotExists:
		accept = []error{nil}
	default:
		accept = []error{kv.ErrBucketExists}
	}
	if !m.writable {
		if e == nil {
			accept = nil
		}
		accept = append(accept, kv.ErrTxNotWritable)
	}
	what := fmt.Sprintf("%s: %s(%q) on %s", fmtPath(path), op, name, describe(e))
	if !m.result(what, err, accept...) {
		return
	}
	if nb == nil {
		m.t.Fatalf("%s: returned a nil bucket and no error", what)
	}
	bpath := append(slices.Clip(path), name)
	if e == nil {
		sub = node{}
		n[name] = sub
	}
	checkBucket(m.t, "the bucket "+op+" returned", bpath, nb, sub)
	if p.Bucket([]byte(name)) == nil {
		m.t.Errorf("%s: Bucket(%q) = nil after %s", fmtPath(path), name, op)
	}
}

func (m *model) deleteBucket() {
	path := m.drawPath(0, 1)
	name := m.drawName(path, "name")
	m.t.Logf("%s: DeleteBucket(%q)", fmtPath(path), name)
	p, _, n, ok := m.lookup(path)
	if !ok {
		return
	}
	e := n[name]
	var accept []error
	switch e.(type) {
	case node:
		accept = []error{nil}
	case []byte:
		// The contract leaves open which of the two this is.
		accept = []error{kv.ErrBucketNotFound, kv.ErrIncompatibleValue}
	default:
		accept = []error{kv.ErrBucketNotFound}
	}
	if !m.writable {
		if _, isBucket := e.(node); isBucket {
			accept = nil
		}
		accept = append(accept, kv.ErrTxNotWritable)
	}
	what := fmt.Sprintf("%s: DeleteBucket(%q) of %s", fmtPath(path), name, describe(e))
	if !m.result(what, p.DeleteBucket([]byte(name)), accept...) {
		return
	}
	delete(n, name)
	if p.Bucket([]byte(name)) != nil {
		m.t.Errorf("%s: Bucket(%q) is not nil after DeleteBucket", fmtPath(path), name)
	}
}

func (m *model) walk() {
	path := m.drawPath(0, 2)
	reverse := rapid.Bool().Draw(m.t, "reverse")
	m.t.Logf("%s: walk (reverse %v)", fmtPath(path), reverse)
	p, _, n, ok := m.lookup(path)
	if !ok {
		return
	}
	checkWalk(m.t, fmtPath(path), p.Cursor(), n.entries(), reverse)
}

func (m *model) seek() {
	path := m.drawPath(0, 2)
	probe := rapid.SampledFrom(modelSeeks).Draw(m.t, "seek")
	moves := rapid.SliceOfN(rapid.Bool(), 0, 4).Draw(m.t, "moves (true: Next, false: Prev)")
	m.t.Logf("%s: Seek(%q) then %v", fmtPath(path), probe, moves)
	p, _, n, ok := m.lookup(path)
	if !ok {
		return
	}
	es := n.entries()
	want := func(i int) pair {
		if i < 0 || i >= len(es) {
			return end
		}
		return es[i]
	}
	c := p.Cursor()
	i := seekIndex(es, []byte(probe))
	k, v := c.Seek([]byte(probe))
	move := fmt.Sprintf("Seek(%q)", probe)
	at(m.t, fmtPath(path), move, k, v, want(i))
	for _, next := range moves {
		if i < 0 || i >= len(es) {
			return // what a move past an end does next is left open
		}
		if next {
			i++
			k, v = c.Next()
			move += ", Next"
		} else {
			i--
			k, v = c.Prev()
			move += ", Prev"
		}
		at(m.t, fmtPath(path), move, k, v, want(i))
	}
}

func (m *model) cursorDelete() {
	path := m.drawPath(0, 2)
	var from []byte
	if rapid.Bool().Draw(m.t, "from a seek") {
		from = []byte(rapid.SampledFrom(modelSeeks).Draw(m.t, "seek"))
	}
	m.t.Logf("%s: walk from %s deleting with the cursor", fmtPath(path), fmtKey(from))
	p, _, n, ok := m.lookup(path)
	if !ok {
		return
	}
	deleteWalkIn(m.t, fmtPath(path), m.writable, p.Cursor(), n, from, func(_ int, e pair) bool {
		del := rapid.Bool().Draw(m.t, "delete "+fmtKey(e.k))
		if del {
			m.t.Logf("  Cursor.Delete on %s", fmtKey(e.k))
		}
		return del
	})
}
