package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// openChanges starts a changes stream and checks its status, headers and
// first comment.
func openChanges(t *testing.T, url string, header http.Header) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("GET %s: %d %s %s", url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &sseStream{t: t, resp: resp, rd: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	if ev := s.next(); !strings.HasPrefix(ev.comment, " changes after ") {
		t.Fatalf("first block %+v", ev)
	}
	return s
}

// wantChange is what a test expects of one change event.
type wantChange struct {
	seq  uint64
	op   string
	id   uuidv7.UUID
	data string // the record's data as JSON; "" for a delete
}

// checkChange checks one event of a changes stream against want: its id
// is the Seq, its data the Change, with the record's time.
func checkChange(t *testing.T, ev sseEvent, want wantChange) {
	t.Helper()
	if ev.event != "" || ev.id != strconv.FormatUint(want.seq, 10) {
		t.Fatalf("event %+v; want change %d", ev, want.seq)
	}
	var ch web.Change
	if err := json.Unmarshal([]byte(ev.data), &ch); err != nil {
		t.Fatalf("change %d: %v in %s", want.seq, err, ev.data)
	}
	if ch.Seq != want.seq || ch.Op != want.op || ch.ID != want.id.String() ||
		ch.Time != want.id.Time().UTC().Format("2006-01-02T15:04:05.000Z") || string(ch.Data) != want.data {
		t.Fatalf("change %s\nwant %+v", ev.data, want)
	}
}

// TestChangesEndpoint follows a collection's feed over HTTP: the kept
// changes, then live ones (deletes included, and on PostgreSQL written by
// another store on the schema), resumed with Last-Event-ID after the
// connection drops, each once and in order; without follow it ends.
func TestChangesEndpoint(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 0, 3)
		notes, err := f.db.Docs("notes", storh.WithChangeFeed(1000))
		if err != nil {
			t.Fatal(err)
		}
		// On PostgreSQL the live writes come from another store, as from
		// another process; a file has one writer.
		writer := notes
		if strings.HasPrefix(path, "postgres") {
			other, err := storh.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { other.Close() })
			if writer, err = other.Docs("notes"); err != nil {
				t.Fatal(err)
			}
		}
		var want []wantChange
		put := func(d *storh.Docs, id uuidv7.UUID, n int) uuidv7.UUID {
			t.Helper()
			var rec storh.Record
			var err error
			if id.IsZero() {
				rec, err = d.Put(storh.Map{"n": n, "s": "line\nbreak <&>"})
			} else {
				rec, err = d.PutWithID(id, storh.Map{"n": n, "s": "line\nbreak <&>"})
			}
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, wantChange{uint64(len(want) + 1), "put", rec.ID, fmt.Sprintf(`{"n":%d,"s":"line\nbreak <&>"}`, n)})
			return rec.ID
		}
		del := func(d *storh.Docs, id uuidv7.UUID) {
			t.Helper()
			if err := d.Delete(id); err != nil {
				t.Fatal(err)
			}
			want = append(want, wantChange{uint64(len(want) + 1), "delete", id, ""})
		}
		a := put(notes, uuidv7.UUID{}, 1)
		b := put(notes, uuidv7.UUID{}, 2)
		put(notes, a, 3)
		del(notes, b)

		h := web.Handler(f.db, web.WithHeartbeat(10*time.Millisecond), web.WithTimeout(time.Nanosecond))
		srv := httptest.NewServer(h)
		defer srv.Close()
		url := srv.URL + "/api/collections/notes/changes"

		// From the first change: the four kept, then live ones.
		first := openChanges(t, url+"?after=0", nil)
		for _, w := range want {
			ev, _ := first.event()
			checkChange(t, ev, w)
		}
		c := put(writer, uuidv7.UUID{}, 4)
		del(writer, a)
		for _, w := range want[4:] {
			ev, _ := first.event()
			checkChange(t, ev, w)
		}
		first.close()
		waitTails(t, h)

		// Written while nobody follows; an EventSource reconnects with the
		// last Seq it got, which wins over the URL's after.
		del(writer, c)
		second := openChanges(t, url+"?after=0", http.Header{"Last-Event-Id": {"5"}})
		for _, w := range want[5:] {
			ev, _ := second.event()
			checkChange(t, ev, w)
		}
		// Nothing else: heartbeats only.
		nextBeats(second, 2)
		second.close()
		waitTails(t, h)

		// Without after: from now on.
		live := openChanges(t, url, nil)
		d := put(writer, uuidv7.UUID{}, 5)
		ev, _ := live.event()
		checkChange(t, ev, want[len(want)-1])
		live.close()
		waitTails(t, h)
		_ = d

		// Without follow: the changes after 2 up to the last, then an end
		// event with the last Seq, and the stream ends.
		s := openChanges(t, url+"?after=2&follow=false", nil)
		for _, w := range want[2:] {
			ev, _ := s.event()
			checkChange(t, ev, w)
		}
		end, _ := s.event()
		if end.event != "end" || end.data != fmt.Sprintf(`{"last_seq":%d}`, len(want)) {
			t.Fatalf("end of a stream without follow: %+v", end)
		}
		if ev, err := s.block(); err != io.EOF {
			t.Fatalf("after the end event: %+v %v", ev, err)
		}
		// Up to date already: only the end.
		s = openChanges(t, url+"?follow=false", nil)
		if end, _ := s.event(); end.event != "end" || end.data != fmt.Sprintf(`{"last_seq":%d}`, len(want)) {
			t.Fatalf("end of an empty stream: %+v", end)
		}
		waitTails(t, h)

		// The stats of a collection say whether it has a feed.
		cl := &client{t: t, base: srv.URL + "/"}
		var stats web.Collection
		cl.get("api/collections/notes").decode(t, &stats)
		if stats.FeedKeep != 1000 || stats.LastSeq != uint64(len(want)) {
			t.Errorf("stats of notes: feed %d, last seq %d; want 1000, %d", stats.FeedKeep, stats.LastSeq, len(want))
		}
		stats = web.Collection{}
		cl.get("api/collections/events").decode(t, &stats)
		if stats.FeedKeep != 0 || stats.LastSeq != 0 {
			t.Errorf("stats of events, without a feed: %+v", stats)
		}
	})
}

