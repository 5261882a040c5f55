package web

import (
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
)

// TestAggParamRoundTrip: whatever its name and path hold (':', '{', '=',
// spaces, any text), an aggregate the client sends as an agg parameter is
// the one the handler reads back.
func TestAggParamRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z:{}."= ]{0,8}`))
		a := Aggregation{Op: rapid.SampledFrom([]string{"count", "sum", "avg", "min", "max"}).Draw(t, "op"), Name: text.Draw(t, "name")}
		if a.Op != "count" || rapid.Bool().Draw(t, "count with a path") {
			a.Path = text.Draw(t, "path")
		}
		got, err := parseAggParam(a.param())
		if err != nil || got != a {
			t.Fatalf("%+v sent as agg=%q reads back as %+v, %v", a, a.param(), got, err)
		}
	})
}

// TestAggParam pins the short form and what it refuses.
func TestAggParam(t *testing.T) {
	for _, tc := range []struct {
		param string
		want  Aggregation
		bad   bool
	}{
		{param: "count:n", want: Aggregation{Op: "count", Name: "n"}},
		{param: "sum:total:amount", want: Aggregation{Op: "sum", Name: "total", Path: "amount"}},
		{param: "max:m:a.b:c", want: Aggregation{Op: "max", Name: "m", Path: "a.b:c"}},
		{param: `{"op":"avg","name":"a:b","path":"x"}`, want: Aggregation{Op: "avg", Name: "a:b", Path: "x"}},
		{param: "count", bad: true},
		{param: "", bad: true},
		{param: `{"op":"avg","name":"a","path":"x","extra":1}`, bad: true},
		{param: `{"op":"avg"} {}`, bad: true},
		{param: `{"op":1}`, bad: true},
	} {
		got, err := parseAggParam(tc.param)
		switch {
		case tc.bad && !errors.Is(err, storh.ErrInvalidQuery):
			t.Errorf("agg=%q: %+v, %v; want ErrInvalidQuery", tc.param, got, err)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("agg=%q: %+v, %v; want %+v", tc.param, got, err, tc.want)
		}
	}
	for _, a := range []Aggregation{{Op: "count", Name: "n", Path: "x"}, {Op: "sum", Name: "s"}, {Op: "median", Name: "m", Path: "x"}, {Name: "n"}} {
		if _, err := a.Agg(); !errors.Is(err, storh.ErrInvalidQuery) {
			t.Errorf("%+v.Agg(): %v; want ErrInvalidQuery", a, err)
		}
	}
}
