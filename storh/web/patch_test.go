package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/web"
)

// patchBase is what each patched record holds before its patch.
func patchBase(slug string) storh.Map {
	return storh.Map{"slug": slug, "n": int64(1), "tags": []any{"a", "b"}, "m": storh.Map{"x": int64(1)}}
}

// TestPatchRecord sends each op over HTTP to one record and the same
// changes through the Go API to its twin, a record of the same id and data
// in another collection: the answer must be the twin's line, and what GET
// gives afterwards.
func TestPatchRecord(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 20, 0)
		c := f.serve(t, web.WithWrites())
		twins, err := f.db.Docs("twins")
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
		for i, tc := range []struct {
			name, body string
			changes    []storh.Change
		}{
			{"set an Extended JSON value, making the map on the way", `[{"op":"set","path":"m.y.z","value":{"$date":"2024-05-01T00:00:00Z"}}]`,
				[]storh.Change{storh.Set("m.y.z", at)}},
			{"set to null", `[{"op":"set","path":"n","value":null}]`, []storh.Change{storh.Set("n", nil)}},
			{"unset", `[{"op":"unset","path":"m.x"}]`, []storh.Change{storh.Unset("m.x")}},
			{"inc by an integer", `[{"op":"inc","path":"n","by":2}]`, []storh.Change{storh.Inc("n", int64(2))}},
			{"inc by a float", `[{"op":"inc","path":"n","by":0.5}]`, []storh.Change{storh.Inc("n", 0.5)}},
			{"push", `[{"op":"push","path":"tags","values":["c",{"k":1}]}]`, []storh.Change{storh.Push("tags", "c", storh.Map{"k": int64(1)})}},
			{"push nothing to a missing field", `[{"op":"push","path":"fresh"}]`, []storh.Change{storh.Push("fresh")}},
			{"pull", `[{"op":"pull","path":"tags","value":"a"}]`, []storh.Change{storh.Pull("tags", "a")}},
			{"addToSet", `[{"op":"addToSet","path":"tags","values":["a","c","c"]}]`, []storh.Change{storh.AddToSet("tags", "a", "c", "c")}},
			{"in order", `[{"op":"set","path":"n","value":10},{"op":"inc","path":"n","by":1},{"op":"unset","path":"tags"},{"op":"push","path":"tags","values":[1]}]`,
				[]storh.Change{storh.Set("n", int64(10)), storh.Inc("n", int64(1)), storh.Unset("tags"), storh.Push("tags", int64(1))}},
			{"no changes", `[]`, nil},
		} {
			id := f.postIDs[i]
			base := patchBase(tc.name)
			if _, err := f.posts.PutWithID(id, base); err != nil {
				t.Fatal(err)
			}
			if _, err := twins.PutWithID(id, base); err != nil {
				t.Fatal(err)
			}
			want, err := twins.Patch(id, tc.changes...)
			if err != nil {
				t.Fatalf("%s: the Go API: %v", tc.name, err)
			}
			wantLine, err := jsonl.AppendRecord(nil, want.ID, want.Raw())
			if err != nil {
				t.Fatal(err)
			}
			recPath := "api/collections/posts/records/" + id.String()
			r := c.do("PATCH", recPath, []byte(tc.body))
			if r.status != http.StatusOK || string(r.body) != string(wantLine) {
				t.Errorf("%s: %d %s\nwant 200 %s", tc.name, r.status, r.body, wantLine)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s: Content-Type %q", tc.name, ct)
			}
			if got := c.get(recPath); string(got.body) != string(wantLine) {
				t.Errorf("%s: GET after the patch gives %s, want %s", tc.name, got.body, wantLine)
			}
		}
	})
}

