package storh_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The expiry model test drives a docs collection opened WithTTL("exp") or
// WithTTL("exp.at"), with or without an index on the path,
// with a fake clock (WithClock) and checks every read against a reference:
// a map of the stored records and the time each expires at, if any.

// ttlRef is one stored record of the reference.
type ttlRef struct {
	expires bool      // exp holds a time (a timestamp or RFC 3339 text)
	at      time.Time // when, if expires
	nested  []any     // for a record that holds its times under exp.at, in a list of maps
}

type ttlModel struct {
	nested bool // the TTL path is exp.at, else exp
	path   string
	clk    *testClock
	index  bool
	db     *storh.DB
	docs   *storh.Docs
	stored map[uuidv7.UUID]ttlRef
	ever   []uuidv7.UUID // every id ever put, deleted ones too
}

func (m *ttlModel) open(t *rapid.T) {
	db, err := storh.Open(m.path, storh.WithoutSync(), storh.WithClock(m.clk.Now), storh.WithoutBackground())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	m.db = db
	opts := []storh.CollectionOption{storh.WithTTL(m.ttlPath())}
	if m.index {
		opts = append(opts, storh.WithIndex(storh.Index(m.ttlPath())))
	}
	if m.docs, err = db.Docs("sessions", opts...); err != nil {
		t.Fatal(err)
	}
}

// ttlPath is the TTL path: a field, or one in a map (or a list of maps).
func (m *ttlModel) ttlPath() string {
	if m.nested {
		return "exp.at"
	}
	return "exp"
}

func (m *ttlModel) expired(r ttlRef) bool { return r.expires && !r.at.After(m.clk.Now()) }

// live is the ids a read must see, in id order.
func (m *ttlModel) live() []uuidv7.UUID {
	var out []uuidv7.UUID
	for id, r := range m.stored {
		if !m.expired(r) {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b uuidv7.UUID) int { return a.Compare(b) })
	return out
}

// drawExp draws the value of exp: a time near now as a time.Time or as RFC
// 3339 text in some offset, a list of times, or something that never
// expires (no field, a number, text that is no time, a map).
func (m *ttlModel) drawExp(t *rapid.T) (any, ttlRef) {
	at := m.clk.Now().Add(time.Duration(rapid.Int64Range(-3000, 3000).Draw(t, "exp ms")) * time.Millisecond).
		Add(time.Duration(rapid.Int64Range(0, 999_999).Draw(t, "exp ns")))
	switch rapid.IntRange(0, 7).Draw(t, "exp kind") {
	case 6:
		// A list at the end of the path is no time, even of times.
		return []any{at}, ttlRef{}
	case 7:
		if !m.nested {
			return "", ttlRef{}
		}
		// Through a list of maps the path reaches a time in each: the
		// record expires at the earliest.
		later := at.Add(time.Duration(rapid.Int64Range(0, 3000).Draw(t, "later ms")) * time.Millisecond)
		return nil, ttlRef{expires: true, at: at, nested: []any{storh.Map{"at": later}, storh.Map{"at": at}}}
	case 0:
		return at, ttlRef{expires: true, at: at}
	case 1:
		zone := time.FixedZone("", rapid.IntRange(-12*4, 14*4).Draw(t, "offset quarters")*15*60)
		layout := rapid.SampledFrom([]string{time.RFC3339, time.RFC3339Nano}).Draw(t, "layout")
		s := at.In(zone).Format(layout)
		parsed, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return s, ttlRef{expires: true, at: parsed}
	case 2:
		return nil, ttlRef{} // no field at all
	case 3:
		return at.UnixMilli(), ttlRef{} // a number is no time
	case 4:
		return "soon", ttlRef{}
	default:
		return storh.Map{"at": at}, ttlRef{} // a map is no time
	}
}

func (m *ttlModel) put(t *rapid.T, id uuidv7.UUID, exp any, ref ttlRef) {
	data := storh.Map{"n": len(m.ever)}
	if exp != nil {
		data["exp"] = exp
		if m.nested {
			data["exp"] = storh.Map{"at": exp}
		}
	}
	if ref.nested != nil {
		data["exp"] = ref.nested
	}
	var err error
	if id.IsZero() {
		var rec storh.Record
		rec, err = m.docs.Put(data)
		id = rec.ID
		m.ever = append(m.ever, id)
	} else {
		_, err = m.docs.PutWithID(id, data)
	}
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	m.stored[id] = ref
}

func TestTTLModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &ttlModel{path: newPath(t), clk: newTestClock(), index: rapid.Bool().Draw(rt, "index"), nested: rapid.Bool().Draw(rt, "nested"),
			stored: map[uuidv7.UUID]ttlRef{}}
		m.open(rt)
		defer func() { m.db.Close() }()
		rt.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				exp, ref := m.drawExp(t)
				m.put(t, uuidv7.UUID{}, exp, ref)
			},
			"replace": func(t *rapid.T) {
				// A record put again with a new time lives by the new one,
				// whether or not it had expired.
				if len(m.ever) == 0 {
					t.Skip("nothing put yet")
				}
				id := rapid.SampledFrom(m.ever).Draw(t, "id")
				exp, ref := m.drawExp(t)
				m.put(t, id, exp, ref)
			},
			"advance": func(t *rapid.T) {
				m.clk.Advance(time.Duration(rapid.Int64Range(0, 2000).Draw(t, "advance ms")) * time.Millisecond)
			},
			"get": func(t *rapid.T) {
				if len(m.ever) == 0 {
					t.Skip("nothing put yet")
				}
				id := rapid.SampledFrom(m.ever).Draw(t, "id")
				_, err := m.docs.Get(id)
				r, ok := m.stored[id]
				if ok && !m.expired(r) {
					if err != nil {
						t.Fatalf("Get(%s) of a live record: %v", id, err)
					}
				} else if !errors.Is(err, storh.ErrNotFound) {
					t.Fatalf("Get(%s) of a record stored %v, expired %v: %v, want ErrNotFound", id, ok, m.expired(r), err)
				}
			},
			"find": func(t *rapid.T) {
				recs, err := m.docs.Find(query.All())
				if err != nil {
					t.Fatal(err)
				}
				if got, want := ids(recs), m.live(); !sameIDs(got, want) {
					t.Fatalf("Find: %d records %v, want %d %v", len(got), got, len(want), want)
				}
			},
			"find by index": func(t *rapid.T) {
				// A condition the index on exp decides alone: the expired
				// records are still skipped.
				recs, err := m.docs.Find(query.All().Where(query.Field(m.ttlPath()).Exists()))
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, rec := range recs {
					if r, ok := m.stored[rec.ID]; !ok || m.expired(r) {
						t.Fatalf("Find(exp.at exists) returned %s, stored %v, expired", rec.ID, ok)
					}
					n++
				}
				c, err := m.docs.CountMatching(query.All().Where(query.Field(m.ttlPath()).Exists()))
				if err != nil || c != n {
					t.Fatalf("CountMatching(exp.at exists) = %d, %v; Find returned %d", c, err, n)
				}
			},
			"count": func(t *rapid.T) {
				live := len(m.live())
				n, err := m.docs.CountMatching(query.All())
				if err != nil || n != live {
					t.Fatalf("CountMatching = %d, %v; want %d", n, err, live)
				}
				groups, err := m.docs.Aggregate(query.All(), nil, query.Count("n"))
				if err != nil {
					t.Fatal(err)
				}
				agg := 0
				if len(groups) == 1 {
					agg = int(groups[0].Values["n"].(int64))
				}
				if agg != live {
					t.Fatalf("Aggregate count = %d (%v), want %d", agg, groups, live)
				}
				// Count is the stored count: expired records until swept.
				if n, err := m.docs.Count(); err != nil || n != len(m.stored) {
					t.Fatalf("Count = %d, %v; want %d stored", n, err, len(m.stored))
				}
			},
			"apply": func(t *rapid.T) {
				want := 0
				for id, r := range m.stored {
					if m.expired(r) {
						delete(m.stored, id)
						want++
					}
				}
				n, err := m.docs.ApplyTTL()
				if err != nil || n != want {
					t.Fatalf("ApplyTTL = %d, %v; want %d", n, err, want)
				}
			},
			"reopen": func(t *rapid.T) {
				if err := m.db.Close(); err != nil {
					t.Fatal(err)
				}
				m.open(t)
			},
		})
	})
}
