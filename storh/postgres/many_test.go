package postgres

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/kv"
)

// A Pipeline of reads of several buckets is one round trip, with BEGIN,
// the locks on the buckets and their buffered writes; beside another
// transaction its locking reads skip or wait for that one's rows, as
// LockRange and LockKeys do.
func TestPipeline(t *testing.T) {
	s, rt := openCounted(t, pgtest.URL(t))
	fill(t, s, "p", 10)
	fill(t, s, "q", 10)

	t1 := begin(t, s, true).(kv.Locker)
	defer t1.Rollback()
	t1.BucketShared([]byte("p")) // the buckets' subtrees cached: t2 looks them up with its first statement
	held := &kv.Read{Bucket: t1.BucketShared([]byte("q")), Op: kv.LockRange, From: key(2), To: key(4), N: 10}
	kv.Pipeline(t1, held)
	must(t, t1.Err())

	// A second connection, made now: a new one reads its backend's start
	// as it connects, a round trip of its own.
	warm := begin(t, s, false)
	warm.Bucket([]byte("p")).Get(key(1))
	must(t, warm.Rollback())

	before := rt.n.Load()
	t2 := begin(t, s, true).(kv.Locker)
	defer t2.Rollback()
	p, q := t2.BucketShared([]byte("p")), t2.BucketShared([]byte("q"))
	must(t, p.Put(key(1), []byte("mine")))
	must(t, q.Delete(key(5)))
	ranged := &kv.Read{Bucket: q, Op: kv.LockRange, From: key(1), N: 3}
	tried := &kv.Read{Bucket: q, Op: kv.TryKeys, Keys: [][]byte{key(3), key(7), key(99)}}
	got := &kv.Read{Bucket: p, Op: kv.Get, Keys: [][]byte{key(1), key(2), key(99)}}
	none := &kv.Read{Bucket: p, Op: kv.LockKeys} // no keys: no statement
	kv.Pipeline(t2, ranged, tried, got, none)
	must(t, t2.Err())
	if n := rt.n.Load() - before; n != 1 {
		t.Errorf("the pipeline took %d round trips, want 1", n)
	}
	// t2 skips 2 and 3, which t1 holds, and its own delete of 5.
	if want := [][]byte{key(1), key(4), key(6)}; !slices.EqualFunc(ranged.Found, want, bytes.Equal) || string(ranged.Values[1]) != "v4" {
		t.Errorf("LockRange from 1 beside t1's locks: %x %q", ranged.Found, ranged.Values)
	}
	if v := tried.Values; len(v) != 3 || v[0] != nil || string(v[1]) != "v7" || v[2] != nil {
		t.Errorf("TryKeys(3, 7, 99) beside t1's lock of 3: %q", v)
	}
	if v := got.Values; len(v) != 3 || string(v[0]) != "mine" || string(v[1]) != "v2" || v[2] != nil {
		t.Errorf("Get(1, 2, 99) after a put of 1: %q", v)
	}
	if len(none.Values) != 0 {
		t.Errorf("LockKeys of no keys: %q", none.Values)
	}

	// LockKeys waits for t1, and reads what it committed.
	must(t, t1.Bucket([]byte("q")).Put(key(2), []byte("new")))
	waited := &kv.Read{Bucket: q, Op: kv.LockKeys, Keys: [][]byte{key(2)}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		kv.Pipeline(t2, waited)
	}()
	waitForRowLockWaiters(t, s, 1)
	commit(t, t1)
	<-done
	must(t, t2.Err())
	if v := waited.Values; len(v) != 1 || string(v[0]) != "new" {
		t.Errorf("LockKeys after the holder committed: %q", v)
	}
	commit(t, t2)
}

// Range reads in a row in a Pipeline go as one statement, and each
// answers as it would alone: after the buffered writes of its buckets,
// skipping the rows another transaction holds, following its values.
func TestPipelineRanges(t *testing.T) {
	s, rt := openCounted(t, pgtest.URL(t))
	fill(t, s, "q", 10)
	tx := begin(t, s, true)
	ix := create(t, tx, "ix") // key(i) → key(i) of q
	for i := range 10 {
		must(t, ix.Put(key(i), key(i)))
	}
	commit(t, tx)

	t1 := begin(t, s, true).(kv.Locker)
	defer t1.Rollback()
	kv.Pipeline(t1, &kv.Read{Bucket: t1.BucketShared([]byte("q")), Op: kv.LockRange, From: key(2), To: key(4), N: 10},
		&kv.Read{Bucket: t1.BucketShared([]byte("ix")), Op: kv.LockKeys, Keys: [][]byte{key(5)}})
	must(t, t1.Err())

	t2 := begin(t, s, true).(kv.Locker)
	defer t2.Rollback()
	q, x := t2.BucketShared([]byte("q")), t2.BucketShared([]byte("ix"))
	must(t, q.Put(key(4), []byte("mine")))
	must(t, x.Delete(key(7)))
	indexed := &kv.Read{Bucket: x, Op: kv.LockRange, From: key(3), N: 4, Follow: []kv.Follow{{Bucket: q}}}
	ranged := &kv.Read{Bucket: q, Op: kv.LockRange, To: key(6), N: 10}
	none := &kv.Read{Bucket: q, Op: kv.LockRange, From: key(100), N: 10, Follow: []kv.Follow{{Bucket: x}, {Bucket: q}}}
	sqls := rt.record(func() { kv.Pipeline(t2, indexed, ranged, none) })
	must(t, t2.Err())
	ranges := 0
	for _, sql := range sqls {
		ranges += strings.Count(sql, "SKIP LOCKED")
		if strings.Contains(sql, "SKIP LOCKED") && !strings.Contains(sql, "UNION ALL") {
			t.Errorf("a range read alone: %s", sql)
		}
	}
	if ranges != 3 {
		t.Errorf("the pipeline's statements hold %d range reads, want 3:\n%s", ranges, strings.Join(sqls, "\n"))
	}
	// ix skips 5, which t1 holds, and its own delete of 7; q skips 2 and
	// 3, which t1 holds, and finds its own put of 4.
	keys := func(is ...int) [][]byte {
		out := make([][]byte, len(is))
		for j, i := range is {
			out[j] = key(i)
		}
		return out
	}
	if want := keys(3, 4, 6, 8); !slices.EqualFunc(indexed.Found, want, bytes.Equal) ||
		!slices.EqualFunc(indexed.Followed[0], [][]byte{[]byte("v3"), []byte("mine"), []byte("v6"), []byte("v8")}, bytes.Equal) {
		t.Errorf("LockRange of ix from 3 following into q: %x → %q", indexed.Found, indexed.Followed)
	}
	if want := keys(0, 1, 4, 5); !slices.EqualFunc(ranged.Found, want, bytes.Equal) ||
		!slices.EqualFunc(ranged.Values, [][]byte{[]byte("v0"), []byte("v1"), []byte("mine"), []byte("v5")}, bytes.Equal) {
		t.Errorf("LockRange of q to 6: %x → %q", ranged.Found, ranged.Values)
	}
	if len(none.Found) != 0 || len(none.Followed) != 2 || len(none.Followed[0]) != 0 || len(none.Followed[1]) != 0 {
		t.Errorf("LockRange past q's end: %x, followed %q", none.Found, none.Followed)
	}
	commit(t, t2)
}
