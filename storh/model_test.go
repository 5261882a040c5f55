package storh_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The model-based test drives a database with random operations and checks
// it after every step against a plain in-memory reference: one map of id →
// data per collection. Ids stay within a few milliseconds so that cursors
// and time windows constantly land on and next to stored records.

const modelBaseMs = 1_700_000_000_000

const (
	collDocs = "d"
	collLog  = "l"
)

type modelRecord = map[string]any

// modelNorm brings a value the test stores into the form the store returns:
// one Go type per kind. It covers only the types genData produces.
func modelNorm(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int32:
		return int64(x)
	case uint16:
		return int64(x)
	case uint:
		return int64(x)
	case float32:
		return float64(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = modelNorm(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = modelNorm(e)
		}
		return out
	}
	return v
}

// Scalars in several Go types, chosen so that equal values of different
// types are common (1, int8(1), uint(1), 1.0, "1").
var scalarChoices = []any{
	0, 1, 2, -1, int8(1), int32(-1), uint16(2), uint(1),
	0.5, 1.0, float32(0.5), float32(1),
	"", "a", "b", "1",
	true, false, nil,
}

func genScalar(t *rapid.T, label string) any {
	return rapid.SampledFrom(scalarChoices).Draw(t, label)
}

func genData(t *rapid.T) map[string]any {
	m := map[string]any{}
	for _, f := range []string{"i", "s", "b", "n", "f"} {
		if rapid.IntRange(0, 3).Draw(t, "has "+f) > 0 {
			m[f] = genScalar(t, f)
		}
	}
	if rapid.Bool().Draw(t, "nested") {
		m["x"] = []any{genScalar(t, "x0"), map[string]any{"y": genScalar(t, "y")}}
	}
	return m
}

// idQueue feeds the collections' id generator: each operation queues the
// ids its generated-id writes should receive.
type idQueue struct {
	ids       []uuidv7.UUID
	underflow bool
}

func (q *idQueue) next() uuidv7.UUID {
	if len(q.ids) == 0 {
		q.underflow = true
		return uuidv7.New()
	}
	id := q.ids[0]
	q.ids = q.ids[1:]
	return id
}

type modelState struct {
	path  string
	db    *storh.DB
	docs  *storh.Docs
	log   *storh.Log
	gen   idQueue
	model map[string]map[uuidv7.UUID]modelRecord
}

func (s *modelState) open(t *rapid.T) {
	db, err := storh.Open(s.path, storh.WithoutSync())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s.db = db
	if s.docs, err = db.Docs(collDocs, storh.WithIDGenerator(s.gen.next)); err != nil {
		t.Fatal(err)
	}
	if s.log, err = db.Log(collLog, storh.WithIDGenerator(s.gen.next)); err != nil {
		t.Fatal(err)
	}
}

func (s *modelState) drawColl(t *rapid.T) string {
	return rapid.SampledFrom([]string{collDocs, collLog}).Draw(t, "coll")
}

