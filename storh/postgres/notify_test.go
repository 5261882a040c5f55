package postgres

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/kv"
)

// openURL opens a store at url, closed when t ends.
func openURL(t testing.TB, url string) *Store {
	t.Helper()
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// listen collects a store's notices until the test ends.
func listen(t *testing.T, s *Store) (<-chan kv.Notice, kv.Listener) {
	t.Helper()
	ch := make(chan kv.Notice, 1024)
	l, err := s.Listen(func(n kv.Notice, err error) bool {
		if err != nil {
			t.Errorf("listener: %v", err)
			return false
		}
		ch <- n
		return true
	})
	must(t, err)
	t.Cleanup(l.Stop)
	return ch, l
}

func next(t *testing.T, ch <-chan kv.Notice) kv.Notice {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no notice came")
	}
	return kv.Notice{}
}

// Notices arrive after their commits, in commit order, with the writer's
// origin and every key announced (a long list split over notifications);
// a rollback announces nothing.
func TestNotices(t *testing.T) {
	url := pgtest.URL(t)
	reader, writer := openURL(t, url), openURL(t, url)
	ch, _ := listen(t, reader)
	if reader.Origin() == writer.Origin() {
		t.Fatal("two stores share an origin")
	}

	tx := begin(t, writer, true).(kv.SharedTx)
	b := create(t, tx, "b")
	must(t, b.Put([]byte("k"), []byte("v")))
	tx.Announce("topic a", []byte("k1"))
	tx.Announce("topic b", []byte("k2"))
	tx.Announce("topic a", []byte("k3"))
	commit(t, tx)
	first := tx.CommitID()

	tx = begin(t, writer, true).(kv.SharedTx)
	must(t, tx.Bucket([]byte("b")).Put([]byte("k"), []byte("w")))
	tx.Announce("topic a", []byte("gone"))
	must(t, tx.Rollback())

	// 1,000 keys of 16 bytes cannot go in one 8000-byte payload.
	tx = begin(t, writer, true).(kv.SharedTx)
	must(t, tx.Bucket([]byte("b")).Put([]byte("k"), []byte("x")))
	var many [][]byte
	for i := range 1000 {
		k := fmt.Appendf(nil, "%016d", i)
		many = append(many, k)
		tx.Announce("big", k)
	}
	commit(t, tx)
	second := tx.CommitID()
	if second <= first {
		t.Errorf("commit ids %d then %d do not grow", first, second)
	}

	a, bn := next(t, ch), next(t, ch)
	if a.Topic != "topic a" || bn.Topic != "topic b" || a.Commit != first || bn.Commit != first || a.Origin != writer.Origin() {
		t.Fatalf("first notices %+v, %+v", a, bn)
	}
	if len(a.Keys) != 2 || string(a.Keys[0]) != "k1" || string(a.Keys[1]) != "k3" || string(bn.Keys[0]) != "k2" {
		t.Fatalf("first notices' keys %q, %q", a.Keys, bn.Keys)
	}
	var got [][]byte
	parts := 0
	for len(got) < len(many) {
		n := next(t, ch)
		if n.Topic != "big" || n.Commit != second {
			t.Fatalf("notice %+v, want the second commit's (the rolled-back one sent none)", n)
		}
		got = append(got, n.Keys...)
		parts++
	}
	if parts < 2 {
		t.Errorf("1,000 keys came in %d notification", parts)
	}
	for i := range many {
		if !bytes.Equal(got[i], many[i]) {
			t.Fatalf("key %d is %q, want %q", i, got[i], many[i])
		}
	}
	select {
	case n := <-ch:
		t.Fatalf("unexpected notice %+v", n)
	case <-time.After(100 * time.Millisecond):
	}
}

