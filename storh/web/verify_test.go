package web_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/web"
)

// verifyLine is one line of the verify stream.
type verifyLine struct {
	Problem *struct {
		Kind, Collection, ID, Key, Detail, Text string
	}
	Report *struct {
		Collections, Records, Problems int
		OK                             bool
	}
	Error *struct{ Kind, Message string }
}

// verifyLines posts a verify and reads its lines, checking that only the
// last one holds the report.
func verifyLines(t *testing.T, c *client, path string) []verifyLine {
	t.Helper()
	r := c.do("POST", path, nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("POST %s: %d %s %s", path, r.status, r.header.Get("Content-Type"), r.body)
	}
	var out []verifyLine
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		var l verifyLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Bytes(), err)
		}
		out = append(out, l)
	}
	for i, l := range out {
		if (l.Report != nil) != (i == len(out)-1) {
			t.Fatalf("POST %s: the report is not on the last line alone: %s", path, r.body)
		}
	}
	return out
}

func TestVerify(t *testing.T) {
	f := newFixture(t, 12, 8)
	c := f.serve(t)
	lines := verifyLines(t, c, "api/verify")
	if len(lines) != 1 {
		t.Fatalf("clean database: %d lines", len(lines))
	}
	// 12 posts, 8 events and the job.
	if rep := lines[0].Report; !rep.OK || rep.Problems != 0 || rep.Collections != 3 || rep.Records != 21 {
		t.Errorf("clean database: report %+v", rep)
	}
	lines = verifyLines(t, c, "api/verify?collection=events")
	if rep := lines[0].Report; !rep.OK || rep.Collections != 1 || rep.Records != 8 {
		t.Errorf("events: report %+v", rep)
	}

	// Flip a byte of one event's payload: its checksum fails.
	path := f.db.Path()
	f.db.Close()
	bad := f.eventIDs[5]
	testkit.Damage(t, path, "events", bad[:], func(v []byte) { v[len(v)-1] ^= 1 })
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(web.Handler(db))
	defer srv.Close()
	c = &client{t: t, base: srv.URL + "/"}
	lines = verifyLines(t, c, "api/verify")
	if len(lines) != 2 {
		t.Fatalf("damaged database: %d lines: %+v", len(lines), lines)
	}
	p := lines[0].Problem
	if p == nil || p.Kind != string(storh.ProblemChecksum) || p.Collection != "events" || p.ID != bad.String() || p.Detail == "" || p.Text == "" {
		t.Errorf("problem %+v", p)
	}
	if rep := lines[1].Report; rep.OK || rep.Problems != 1 || rep.Collections != 3 {
		t.Errorf("damaged database: report %+v", rep)
	}
	// Only posts: nothing wrong there.
	lines = verifyLines(t, c, "api/verify?collection=posts")
	if len(lines) != 1 || !lines[0].Report.OK {
		t.Errorf("posts of the damaged database: %+v", lines[0].Report)
	}
	// Verify changed nothing: the damage is still there.
	if _, err := db.Log("events"); err != nil {
		t.Fatal(err)
	}
	l, _ := db.Log("events")
	if _, err := l.Get(bad); !errors.Is(err, storh.ErrCorrupt) {
		t.Errorf("Get of the damaged record after verify: %v", err)
	}
}

func TestVerifyTimeout(t *testing.T) {
	f := newFixture(t, 3, 0)
	c := f.serve(t, web.WithTimeout(time.Nanosecond))
	// Nothing was written when the time ran out: an error status.
	if r := c.do("POST", "api/verify", nil); r.status != 503 || r.errorKind(t) != "timeout" {
		t.Errorf("verify past the deadline: %d %s", r.status, r.body)
	}
}

// TestVerifyAndStatsOfARemovedFile: once the file at the database's path is
// removed, api/verify and api/stats still answer from the open file, and
// neither response names the path.
func TestVerifyAndStatsOfARemovedFile(t *testing.T) {
	f := newFixture(t, 12, 8)
	c := f.serve(t)
	st, err := f.db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	path := f.db.Path()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	r := c.do("POST", "api/verify", nil)
	if bytes.Contains(r.body, []byte(path)) {
		t.Errorf("api/verify names the path: %s", r.body)
	}
	lines := verifyLines(t, c, "api/verify")
	if rep := lines[len(lines)-1].Report; len(lines) != 1 || !rep.OK || rep.Records != 21 {
		t.Errorf("api/verify of the open file: %+v", lines)
	}
	r = c.get("api/stats")
	var got struct {
		FileSize int64 `json:"file_size"`
	}
	r.decode(t, &got)
	if r.status != 200 || got.FileSize != st.FileSize || bytes.Contains(r.body, []byte(path)) {
		t.Errorf("api/stats of the open file: %d %s; want 200 with file_size %d and no path", r.status, r.body, st.FileSize)
	}
}