// newID mints an id that is not stored, at one of a few milliseconds.
func (s *modelState) newID(t *rapid.T) uuidv7.UUID {
	ms := modelBaseMs + rapid.Int64Range(0, 5).Draw(t, "ms")
	id, err := uuidv7.NewAt(ms)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (s *modelState) sortedIDs(coll string) []uuidv7.UUID {
	out := make([]uuidv7.UUID, 0, len(s.model[coll]))
	for id := range s.model[coll] {
		out = append(out, id)
	}
	slices.SortFunc(out, uuidv7.UUID.Compare)
	return out
}

// existingID draws a stored id of coll; ok is false when coll is empty.
func (s *modelState) existingID(t *rapid.T, coll string) (uuidv7.UUID, bool) {
	all := s.sortedIDs(coll)
	if len(all) == 0 {
		return uuidv7.UUID{}, false
	}
	return rapid.SampledFrom(all).Draw(t, "existing"), true
}

func (s *modelState) badID(t *rapid.T) uuidv7.UUID {
	switch rapid.IntRange(0, 2).Draw(t, "bad id") {
	case 0:
		return uuidv7.UUID{}
	case 1:
		return v4ID
	}
	id := s.newID(t)
	id[8] |= 0xc0 // variant 11
	return id
}

// writer abstracts DB-level and tx-bound handles of either kind.
type writer interface {
	Put(any) (storh.Record, error)
	PutWithID(uuidv7.UUID, any) (storh.Record, error)
	PutMany([]any) ([]storh.Record, error)
	Count() (int, error)
}

func (s *modelState) handle(coll string) writer {
	if coll == collDocs {
		return s.docs
	}
	return s.log
}

func wantErr(t *rapid.T, op string, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("%s: unexpected error %v", op, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v; want %v", op, err, want)
	}
}

// putOne performs one single-record write through w and applies it to m.
func (s *modelState) putOne(t *rapid.T, w writer, coll string, m map[uuidv7.UUID]modelRecord) error {
	data := genData(t)
	switch rapid.IntRange(0, 4).Draw(t, "put form") {
	case 0: // generated id
		id := s.newID(t)
		s.gen.ids = append(s.gen.ids, id)
		rec, err := w.Put(data)
		wantErr(t, "Put", err, nil)
		if rec.ID != id {
			t.Fatalf("Put stored under %v; the generator gave %v", rec.ID, id)
		}
		m[id] = modelNorm(data).(modelRecord)
		return nil
	case 1: // the generator repeats a stored id
		id, ok := s.existingID(t, coll)
		if !ok {
			return nil
		}
		s.gen.ids = append(s.gen.ids, id)
		_, err := w.Put(data)
		if coll == collLog {
			wantErr(t, "log Put of a repeated id", err, storh.ErrExists)
			return err
		}
		wantErr(t, "docs Put of a repeated id", err, nil)
		m[id] = modelNorm(data).(modelRecord)
		return nil
	case 2: // the generator returns a bad id
		s.gen.ids = append(s.gen.ids, s.badID(t))
		_, err := w.Put(data)
		wantErr(t, "Put with a bad generated id", err, storh.ErrInvalidID)
		return err
	case 3: // explicit id, new or existing
		id := s.newID(t)
		if rapid.Bool().Draw(t, "reuse id") {
			if e, ok := s.existingID(t, coll); ok {
				id = e
			}
		}
		_, exists := m[id]
		rec, err := w.PutWithID(id, data)
		if exists && coll == collLog {
			wantErr(t, "log PutWithID of a stored id", err, storh.ErrExists)
			return err
		}
		wantErr(t, "PutWithID", err, nil)
		if rec.ID != id || !reflect.DeepEqual(rec.Data(), modelNorm(data)) {
			t.Fatalf("PutWithID returned %v %v", rec.ID, rec.Data())
		}
		m[id] = modelNorm(data).(modelRecord)
		return nil
	default: // explicit bad id
		_, err := w.PutWithID(s.badID(t), data)
		wantErr(t, "PutWithID with a bad id", err, storh.ErrInvalidID)
		return err
	}
}

// drawBatch draws items for PutMany or PutStream and the outcome expected on
// a collection holding m: the records to store, or the error.
func (s *modelState) drawBatch(t *rapid.T, coll string, m map[uuidv7.UUID]modelRecord) ([]any, map[uuidv7.UUID]modelRecord, error) {
	n := rapid.IntRange(0, 6).Draw(t, "batch size")
	items := make([]any, 0, n)
	out := map[uuidv7.UUID]modelRecord{}
	var wantErr error
	seen := map[uuidv7.UUID]bool{}
	for i := range n {
		data := genData(t)
		var id uuidv7.UUID
		switch rapid.IntRange(0, 5).Draw(t, "item form") {
		case 0, 1:
			id = s.newID(t)
			s.gen.ids = append(s.gen.ids, id)
			items = append(items, data)
		case 2:
			id = s.newID(t)
			items = append(items, storh.Entry{ID: id, Data: data})
		case 3:
			e, ok := s.existingID(t, coll)
			if !ok {
				e = s.newID(t)
			}
			id = e
			items = append(items, &storh.Entry{ID: id, Data: data})
		case 4:
			if i > 0 { // the same id twice in one batch
				prev := items[rapid.IntRange(0, i-1).Draw(t, "repeat")]
				if e, ok := prev.(storh.Entry); ok {
					id = e.ID
					items = append(items, storh.Entry{ID: id, Data: data})
					break
				}
			}
			id = s.newID(t)
			items = append(items, storh.Entry{ID: id, Data: data})
		default: // a bad item
			if wantErr == nil || errors.Is(wantErr, storh.ErrExists) {
				wantErr = storh.ErrInvalidData
			}
			items = append(items, rapid.SampledFrom([]any{42, "text", storh.Map(nil), storh.Map{"c": make(chan int)}}).Draw(t, "bad item"))
			continue
		}
		_, stored := m[id]
		if coll == collLog && (stored || seen[id]) && wantErr == nil {
			wantErr = storh.ErrExists
		}
		seen[id] = true
		out[id] = modelNorm(data).(modelRecord)
	}
	if wantErr != nil {
		return items, nil, wantErr
	}
	return items, out, nil
}

func (s *modelState) putMany(t *rapid.T, w writer, coll string, m map[uuidv7.UUID]modelRecord) error {
	items, out, want := s.drawBatch(t, coll, m)
	recs, err := w.PutMany(items)
	wantErr(t, "PutMany", err, want)
	if err != nil {
		return err
	}
	if len(recs) != len(items) {
		t.Fatalf("PutMany returned %d records for %d items", len(recs), len(items))
	}
	maps.Copy(m, out)
	return nil
}

func (s *modelState) checkColl(t *rapid.T, coll string) {
	h := s.handle(coll)
	n, err := h.Count()
	if err != nil {
		t.Fatalf("Count(%s): %v", coll, err)
	}
	if n != len(s.model[coll]) {
		t.Fatalf("Count(%s) = %d; model has %d", coll, n, len(s.model[coll]))
	}
	s.compare(t, coll, query.All(), s.sortedIDs(coll))
}

// compare runs q on coll and checks ids and data against want.
func (s *modelState) compare(t *rapid.T, coll string, q query.Query, want []uuidv7.UUID) {
	var stream func(query.Query) func(func(storh.Record, error) bool)
	if coll == collDocs {
		stream = func(q query.Query) func(func(storh.Record, error) bool) { return s.docs.Stream(q) }
	} else {
		stream = func(q query.Query) func(func(storh.Record, error) bool) { return s.log.Stream(q) }
	}
	i := 0
	for rec, err := range stream(q) {
		if err != nil {
			t.Fatalf("%s %v: %v", coll, q, err)
		}
		if i >= len(want) {
			t.Fatalf("%s %v: more than the %d expected records (extra %v)", coll, q, len(want), rec.ID)
		}
		if rec.ID != want[i] {
			t.Fatalf("%s %v: record %d is %v; want %v (all wanted: %v)", coll, q, i, rec.ID, want[i], want)
		}
		if got := rec.Data(); !reflect.DeepEqual(got, s.model[coll][rec.ID]) {
			t.Fatalf("%s %v: record %v holds %#v; model %#v", coll, q, rec.ID, got, s.model[coll][rec.ID])
		}
		i++
	}
	if i != len(want) {
		t.Fatalf("%s %v: %d records; want %d (%v)", coll, q, i, len(want), want)
	}
}

func (s *modelState) drawBound(t *rapid.T, coll string) uuidv7.UUID {
	ms := modelBaseMs + rapid.Int64Range(-1, 6).Draw(t, "bound ms")
	switch rapid.IntRange(0, 3).Draw(t, "bound form") {
	case 0:
		if id, ok := s.existingID(t, coll); ok {
			return id
		}
		return s.newID(t)
	case 1:
		return uuidv7.MinForTimestampMs(ms)
	case 2:
		return uuidv7.MaxForTimestampMs(ms)
	}
	return s.newID(t)
}

// query draws a random query and checks it against the model.
func (s *modelState) query(t *rapid.T) {
	coll := s.drawColl(t)
	q := query.All()
	var pred []func(uuidv7.UUID, modelRecord) bool
	if rapid.Bool().Draw(t, "after") {
		b := s.drawBound(t, coll)
		q = q.After(b)
		pred = append(pred, func(id uuidv7.UUID, _ modelRecord) bool { return id.Compare(b) > 0 })
	}
	if rapid.Bool().Draw(t, "before") {
		b := s.drawBound(t, coll)
		q = q.Before(b)
		pred = append(pred, func(id uuidv7.UUID, _ modelRecord) bool { return id.Compare(b) < 0 })
	}
	if rapid.Bool().Draw(t, "window") {
		from := modelBaseMs + rapid.Int64Range(-2, 7).Draw(t, "from")
		until := modelBaseMs + rapid.Int64Range(-2, 7).Draw(t, "until")
		q = q.TimeRangeMs(from, until)
		pred = append(pred, func(id uuidv7.UUID, _ modelRecord) bool {
			ms := id.TimestampMs()
			return from <= ms && ms <= until
		})
	}
	for i := range rapid.IntRange(0, 2).Draw(t, "conditions") {
		field := rapid.SampledFrom([]string{"i", "s", "b", "n", "f", "missing"}).Draw(t, fmt.Sprint("field", i))
		value := genScalar(t, fmt.Sprint("value", i))
		q = q.WhereEqual(field, value)
		want := modelNorm(value)
		pred = append(pred, func(_ uuidv7.UUID, r modelRecord) bool {
			got, ok := r[field]
			return ok && reflect.TypeOf(got) == reflect.TypeOf(want) && got == want
		})
	}
	var want []uuidv7.UUID
	for _, id := range s.sortedIDs(coll) {
		keep := true
		for _, p := range pred {
			keep = keep && p(id, s.model[coll][id])
		}
		if keep {
			want = append(want, id)
		}
	}
	if rapid.Bool().Draw(t, "reverse") {
		q = q.Reverse()
		slices.Reverse(want)
	}
	if rapid.Bool().Draw(t, "limit") {
		n := rapid.IntRange(1, 4).Draw(t, "n")
		q = q.Limit(n)
		want = want[:min(n, len(want))]
	}
	s.compare(t, coll, q, want)
}

func copyModel(m map[string]map[uuidv7.UUID]modelRecord) map[string]map[uuidv7.UUID]modelRecord {
	out := make(map[string]map[uuidv7.UUID]modelRecord, len(m))
	for k, v := range m {
		out[k] = maps.Clone(v)
	}
	return out
}

// update runs a transaction of random writes over both collections, checks
// what the transaction sees of its own writes, and commits or rolls back.
func (s *modelState) update(t *rapid.T) {
	staged := copyModel(s.model)
	steps := rapid.IntRange(1, 5).Draw(t, "tx steps")
	rollback := rapid.IntRange(0, 3).Draw(t, "rollback") == 0
	errRollback := errors.New("rollback")
	err := s.db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs(collDocs, storh.WithIDGenerator(s.gen.next))
		if err != nil {
			return err
		}
		l, err := tx.Log(collLog, storh.WithIDGenerator(s.gen.next))
		if err != nil {
			return err
		}
		for range steps {
			coll := s.drawColl(t)
			var w writer = d
			if coll == collLog {
				w = l
			}
			switch rapid.IntRange(0, 3).Draw(t, "tx op") {
			case 0, 1:
				_ = s.putOne(t, w, coll, staged[coll])
			case 2:
				// A failed PutMany may leave part of its items in the
				// transaction: roll back, as the documentation says.
				if err := s.putMany(t, w, coll, staged[coll]); err != nil {
					return err
				}
			default:
				if coll != collDocs {
					continue
				}
				id := s.newID(t)
				if e, ok := s.existingID(t, coll); ok && rapid.Bool().Draw(t, "delete existing") {
					id = e
				}
				if err := d.Delete(id); err != nil {
					t.Fatalf("tx Delete: %v", err)
				}
				delete(staged[coll], id)
			}
			s.gen.ids = nil
		}
		for coll, w := range map[string]writer{collDocs: d, collLog: l} {
			if n, err := w.Count(); err != nil || n != len(staged[coll]) {
				t.Fatalf("tx Count(%s) = %d, %v; staged %d", coll, n, err, len(staged[coll]))
			}
		}
		recs, err := streamErr(d.Stream(query.All().Reverse()))
		if err != nil || len(recs) != len(staged[collDocs]) {
			t.Fatalf("tx stream: %d records, %v; staged %d", len(recs), err, len(staged[collDocs]))
		}
		if rollback {
			return errRollback
		}
		return nil
	})
	switch {
	case err == nil:
		s.model = staged
	case errors.Is(err, errRollback), errors.Is(err, storh.ErrInvalidData), errors.Is(err, storh.ErrExists),
		errors.Is(err, storh.ErrInvalidID):
	default:
		t.Fatalf("Update: %v", err)
	}
}