// A read-only transaction's snapshot, taken by its first read, holds the
// commits before that read, and not one that commits after it.
func TestSees(t *testing.T) {
	s := openStore(t)
	announce := func(tx kv.Tx) uint64 {
		st := tx.(kv.SharedTx)
		must(t, tx.Bucket([]byte("b")).Put([]byte("k"), []byte("v")))
		st.Announce("t", []byte("k"))
		commit(t, tx)
		return st.CommitID()
	}
	tx := begin(t, s, true)
	create(t, tx, "b")
	commit(t, tx)
	before := announce(begin(t, s, true))

	inFlight := begin(t, s, true)
	must(t, inFlight.Bucket([]byte("b")).Put([]byte("x"), []byte("1"))) // not sent yet

	r := begin(t, s, false).(kv.SharedTx)
	defer r.Rollback()
	// The first read takes the snapshot (the lookup comes from the cache).
	if b := r.Bucket([]byte("b")); b == nil || b.Get([]byte("k")) == nil {
		t.Fatal(r.Err())
	}
	during := announce(inFlight)
	after := announce(begin(t, s, true))
	if !r.Sees(before) {
		t.Errorf("the snapshot lacks commit %d from before it", before)
	}
	if r.Sees(during) || r.Sees(after) {
		t.Errorf("the snapshot holds commits %d/%d made after it began: %v %v", during, after, r.Sees(during), r.Sees(after))
	}
	r2 := begin(t, s, false).(kv.SharedTx)
	defer r2.Rollback()
	r2.Bucket([]byte("b"))
	if !r2.Sees(during) || !r2.Sees(after) {
		t.Error("a later snapshot lacks the earlier commits")
	}

	// Before any read, Sees takes the snapshot itself; its answers hold
	// after the transaction ends.
	r3 := begin(t, s, false).(kv.SharedTx)
	if !r3.Sees(after) {
		t.Error("a snapshot taken by Sees lacks a commit from before it")
	}
	later := announce(begin(t, s, true))
	if r3.Sees(later) {
		t.Errorf("a snapshot taken by Sees holds commit %d made after it", later)
	}
	must(t, r3.Rollback())
	if !r3.Sees(after) || r3.Sees(later) {
		t.Error("Sees changed its answers once the transaction ended")
	}
}

func TestParseSnapshot(t *testing.T) {
	for _, tc := range []struct {
		text string
		in   []uint64
		out  []uint64
	}{
		{"10:10:", []uint64{1, 9}, []uint64{10, 11}},
		{"10:20:12,15", []uint64{9, 10, 11, 13, 19}, []uint64{12, 15, 20, 21}},
	} {
		s, err := parseSnapshot(tc.text)
		must(t, err)
		for _, x := range tc.in {
			if !s.holds(x) {
				t.Errorf("%s does not hold %d", tc.text, x)
			}
		}
		for _, x := range tc.out {
			if s.holds(x) {
				t.Errorf("%s holds %d", tc.text, x)
			}
		}
	}
	for _, bad := range []string{"", "1:2", "a:2:", "1:b:", "1:2:x"} {
		if _, err := parseSnapshot(bad); err == nil {
			t.Errorf("parseSnapshot(%q) succeeded", bad)
		}
	}
	for _, bad := range []string{"", "x 1 a2I other", "0000000000000001 x a2I t", "0000000000000001 1 z t", "0000000000000001 1 a!b t", "0000000000000001 1 a2I"} {
		if _, err := parseNotice(bad); err == nil {
			t.Errorf("parseNotice(%q) succeeded", bad)
		}
	}

}

// write puts k into top-level bucket name (created if missing) and
// announces it under name, in one transaction.
func write(t *testing.T, s *Store, name, k string) {
	t.Helper()
	tx := begin(t, s, true).(kv.SharedTx)
	b, err := tx.CreateBucketIfNotExists([]byte(name))
	must(t, err)
	must(t, b.Put([]byte(k), []byte("v")))
	tx.Announce(name, []byte(k))
	commit(t, tx)
}

// Writers announce under a bucket's name only while a listener watches
// it, and Watch waits for a writer that found nobody watching to end.
func TestWatchQuiet(t *testing.T) {
	url := pgtest.URL(t)
	reader, writer := openURL(t, url), openURL(t, url)
	ch, l := listen(t, reader)
	must(t, l.Watch("w"))

	// Notices come in commit order: "u"'s would come before "w"'s.
	write(t, writer, "u", "u1")
	write(t, writer, "w", "w1")
	if n := next(t, ch); n.Topic != "w" || string(n.Keys[0]) != "w1" {
		t.Fatalf("notice %q %q; want w1 alone (nobody watches u)", n.Topic, n.Keys)
	}

	// A writer of u that found nobody watching holds Watch("u") back
	// until it commits; after that, u's writes are announced.
	held := begin(t, writer, true)
	must(t, held.Bucket([]byte("u")).Put([]byte("u2"), []byte("v")))
	held.(kv.SharedTx).Announce("u", []byte("u2"))
	watched := make(chan error, 1)
	go func() { watched <- l.Watch("u") }()
	waitForLockWaiters(t, reader, 1)
	select {
	case err := <-watched:
		t.Fatalf("Watch returned (%v) while a writer that found nobody watching was open", err)
	default:
	}
	commit(t, held)
	must(t, <-watched)
	write(t, writer, "u", "u3")
	if n := next(t, ch); n.Topic != "u" || string(n.Keys[0]) != "u3" {
		t.Fatalf("notice %q %q; want u3 (u2's writer found nobody watching)", n.Topic, n.Keys)
	}

	// After Unwatch, w is quiet again (the Watch of x after it is
	// handled after it, in order).
	l.Unwatch("w")
	must(t, l.Watch("x"))
	write(t, writer, "w", "w2")
	write(t, writer, "u", "u4")
	if n := next(t, ch); n.Topic != "u" || string(n.Keys[0]) != "u4" {
		t.Fatalf("notice %q %q; want u4 (nobody watches w any more)", n.Topic, n.Keys)
	}
}