// TestPatchRecordErrors wants each refused PATCH to answer its status and
// kind and to leave the database as it was.
func TestPatchRecordErrors(t *testing.T) {
	f := newFixture(t, 3, 2)
	rw := f.serve(t, web.WithWrites())
	ro := f.serve(t)
	post := "api/collections/posts/records/" + f.postIDs[0].String()
	event := "api/collections/events/records/" + f.eventIDs[0].String()
	for _, tc := range []struct {
		c            *client
		path, body   string
		status       int
		kind, inText string
	}{
		{rw, post, `[{"op":"inc","path":"slug","by":1}]`, 400, web.KindInvalidPatch, "not a number"},
		{rw, post, `[{"op":"inc","path":"score","by":"1"}]`, 400, web.KindInvalidPatch, "must be a number"},
		{rw, post, `[{"op":"push","path":"slug","values":[1]}]`, 400, web.KindInvalidPatch, "not a list"},
		{rw, post, `[{"op":"set","path":"slug.x","value":1}]`, 400, web.KindInvalidPatch, "not a map"},
		{rw, post, `[{"op":"set","path":"","value":1}]`, 400, web.KindInvalidPatch, "field name"},
		{rw, post, `[{"op":"set","path":"a","value":1},{"op":"rename","path":"a"}]`, 400, web.KindInvalidPatch, `change 1: storh: invalid patch: op "rename"`},
		{rw, post, `[{"op":"set","path":"a"}]`, 400, web.KindInvalidPatch, `lacks "value"`},
		{rw, post, `[{"op":"inc","path":"a","value":1}]`, 400, web.KindInvalidPatch, `inc takes "by"`},
		{rw, post, `[{"op":"unset","path":"a","values":[]}]`, 400, web.KindInvalidPatch, "unset takes only a path"},
		{rw, post, `[{"op":"push","path":"a","value":1}]`, 400, web.KindInvalidPatch, `push takes "values", a list`},
		{rw, post, `[{"op":"set","path":"a","value":{"$date":"nope"}}]`, 400, web.KindInvalidPatch, "value:"},
		{rw, post, `[{"op":"addToSet","path":"a","values":[1,{"$numberLong":"x"}]}]`, 400, web.KindInvalidPatch, "values[1]:"},
		{rw, post, `{"op":"set","path":"a","value":1}`, 400, web.KindBadRequest, "not a list of changes"},
		{rw, post, `[{"op":"set","path":"a","value":1,"by":2,"extra":3}]`, 400, web.KindBadRequest, `unknown field "extra"`},
		{rw, post, `[] []`, 400, web.KindBadRequest, "more after the list"},
		{rw, post, `null`, 400, web.KindBadRequest, "not a list of changes"},
		{rw, post, ``, 400, web.KindBadRequest, "not a list of changes"},
		{rw, post, `[{"op":"set","path":"slug","value":"p001"}]`, 409, web.KindUniqueViolation, "p001"},
		{rw, post + "?x=1", `[]`, 400, web.KindBadRequest, ""},
		{rw, "api/collections/posts/records/" + absentID, `[]`, 404, web.KindNotFound, absentID},
		{rw, "api/collections/posts/records/nope", `[]`, 400, web.KindBadRequest, "record id"},
		{rw, "api/collections/nope/records/" + absentID, `[]`, 404, web.KindNotFound, ""},
		{rw, "api/collections/jobs/records/" + absentID, `[]`, 409, web.KindWrongKind, ""},
		{rw, event, `[{"op":"set","path":"n","value":1}]`, 405, web.KindAppendOnly, "cannot be patched"},
		{rw, "api/collections/posts/records", `[]`, 405, web.KindMethodNotAllowed, ""},
		{ro, post, `[{"op":"set","path":"n","value":1}]`, 403, web.KindForbidden, ""},
	} {
		before := snapshot(t, f)
		r := tc.c.do("PATCH", tc.path, []byte(tc.body))
		name := tc.path + " " + tc.body
		if r.status != tc.status {
			t.Errorf("%s: status %d, want %d: %s", name, r.status, tc.status, r.body)
			continue
		}
		var e web.ErrorResponse
		r.decode(t, &e)
		if e.Error.Kind != tc.kind || !strings.Contains(e.Error.Message, tc.inText) {
			t.Errorf("%s: %s, want kind %s and %q", name, r.body, tc.kind, tc.inText)
		}
		if after := snapshot(t, f); after != before {
			t.Errorf("%s: a refused patch changed the database", name)
		}
	}
	if allow := rw.do("PATCH", event, []byte(`[]`)).header.Get("Allow"); allow != "GET, HEAD, PUT" {
		t.Errorf("PATCH of a log record: Allow %q, want GET, HEAD, PUT", allow)
	}
	if allow := rw.do("POST", post, nil).header.Get("Allow"); allow != "GET, HEAD, PUT, PATCH, DELETE" {
		t.Errorf("POST to a record: Allow %q, want GET, HEAD, PUT, PATCH, DELETE", allow)
	}
}

// TestClientPatch patches through web.Client and wants the record GET
// gives, and the sentinels of the API's errors.
func TestClientPatch(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 3, 1)
		c := newClient(t, f, web.WithWrites())
		ctx := context.Background()
		id := f.postIDs[1]
		got, err := c.Patch(ctx, "posts", id, []web.PatchChange{
			{Op: "inc", Path: "score", By: []byte("3")},
			{Op: "set", Path: "author.name", Value: []byte(`"ada"`)},
			{Op: "addToSet", Path: "tags", Values: []json.RawMessage{[]byte(`"all"`), []byte(`"new"`)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := f.posts.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		want, err := jsonl.AppendRecord(nil, id, rec.Raw())
		if err != nil {
			t.Fatal(err)
		}
		if string(got)+"\n" != string(want) {
			t.Errorf("Patch gave %s, the record is %s", got, want)
		}
		m := rec.Data()
		if m["score"] != int64(10) || m["author"].(storh.Map)["name"] != "ada" || len(m["tags"].([]any)) != 3 {
			t.Errorf("the patched record holds %v", m)
		}
		if got, err := c.Patch(ctx, "posts", id, nil); err != nil || string(got)+"\n" != string(want) {
			t.Errorf("Patch with no changes: %s, %v; want the record unchanged", got, err)
		}
		for _, tc := range []struct {
			coll    string
			changes []web.PatchChange
			want    error
		}{
			{"posts", []web.PatchChange{{Op: "inc", Path: "slug", By: []byte("1")}}, storh.ErrInvalidPatch},
			{"posts", []web.PatchChange{{Op: "set", Path: "slug", Value: []byte(`"p002"`)}}, storh.ErrUniqueViolation},
			{"events", []web.PatchChange{{Op: "unset", Path: "n"}}, storh.ErrWrongKind},
			{"nope", nil, storh.ErrNotFound},
		} {
			target := id
			if tc.coll == "events" {
				target = f.eventIDs[0]
			}
			if _, err := c.Patch(ctx, tc.coll, target, tc.changes); !errors.Is(err, tc.want) {
				t.Errorf("Patch %s %v: %v, want %v", tc.coll, tc.changes, err, tc.want)
			}
		}
	})
}
