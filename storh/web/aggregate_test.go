package web_test

import (
	"context"
	"errors"
	"math"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// TestAggregateEndpoint covers the statuses and kinds of GET
// api/collections/{name}/aggregate, and pins its JSON.
func TestAggregateEndpoint(t *testing.T) {
	f := newFixture(t, 20, 9)
	c := f.serve(t)
	q := url.QueryEscape
	for _, tc := range []struct {
		path   string
		status int
		kind   string
		body   string // the whole answer, when given
	}{
		{path: "posts/aggregate?group=kind&agg=count:n&agg=max:top:score", status: 200,
			body: `{"groups":[{"key":["note"],"values":{"n":6,"top":10}},{"key":["page"],"values":{"n":7,"top":7}},{"key":["post"],"values":{"n":7,"top":10}}]}`},
		// One group of everything selected; none when nothing is.
		{path: "posts/aggregate?agg=count:n&agg=sum:s:score&q=" + q("kind=note"), status: 200,
			body: `{"groups":[{"key":[],"values":{"n":6,"s":25}}]}`},
		{path: "posts/aggregate?agg=count:n&from=2030-01-01T00:00:00Z", status: 200, body: `{"groups":[]}`},
		// A missing field is the null group, first; a nested path groups; a
		// sum is a float once a float is summed, and int 0 over no number.
		{path: "posts/aggregate?group=author.name&agg=sum:r:ratio&agg=avg:mean:score", status: 200,
			body: `{"groups":[{"key":[null],"values":{"mean":5.375,"r":10.0}},{"key":["a0"],"values":{"mean":2.0,"r":0.0}},{"key":["a1"],"values":{"mean":4.0,"r":0}}]}`},
		{path: "events/aggregate?group=level&agg=min:first:n&after=" + f.eventIDs[2].String(), status: 200,
			body: `{"groups":[{"key":["error"],"values":{"first":5}},{"key":["info"],"values":{"first":3}},{"key":["warn"],"values":{"first":4}}]}`},
		{path: "posts/aggregate?group=kind&agg=count:n&explain=1", status: 200},
		{path: "posts/aggregate?agg=" + q(`{"op":"count","name":"a:b"}`), status: 200, body: `{"groups":[{"key":[],"values":{"a:b":20}}]}`},

		{path: "posts/aggregate", status: 400, kind: "invalid_query"},
		{path: "posts/aggregate?group=kind", status: 400, kind: "invalid_query"},
		{path: "posts/aggregate?agg=count", status: 400, kind: "invalid_query"},
		{path: "posts/aggregate?agg=median:m:score", status: 400, kind: "invalid_query"},
		{path: "posts/aggregate?agg=sum:s", status: 400, kind: "invalid_query"},
		{path: "posts/aggregate?agg=count:n:score", status: 400, kind: "invalid_query"},
		{path: "posts/aggregate?agg=count:n&agg=sum:n:score", status: 400, kind: "invalid_query"},
		{path: "posts/aggregate?agg=count:&group=kind", status: 400, kind: "invalid_query"},
		{path: "posts/aggregate?agg=count:n&group=", status: 400, kind: "invalid_query"},
		{path: "posts/aggregate?agg=count:n&group=tags.x", status: 400, kind: "invalid_query"},
		{path: "posts/aggregate?agg=count:n&q=" + q(`{"op":"eq"}`), status: 400, kind: "invalid_query"},
		{path: "posts/aggregate?agg=count:n&order=score", status: 400, kind: "bad_request"},
		{path: "posts/aggregate?agg=count:n&limit=3", status: 400, kind: "bad_request"},
		{path: "posts/aggregate?agg=count:n&newest=1", status: 400, kind: "bad_request"},
		{path: "posts/aggregate?agg=count:n&explain=maybe", status: 400, kind: "bad_request"},
		{path: "posts/aggregate?agg=count:n&explain=1&explain=0", status: 400, kind: "bad_request"},
		{path: "posts/aggregate?agg=count:n&after=xyz", status: 400, kind: "bad_request"},
		{path: "posts/aggregate?agg=count:n&q=a&q=b", status: 400, kind: "bad_request"},
		{path: "nope/aggregate?agg=count:n", status: 404, kind: "not_found"},
		{path: "jobs/aggregate?agg=count:n", status: 409, kind: "wrong_kind"},
	} {
		r := c.get("api/collections/" + tc.path)
		if r.status != tc.status {
			t.Errorf("GET %s: %d %s; want %d", tc.path, r.status, r.body, tc.status)
			continue
		}
		if tc.kind != "" {
			if k := r.errorKind(t); k != tc.kind {
				t.Errorf("GET %s: kind %q (%s); want %q", tc.path, k, r.body, tc.kind)
			}
		}
		if tc.body != "" && strings.TrimSpace(string(r.body)) != tc.body {
			t.Errorf("GET %s:\n%s\nwant\n%s", tc.path, r.body, tc.body)
		}
	}
	if r := c.do("POST", "api/collections/posts/aggregate?agg=count:n", nil); r.status != 405 || r.errorKind(t) != "method_not_allowed" {
		t.Errorf("POST aggregate: %d %s; want 405", r.status, r.body)
	}
	var plan web.Plan
	c.get("api/collections/posts/aggregate?group=score&agg=count:n&explain=1").decode(t, &plan)
	if plan.RecordsRead != 0 || len(plan.Indexes) != 1 || plan.Indexes[0] != "score" || plan.Returned != 11 || plan.Text == "" {
		t.Errorf("explain of a count grouped by an indexed path: %+v; want index entries only, 11 groups", plan)
	}
}

// TestClientAggregate: through the client, on both backends, an aggregate
// gives what Aggregate gives on the database, value types and all (times,
// ids, integers beyond int64, NaN, lists and maps as group keys), and
// ExplainAggregate the plan it gives there.
func TestClientAggregate(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 0, 0)
		things, err := f.db.Docs("things", storh.WithIndex(storh.Index("kind")))
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
		id := uuidv7.NewDeterministic(3, startMs, 1).New()
		for i, data := range []storh.Map{
			{"kind": "a", "n": int64(1), "at": at, "ref": id, "big": uint64(math.MaxUint64), "x:y": int64(2)},
			{"kind": "a", "n": 2.5, "at": at.Add(time.Hour), "tags": []any{"go", "db"}, "big": int64(-1)},
			{"kind": "b", "n": math.NaN(), "bin": []byte{0, 1, 2}, "m": storh.Map{"k": "v"}},
			{"kind": []any{"x", int64(1)}, "n": "not a number"},
			{"n": int64(7)},
		} {
			if _, err := things.PutWithID(uuidv7.NewDeterministic(4, startMs+int64(i)*1000, 1).New(), data); err != nil {
				t.Fatal(err)
			}
		}
		c := newClient(t, f)
		ctx := context.Background()
		level, err := query.Parse("n exists")
		if err != nil {
			t.Fatal(err)
		}
		aggs := []web.Aggregation{
			{Op: "count", Name: "n:all"}, {Op: "sum", Name: "sum", Path: "n"}, {Op: "avg", Name: "avg", Path: "n"},
			{Op: "min", Name: "first", Path: "at"}, {Op: "max", Name: "last", Path: "at"}, {Op: "max", Name: "ref", Path: "ref"},
			{Op: "max", Name: "big", Path: "big"}, {Op: "min", Name: "bin", Path: "bin"}, {Op: "max", Name: "m", Path: "m"},
			{Op: "sum", Name: "colon", Path: "x:y"},
		}
		for _, tc := range []struct {
			sel     web.Selection
			groupBy []string
			aggs    []web.Aggregation
		}{
			{groupBy: []string{"kind"}, aggs: aggs},
			{groupBy: []string{"tags", "kind"}, aggs: aggs},
			{aggs: aggs},
			{sel: web.Selection{Where: []query.Cond{level}, FromMs: ptr(int64(startMs + 1000))}, groupBy: []string{"kind"}, aggs: aggs[:3]},
			{groupBy: []string{"kind"}, aggs: aggs[:1]}, // counted from the index's entries
		} {
			q := query.All()
			if len(tc.sel.Where) > 0 {
				q = q.Where(query.And(tc.sel.Where...))
			}
			if tc.sel.FromMs != nil {
				q = q.TimeRangeMs(*tc.sel.FromMs, math.MaxInt64)
			}
			qaggs := make([]query.Agg, len(tc.aggs))
			for i, a := range tc.aggs {
				if qaggs[i], err = a.Agg(); err != nil {
					t.Fatal(err)
				}
			}
			want, err := things.Aggregate(q, tc.groupBy, qaggs...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Aggregate(ctx, "things", tc.sel, tc.groupBy, tc.aggs)
			if err != nil {
				t.Fatal(err)
			}
			if !sameGroups(got, want) {
				t.Errorf("group by %q %+v:\n got %#v\nwant %#v", tc.groupBy, tc.aggs, got, want)
			}
			wantPlan, err := things.ExplainAggregate(q, tc.groupBy, qaggs...)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := c.ExplainAggregate(ctx, "things", tc.sel, tc.groupBy, tc.aggs)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Text != wantPlan.String() || plan.RecordsRead != wantPlan.RecordsRead || plan.KeysRead != wantPlan.KeysRead {
				t.Errorf("group by %q: plan %+v; want %v", tc.groupBy, plan, wantPlan)
			}
		}
		_, err = c.Aggregate(ctx, "things", web.Selection{}, []string{"kind"}, []web.Aggregation{{Op: "count", Name: "n"}, {Op: "count", Name: "n"}})
		var we *web.Error
		if !errors.As(err, &we) || we.Kind != web.KindInvalidQuery || !errors.Is(err, storh.ErrInvalidQuery) {
			t.Errorf("two aggregates named n: %v; want an invalid_query *web.Error", err)
		}
		if _, err := c.Aggregate(ctx, "nope", web.Selection{}, nil, aggs[:1]); !errors.Is(err, storh.ErrNotFound) {
			t.Errorf("aggregate of a missing collection: %v; want ErrNotFound", err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// sameGroups compares groups as Aggregate's values compare: NaN is NaN.
func sameGroups(got, want []storh.Group) bool {
	nan := func(v any) bool { f, ok := v.(float64); return ok && math.IsNaN(f) }
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !reflect.DeepEqual(got[i].Key, want[i].Key) || len(got[i].Values) != len(want[i].Values) {
			return false
		}
		for k, w := range want[i].Values {
			if g := got[i].Values[k]; !(nan(g) && nan(w)) && !reflect.DeepEqual(g, w) {
				return false
			}
		}
	}
	return true
}
