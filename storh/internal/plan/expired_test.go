package plan_test

import (
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/codec"
	"github.com/storhdb/storh-go/storh/internal/plan"
)

// TestExpired checks OpExpired and OpLive, the conditions a time to live
// adds: which stored values are times at or before now.
func TestExpired(t *testing.T) {
	now := time.Date(2026, 12, 3, 18, 0, 0, 500, time.UTC)
	east := time.FixedZone("", 14*3600)
	for _, tc := range []struct {
		name    string
		doc     map[string]any
		expired bool
	}{
		{"timestamp before", map[string]any{"exp": now.Add(-time.Nanosecond)}, true},
		{"timestamp at now", map[string]any{"exp": now}, true},
		{"timestamp after", map[string]any{"exp": now.Add(time.Nanosecond)}, false},
		{"text before, UTC", map[string]any{"exp": "2026-12-03T17:59:59Z"}, true},
		{"text at now, fraction", map[string]any{"exp": "2026-12-03T18:00:00.0000005Z"}, true},
		{"text after, fraction", map[string]any{"exp": "2026-12-03T18:00:00.000000501Z"}, false},
		{"text before, +14:00", map[string]any{"exp": now.Add(-time.Second).In(east).Format(time.RFC3339)}, true},
		{"text after, +14:00", map[string]any{"exp": now.Add(time.Second).In(east).Format(time.RFC3339)}, false},
		{"text after, -12:00", map[string]any{"exp": "2026-12-03T06:00:01-12:00"}, false},
		{"text before, -12:00", map[string]any{"exp": "2026-12-03T05:59:59-12:00"}, true},
		{"text, no offset", map[string]any{"exp": "2026-12-03T17:59:59"}, false},
		{"text, a date", map[string]any{"exp": "2026-12-02"}, false},
		{"text, not a time", map[string]any{"exp": "yesterday"}, false},
		{"a number", map[string]any{"exp": now.UnixMilli() - 1000}, false},
		{"null", map[string]any{"exp": nil}, false},
		{"missing", map[string]any{"other": now.Add(-time.Hour)}, false},
		{"a list of times", map[string]any{"exp": []any{now.Add(-time.Hour)}}, false},
		{"a map", map[string]any{"exp": map[string]any{"at": now.Add(-time.Hour)}}, false},
	} {
		payload, err := codec.AppendRecord(nil, tc.doc, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []plan.Op{plan.OpExpired, plan.OpLive} {
			got, err := plan.NewMatcher(&plan.Cond{Op: op, Path: []string{"exp"}, Values: []any{now}}).Match(payload)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if want := tc.expired == (op == plan.OpExpired); got != want {
				t.Errorf("%s: op %d matched %v, want %v", tc.name, op, got, want)
			}
		}
	}
	// Through a list of maps: the earliest time counts.
	doc := map[string]any{"s": []any{map[string]any{"exp": now.Add(time.Hour)}, map[string]any{"exp": now.Add(-time.Hour)}}}
	payload, err := codec.AppendRecord(nil, doc, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := plan.NewMatcher(&plan.Cond{Op: plan.OpLive, Path: []string{"s", "exp"}, Values: []any{now}}).Match(payload); err != nil || ok {
		t.Errorf("a list of maps with one time past: live %v, %v; want expired", ok, err)
	}
}
