package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// sseEvent is one block of a Server-Sent Events stream: an event, or a
// comment.
type sseEvent struct {
	id, event, data, comment string
}

// sseStream reads a tail with a real HTTP client.
type sseStream struct {
	t      *testing.T
	resp   *http.Response
	rd     *bufio.Reader
	cancel context.CancelFunc
}

// openTail starts a tail and checks its status and headers.
func openTail(t *testing.T, url string, header http.Header) *sseStream {
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
		t.Fatalf("GET %s: %d %s %s", url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &sseStream{t: t, resp: resp, rd: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	// The first comment says the tail is live.
	if ev := s.next(); !strings.HasPrefix(ev.comment, " tail from ") {
		t.Fatalf("first block %+v", ev)
	}
	return s
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// block reads one block; io.EOF when the stream ends.
func (s *sseStream) block() (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			if line != "" {
				return ev, errors.New("stream ends within a line")
			}
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return ev, nil
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			ev.comment = line[1:]
		case "id":
			ev.id = value
		case "event":
			ev.event = value
		case "data":
			if ev.data != "" {
				return ev, errors.New("an event of more than one data line")
			}
			ev.data = value
		default:
			return ev, errors.New("unknown field in " + line)
		}
	}
}

func (s *sseStream) next() sseEvent {
	s.t.Helper()
	ev, err := s.block()
	if err != nil {
		s.t.Fatalf("tail: %v", err)
	}
	return ev
}

// event reads up to the next event, counting the heartbeats before it.
func (s *sseStream) event() (sseEvent, int) {
	s.t.Helper()
	beats := 0
	for {
		ev := s.next()
		if ev.comment == "" {
			return ev, beats
		}
		if ev.comment != " heartbeat" {
			s.t.Fatalf("comment %q", ev.comment)
		}
		beats++
	}
}

// end reads the rest of the stream and checks that it ends, after
// heartbeats only, with an error event of kind.
func (s *sseStream) end(kind string) {
	s.t.Helper()
	ev, _ := s.event()
	var body struct {
		Error struct{ Kind, Message string }
	}
	if ev.event != "error" || json.Unmarshal([]byte(ev.data), &body) != nil || body.Error.Kind != kind || body.Error.Message == "" {
		s.t.Fatalf("want an error event of kind %s, got %+v", kind, ev)
	}
	if ev, err := s.block(); err != io.EOF {
		s.t.Fatalf("after the error event: %+v %v", ev, err)
	}
}

// exported is every record of c as its line of an export, without the
// newline, by id: what a tail's data must be.
func exported(t *testing.T, c storh.Collection) map[string]string {
	t.Helper()
	var b bytes.Buffer
	if _, err := jsonl.Export(t.Context(), &b, c, query.All()); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for line := range strings.Lines(b.String()) {
		var r struct{ ID string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out[r.ID] = strings.TrimSuffix(line, "\n")
	}
	return out
}

// waitTails waits until h serves no tail: a tail's goroutines end with
// its client.
func waitTails(t *testing.T, h http.Handler) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for web.Tails(h) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d tails still running after their clients left", web.Tails(h))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTail reads a tail while another goroutine writes, drops the
// connection halfway and resumes with Last-Event-ID: every record arrives
// exactly once, in commit order, as the records endpoint writes it.
func TestTail(t *testing.T) {
	f := newFixture(t, 0, 5)
	h := web.Handler(f.db, web.WithHeartbeat(10*time.Millisecond), web.WithTimeout(time.Nanosecond))
	srv := httptest.NewServer(h)
	defer srv.Close()
	url := srv.URL + "/api/collections/events/tail"

	// From now: the 5 records already there are not sent. WithTimeout
	// (1ns here) does not apply to a tail.
	first := openTail(t, url, nil)
	const n = 300
	var written []uuidv7.UUID
	done := make(chan error, 1)
	go func() {
		// Single puts and batches: commit order is write order, and the
		// ids of the deterministic generator rise.
		for i := 0; i < n; {
			if i%50 == 10 {
				items := make([]any, 20)
				for k := range items {
					items[k] = storh.Map{"n": int64(i + k), "batch": true}
				}
				recs, err := f.events.PutMany(items)
				if err != nil {
					done <- err
					return
				}
				for _, r := range recs {
					written = append(written, r.ID)
				}
				i += len(items)
				continue
			}
			r, err := f.events.Put(storh.Map{"n": int64(i), "s": "line\nbreak <&>"})
			if err != nil {
				done <- err
				return
			}
			written = append(written, r.ID)
			i++
			if i%64 == 0 {
				time.Sleep(20 * time.Millisecond) // room for heartbeats
			}
		}
		done <- nil
	}()

	var got []string
	var datas []string
	for len(got) < n/2 {
		ev, _ := first.event()
		if ev.event != "" || ev.id == "" {
			t.Fatalf("event %+v", ev)
		}
		got, datas = append(got, ev.id), append(datas, ev.data)
	}
	// The client goes away: the handler and its watch end.
	first.close()
	waitTails(t, h)

	// An EventSource reconnects with the last id it got; from (here:
	// the start) is overridden by it.
	second := openTail(t, url+"?from=0", http.Header{"Last-Event-Id": {got[len(got)-1]}})
	beats := 0
	for len(got) < n {
		ev, b := second.event()
		if ev.event != "" || ev.id == "" {
			t.Fatalf("event %+v", ev)
		}
		beats += b
		got, datas = append(got, ev.id), append(datas, ev.data)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(written) != n {
		t.Fatalf("wrote %d", len(written))
	}
	lines := exported(t, f.events)
	for i, id := range written {
		if got[i] != id.String() {
			t.Fatalf("event %d: id %s, want %s", i, got[i], id)
		}
		if datas[i] != lines[got[i]] {
			t.Fatalf("event %d: data\n%s\nwant\n%s", i, datas[i], lines[got[i]])
		}
	}
	// Quiet now: heartbeats come, and nothing else.
	if _, b := nextBeats(second, 3); b < 3 {
		t.Errorf("heartbeats: %d", b)
	}
	second.close()
	waitTails(t, h)
}

// nextBeats reads n heartbeats, failing on an event.
func nextBeats(s *sseStream, n int) (sseEvent, int) {
	s.t.Helper()
	for i := range n {
		ev := s.next()
		if ev.comment != " heartbeat" {
			s.t.Fatalf("after %d heartbeats: %+v", i, ev)
		}
	}
	return sseEvent{}, n
}

// TestTailFrom starts tails from an id and from a time: the catch-up
// sends the records after the id (from the time on), then new ones.
func TestTailFrom(t *testing.T) {
	f := newFixture(t, 10, 0)
	h := web.Handler(f.db, web.WithHeartbeat(time.Hour))
	srv := httptest.NewServer(h)
	defer srv.Close()
	base := srv.URL + "/api/collections/posts/tail"
	for _, tc := range []struct {
		query  string
		header http.Header
		first  int // the index of the first record sent
	}{
		{"?from=" + f.postIDs[6].String(), nil, 7},
		{"?from=2024-05-01T12:00:04Z", nil, 4},
		{"?from=" + itoa(startMs+4001), nil, 5},
		{"?from=0", nil, 0},
		{"?from=", http.Header{"Last-Event-Id": {f.postIDs[8].String()}}, 9},
		{"?from=" + f.postIDs[1].String(), http.Header{"Last-Event-Id": {f.postIDs[8].String()}}, 9},
	} {
		s := openTail(t, base+tc.query, tc.header)
		for i := tc.first; i < len(f.postIDs); i++ {
			if ev, _ := s.event(); ev.id != f.postIDs[i].String() {
				t.Fatalf("%s %v: event %+v, want id %s", tc.query, tc.header, ev, f.postIDs[i])
			}
		}
		// Then what is written next; a Docs record written again comes
		// again, with its new data.
		rec, err := f.posts.PutWithID(f.postIDs[0], storh.Map{"slug": "again", "round": tc.query})
		if err != nil {
			t.Fatal(err)
		}
		ev, _ := s.event()
		want, _ := jsonl.AppendRecord(nil, rec.ID, rec.Raw())
		if ev.id != rec.ID.String() || ev.data+"\n" != string(want) {
			t.Fatalf("%s: event %+v, want %s", tc.query, ev, want)
		}
		s.close()
	}
	waitTails(t, h)
}

// TestTailEnds checks the ends of a tail other than the client leaving:
// its time limit, the database closing, and a watcher too far behind.
func TestTailEnds(t *testing.T) {
	t.Run("limit", func(t *testing.T) {
		f := newFixture(t, 0, 1)
		srv := httptest.NewServer(web.Handler(f.db, web.WithTailLimit(50*time.Millisecond), web.WithHeartbeat(10*time.Millisecond)))
		defer srv.Close()
		s := openTail(t, srv.URL+"/api/collections/events/tail", nil)
		s.end("timeout")
	})
	t.Run("closed", func(t *testing.T) {
		f := newFixture(t, 0, 1)
		srv := httptest.NewServer(web.Handler(f.db))
		defer srv.Close()
		s := openTail(t, srv.URL+"/api/collections/events/tail", nil)
		f.db.Close()
		s.end("unavailable")
	})
	t.Run("lagged", func(t *testing.T) {
		f := newFixture(t, 0, 1)
		h := web.Handler(f.db, web.WithHeartbeat(time.Hour))
		srv := httptest.NewServer(h)
		defer srv.Close()
		s := openTail(t, srv.URL+"/api/collections/events/tail", nil)
		// The client reads nothing while more than a watcher's backlog
		// (64 MiB) is written: past what the connection's buffers hold,
		// the handler waits in a write and its watch falls behind.
		big := strings.Repeat("x", 64<<10)
		for i := 0; i < 1600; i += 100 {
			items := make([]any, 100)
			for k := range items {
				items[k] = storh.Map{"n": int64(i + k), "big": big}
			}
			if _, err := f.events.PutMany(items); err != nil {
				t.Fatal(err)
			}
		}
		got := 0
		for {
			ev, _ := s.event()
			if ev.event == "error" {
				var body struct{ Error struct{ Kind string } }
				if json.Unmarshal([]byte(ev.data), &body); body.Error.Kind != "lagged" {
					t.Fatalf("after %d records: %+v", got, ev)
				}
				break
			}
			got++
		}
		if got >= 1600 {
			t.Errorf("%d records before the lag", got)
		}
		if ev, err := s.block(); err != io.EOF {
			t.Fatalf("after the error event: %+v %v", ev, err)
		}
		waitTails(t, h)
	})
}