// TestChangesRefused: what the endpoint refuses before it streams, with
// the status and kind a client switches on; trimmed changes are 410.
func TestChangesRefused(t *testing.T) {
	f := newFixture(t, 0, 3)
	short, err := f.db.Docs("short", storh.WithChangeFeed(2))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 80 {
		if _, err := short.Put(storh.Map{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	cl := f.serve(t)
	for _, tc := range []struct {
		path   string
		header http.Header
		status int
		kind   string
		says   string
	}{
		{"api/collections/short/changes?after=1", nil, 410, web.KindChangesTrimmed, "gone"},
		{"api/collections/short/changes?after=9", nil, 410, web.KindChangesTrimmed, "gone"},
		{"api/collections/short/changes", http.Header{"Last-Event-Id": {"3"}}, 410, web.KindChangesTrimmed, "gone"},
		{"api/collections/short/changes?after=81", nil, 400, web.KindBadRequest, "only to 80"},
		{"api/collections/short/changes?after=-1", nil, 400, web.KindBadRequest, "whole number"},
		{"api/collections/short/changes?after=1&after=2", nil, 400, web.KindBadRequest, "once"},
		{"api/collections/short/changes?from=1", nil, 400, web.KindBadRequest, "after and follow"},
		{"api/collections/short/changes?follow=sometimes", nil, 400, web.KindBadRequest, "true or false"},
		{"api/collections/short/changes", http.Header{"Last-Event-Id": {"x"}}, 400, web.KindBadRequest, "Last-Event-ID"},
		{"api/collections/events/changes", nil, 404, web.KindNotFound, "no change feed"},
		{"api/collections/nothing/changes", nil, 404, web.KindNotFound, "nothing"},
		{"api/collections/jobs/changes", nil, 409, web.KindWrongKind, "queue"},
	} {
		r := cl.doHeader("GET", tc.path, nil, tc.header)
		if r.status != tc.status || r.errorKind(t) != tc.kind || !strings.Contains(string(r.body), tc.says) {
			t.Errorf("GET %s %v: %d %s; want %d %s saying %q", tc.path, tc.header, r.status, r.body, tc.status, tc.kind, tc.says)
		}
	}
	// The kept changes are still there to read.
	r := cl.get("api/collections/short/changes?after=79&follow=false")
	if r.status != 200 || !strings.Contains(string(r.body), "id: 80\n") || !strings.Contains(string(r.body), "event: end\n") {
		t.Errorf("the kept changes: %d %s", r.status, r.body)
	}
}

// TestChangesLimit: a changes stream ends at WithTailLimit with a timeout
// error event, and a POST is not allowed.
func TestChangesLimit(t *testing.T) {
	f := newFixture(t, 0, 0)
	notes, err := f.db.Docs("notes", storh.WithChangeFeed(10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notes.Put(storh.Map{"n": 1}); err != nil {
		t.Fatal(err)
	}
	h := web.Handler(f.db, web.WithTailLimit(50*time.Millisecond), web.WithHeartbeat(time.Hour))
	srv := httptest.NewServer(h)
	defer srv.Close()
	s := openChanges(t, srv.URL+"/api/collections/notes/changes", nil)
	s.end(web.KindTimeout)
	waitTails(t, h)
	cl := &client{t: t, base: srv.URL + "/"}
	if r := cl.do("POST", "api/collections/notes/changes", nil); r.status != 405 {
		t.Errorf("POST: %d %s", r.status, r.body)
	}
}

// TestClientChanges reads the feed through web.Client: without follow
// up to the last change; with follow live changes until ctx ends, resumed
// after the last Seq; trimmed and missing feeds as storh's sentinels.
func TestClientChanges(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 0, 2)
		notes, err := f.db.Docs("notes", storh.WithChangeFeed(3))
		if err != nil {
			t.Fatal(err)
		}
		a, err := notes.Put(storh.Map{"n": 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := notes.Delete(a.ID); err != nil {
			t.Fatal(err)
		}
		c := newClient(t, f, web.WithHeartbeat(10*time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()

		var got []string
		collect := func(ch web.Change, line json.RawMessage, _ bool) error {
			var back web.Change
			if err := json.Unmarshal(line, &back); err != nil || back.Seq != ch.Seq || line[len(line)-1] != '\n' {
				return fmt.Errorf("line %q of change %d", line, ch.Seq)
			}
			got = append(got, fmt.Sprintf("%d %s %s %s", ch.Seq, ch.Op, ch.ID, ch.Data))
			return nil
		}
		started, err := c.Changes(ctx, "notes", "0", false, collect)
		want := []string{fmt.Sprintf("1 put %s {\"n\":1}", a.ID), fmt.Sprintf("2 delete %s ", a.ID)}
		if err != nil || !started || !slices.Equal(got, want) {
			t.Fatalf("Changes without follow: %v %v %q; want %q", started, err, got, want)
		}

		// Following: each change as it commits, until ctx ends.
		fctx, stop := context.WithCancel(ctx)
		seen := make(chan web.Change)
		ended := make(chan error, 1)
		go func() {
			_, err := c.Changes(fctx, "notes", "2", true, func(ch web.Change, _ json.RawMessage, _ bool) error {
				seen <- ch
				return nil
			})
			ended <- err
		}()
		for i := range 2 {
			r, err := notes.Put(storh.Map{"n": 10 + i})
			if err != nil {
				t.Fatal(err)
			}
			if ch := <-seen; ch.Seq != uint64(3+i) || ch.ID != r.ID.String() || ch.Op != "put" {
				t.Fatalf("live change %+v; want %d put %s", ch, 3+i, r.ID)
			}
		}
		stop()
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Fatalf("Changes after cancel: %v", err)
		}

		// Keep 3 and more writes: 1 is trimmed.
		for i := range 70 {
			if _, err := notes.Put(storh.Map{"n": 100 + i}); err != nil {
				t.Fatal(err)
			}
		}
		_, err = c.Changes(ctx, "notes", "1", false, collect)
		var we *web.Error
		if !errors.Is(err, storh.ErrChangesTrimmed) || !errors.As(err, &we) || we.Status != 410 {
			t.Fatalf("Changes of a trimmed Seq: %v", err)
		}
		_, err = c.Changes(ctx, "events", "", false, collect)
		if !errors.Is(err, storh.ErrNotFound) || !strings.Contains(err.Error(), "no change feed") {
			t.Fatalf("Changes of a collection without a feed: %v", err)
		}
	})
}

// TestChangesTrimOvertakesStream: a stream that is following a feed when
// one commit writes more than the feed keeps, trimming past the stream's
// last Seq, ends with an error event of kind changes_trimmed (the reader
// must resync) rather than skip the trimmed changes unannounced.
func TestChangesTrimOvertakesStream(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 0, 0)
		notes, err := f.db.Docs("notes", storh.WithChangeFeed(5))
		if err != nil {
			t.Fatal(err)
		}
		for n := range 3 {
			if _, err := notes.Put(storh.Map{"n": n}); err != nil {
				t.Fatal(err)
			}
		}
		h := web.Handler(f.db, web.WithHeartbeat(time.Hour))
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close) // after the stream's own cleanup, which ends it
		s := openChanges(t, srv.URL+"/api/collections/notes/changes?after=0", nil)
		for seq := 1; seq <= 3; seq++ {
			if ev := s.next(); ev.id != strconv.Itoa(seq) {
				t.Fatalf("event %+v, want change %d", ev, seq)
			}
		}
		// The stream has delivered all there is and waits; one commit of
		// 300 keeps the last of them (a file 299..303, PostgreSQL the last
		// row of the commit's run, a hundred or so) and trims from 4 on,
		// which the stream has not read.
		many := make([]any, 300)
		for i := range many {
			many[i] = storh.Map{"n": 10 + i}
		}
		if _, err := notes.PutMany(many); err != nil {
			t.Fatal(err)
		}
		s.end(web.KindChangesTrimmed)
		waitTails(t, h)
	})
}

// TestChangesStreamCollectionDropped: a stream following a feed whose
// collection is dropped, by the serving store or (on PostgreSQL) by
// another store on the schema with nothing written afterwards, ends with
// an error event of kind not_found rather than wait for changes that
// cannot come.
func TestChangesStreamCollectionDropped(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 0, 0)
		notes, err := f.db.Docs("notes", storh.WithChangeFeed(10))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := notes.Put(storh.Map{"n": 1}); err != nil {
			t.Fatal(err)
		}
		h := web.Handler(f.db, web.WithHeartbeat(time.Hour))
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		s := openChanges(t, srv.URL+"/api/collections/notes/changes?after=0", nil)
		if ev := s.next(); ev.id != "1" {
			t.Fatalf("event %+v, want change 1", ev)
		}
		dropper := f.db
		if strings.HasPrefix(path, "postgres") {
			other, err := storh.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { other.Close() })
			dropper = other
		}
		// The stream has read all there is and waits for the next change.
		stuck := time.AfterFunc(20*time.Second, s.cancel)
		defer stuck.Stop()
		if err := dropper.Drop("notes"); err != nil {
			t.Fatal(err)
		}
		s.end(web.KindNotFound)
		waitTails(t, h)
	})
}