// A writer that holds a bucket shared drops its notices when nobody
// watches, as one that holds it alone does (PostgreSQL makes notifying
// commits take turns), and sends them while someone watches, even when
// other shared writers hold the bucket at the same time.
func TestSharedWriterQuiet(t *testing.T) {
	url := pgtest.URL(t)
	s := openURL(t, url)
	fill(t, s, "b", 1)
	raw, err := pgx.Connect(ctx, url)
	must(t, err)
	defer raw.Close(ctx)
	_, err = raw.Exec(ctx, "LISTEN "+pgx.Identifier{channel(s.schema)}.Sanitize())
	must(t, err)
	write := func(k string) {
		t.Helper()
		tx := begin(t, s, true)
		must(t, tx.(kv.Locker).BucketShared([]byte("b")).Put([]byte(k), []byte("v")))
		tx.(kv.SharedTx).Announce("b", []byte(k))
		commit(t, tx)
	}
	for i := range 3 {
		write(fmt.Sprint("quiet", i))
	}
	// A notification after the writers' commits: theirs would come first.
	_, err = raw.Exec(ctx, "SELECT pg_notify($1, 'marker')", channel(s.schema))
	must(t, err)
	n, err := raw.WaitForNotification(ctx)
	must(t, err)
	if n.Payload != "marker" {
		t.Fatalf("a shared writer announced with nobody watching: %q", n.Payload)
	}

	ch, l := listen(t, s)
	must(t, l.Watch("b"))
	// Another shared writer holds the bucket meanwhile (it may hold the
	// watch key the next one tries): the notice comes all the same.
	other := begin(t, s, true)
	defer other.Rollback()
	if b := other.(kv.Locker).BucketShared([]byte("b")); b == nil || b.Get(key(0)) == nil {
		t.Fatal(other.Err())
	}
	write("heard")
	if got := next(t, ch); got.Topic != "b" || string(got.Keys[0]) != "heard" {
		t.Fatalf("notice %+v, want b/heard", got)
	}
}

// A transaction that deletes a top-level bucket (a collection's drop)
// announces under its name as a writer of it does: the notice is dropped
// while nobody watches the bucket, and sent with the commit while someone
// does, so a drop costs nothing unless a reader waits on the collection.
func TestDeleteBucketQuiet(t *testing.T) {
	url := pgtest.URL(t)
	s := openURL(t, url)
	fill(t, s, "quiet", 1)
	fill(t, s, "watched", 1)
	drop := func(name string) {
		t.Helper()
		tx := begin(t, s, true)
		must(t, tx.DeleteBucket([]byte(name)))
		tx.(kv.SharedTx).Announce(name, []byte{0})
		commit(t, tx)
	}

	raw, err := pgx.Connect(ctx, url)
	must(t, err)
	defer raw.Close(ctx)
	_, err = raw.Exec(ctx, "LISTEN "+pgx.Identifier{channel(s.schema)}.Sanitize())
	must(t, err)
	drop("quiet")
	// A notification after the drop's commit: the drop's would come first.
	_, err = raw.Exec(ctx, "SELECT pg_notify($1, 'marker')", channel(s.schema))
	must(t, err)
	n, err := raw.WaitForNotification(ctx)
	must(t, err)
	if n.Payload != "marker" {
		t.Fatalf("a drop announced with nobody watching: %q", n.Payload)
	}

	ch, l := listen(t, s)
	must(t, l.Watch("watched"))
	drop("watched")
	if got := next(t, ch); got.Topic != "watched" || !bytes.Equal(got.Keys[0], []byte{0}) {
		t.Fatalf("notice %+v, want the drop of watched", got)
	}
}
