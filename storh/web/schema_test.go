package web_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

const scoreSchema = `{"type":"object","required":["slug"],"properties":{"score":{"type":"integer","minimum":0}}}`

// The schema endpoint: GET shows it, PUT sets it (refused while records
// fail it, or when it is not a schema), DELETE removes it; record writes
// the schema refuses answer 422 schema_violation and store nothing.
func TestSchemaEndpoint(t *testing.T) {
	f := newFixture(t, 5, 2)
	c := f.serve(t, web.WithWrites())
	if r := c.get("api/collections/posts/schema"); r.status != 200 || strings.TrimSpace(string(r.body)) != `{"schema":null}` {
		t.Fatalf("GET without a schema: %d %s", r.status, r.body)
	}
	if r := c.do("PUT", "api/collections/posts/schema", []byte(`{"required":["nope"]}`)); r.status != 422 || r.errorKind(t) != web.KindSchema || !strings.Contains(string(r.body), "missing property 'nope'") {
		t.Fatalf("PUT of a schema the records fail: %d %s", r.status, r.body)
	}
	if r := c.do("PUT", "api/collections/posts/schema", []byte(`{"type":"strng"}`)); r.status != 400 || r.errorKind(t) != web.KindInvalidSchema {
		t.Fatalf("PUT of a document that is not a schema: %d %s", r.status, r.body)
	}
	if r := c.do("PUT", "api/collections/jobs/schema", []byte(scoreSchema)); r.status != 409 || r.errorKind(t) != web.KindWrongKind {
		t.Fatalf("PUT of a queue's schema: %d %s", r.status, r.body)
	}
	if r := c.do("PUT", "api/collections/posts/schema", []byte(scoreSchema)); r.status != 200 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	var got web.SchemaDoc
	c.get("api/collections/posts/schema").decode(t, &got)
	if !storhSameJSON(string(got.Schema), scoreSchema) {
		t.Fatalf("GET gives %s", got.Schema)
	}
	before, _ := f.posts.Count()
	id := uuidv7.New()
	r := c.do("PUT", "api/collections/posts/records/"+id.String(), []byte(`{"slug":"x","score":-1}`))
	if r.status != 422 || r.errorKind(t) != web.KindSchema || !strings.Contains(string(r.body), "/score: minimum: got -1, want 0") {
		t.Fatalf("PUT of a record the schema refuses: %d %s", r.status, r.body)
	}
	r = c.do("PATCH", "api/collections/posts/records/"+f.postIDs[0].String(), []byte(`[{"op":"unset","path":"slug"}]`))
	if r.status != 422 || r.errorKind(t) != web.KindSchema {
		t.Fatalf("PATCH the schema refuses: %d %s", r.status, r.body)
	}
	r = c.do("POST", "api/collections/posts/import", []byte(`{"slug":"y","score":1}`+"\n"+`{"score":2}`+"\n"))
	if r.status != 422 || r.errorKind(t) != web.KindSchema {
		t.Fatalf("import of a row the schema refuses: %d %s", r.status, r.body)
	}
	if n, _ := f.posts.Count(); n != before {
		t.Fatalf("the refused writes changed the count from %d to %d", before, n)
	}
	if r := c.do("DELETE", "api/collections/posts/schema", nil); r.status != 200 || strings.TrimSpace(string(r.body)) != `{"schema":null}` {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if r := c.do("PUT", "api/collections/posts/records/"+id.String(), []byte(`{"slug":"x","score":-1}`)); r.status != 200 {
		t.Fatalf("PUT after the schema was removed: %d %s", r.status, r.body)
	}
	// Without WithWrites the schema is read-only.
	ro := f.serve(t)
	if r := ro.do("PUT", "api/collections/posts/schema", []byte(scoreSchema)); r.status != 403 {
		t.Fatalf("PUT without writes: %d %s", r.status, r.body)
	}
}

func TestClientSchema(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 3, 1)
		c := newClient(t, f, web.WithWrites())
		ctx := context.Background()
		if got, err := c.Schema(ctx, "posts"); err != nil || got != nil {
			t.Fatalf("Schema = %s, %v; want none", got, err)
		}
		if err := c.SetSchema(ctx, "posts", []byte(scoreSchema)); err != nil {
			t.Fatal(err)
		}
		got, err := c.Schema(ctx, "posts")
		if err != nil || !storhSameJSON(string(got), scoreSchema) {
			t.Fatalf("Schema = %s, %v", got, err)
		}
		if err := c.SetSchema(ctx, "posts", []byte(`{"required":["nope"]}`)); !errors.Is(err, storh.ErrSchema) {
			t.Fatalf("SetSchema the records fail: %v", err)
		}
		if err := c.SetSchema(ctx, "posts", []byte(`[`)); !errors.Is(err, storh.ErrInvalidOption) {
			t.Fatalf("SetSchema of a document that is not JSON: %v", err)
		}
		if err := c.SetSchema(ctx, "nope", []byte(scoreSchema)); !errors.Is(err, storh.ErrNotFound) {
			t.Fatalf("SetSchema of a missing collection: %v", err)
		}
		if err := c.SetSchema(ctx, "posts", nil); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Schema(ctx, "posts"); err != nil || got != nil {
			t.Fatalf("Schema after removing = %s, %v", got, err)
		}
	})
}

// storhSameJSON compares JSON texts by value, as the store keeps the
// document as given and an answer re-encodes it.
func storhSameJSON(a, b string) bool {
	return compact(a) == compact(b)
}

func compact(s string) string { return strings.Join(strings.Fields(s), "") }