func TestModel(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(t *rapid.T) {
		run++
		s := &modelState{
			path:  filepath.Join(dir, fmt.Sprintf("model-%d.db", run)),
			model: map[string]map[uuidv7.UUID]modelRecord{collDocs: {}, collLog: {}},
		}
		defer os.Remove(s.path)
		s.open(t)
		defer func() { s.db.Close() }()

		t.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				coll := s.drawColl(t)
				_ = s.putOne(t, s.handle(coll), coll, s.model[coll])
			},
			"delete": func(t *rapid.T) {
				id := s.newID(t)
				if e, ok := s.existingID(t, collDocs); ok && rapid.Bool().Draw(t, "delete existing") {
					id = e
				}
				if err := s.docs.Delete(id); err != nil {
					t.Fatalf("Delete: %v", err)
				}
				delete(s.model[collDocs], id)
			},
			"put many": func(t *rapid.T) {
				coll := s.drawColl(t)
				_ = s.putMany(t, s.handle(coll), coll, s.model[coll])
			},
			"put stream": func(t *rapid.T) {
				coll := s.drawColl(t)
				items, out, want := s.drawBatch(t, coll, s.model[coll])
				var n int
				var err error
				if coll == collDocs {
					n, err = s.docs.PutStream(slices.Values(items))
				} else {
					n, err = s.log.PutStream(slices.Values(items))
				}
				wantErr(t, "PutStream", err, want)
				if err != nil {
					if n != 0 {
						t.Fatalf("failed PutStream of one batch reports %d committed", n)
					}
					return
				}
				if n != len(items) {
					t.Fatalf("PutStream = %d; want %d", n, len(items))
				}
				maps.Copy(s.model[coll], out)
			},
			"update": s.update,
			"query":  s.query,
			"reopen": func(t *rapid.T) {
				if err := s.db.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				s.open(t)
			},
			"": func(t *rapid.T) {
				if s.gen.underflow {
					t.Fatal("the id generator was called more often than expected")
				}
				s.gen.ids = nil
				s.checkColl(t, collDocs)
				s.checkColl(t, collLog)
			},
		})
	})
}
