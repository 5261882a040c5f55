package storh_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The change feed's model: random puts (new ids, replacements, explicit
// ids), patches, deletes, DeleteMatching, transactions (committed or
// rolled back), reopens and changes of keep, checked after every step
// against a reference that is the list of every change made: LastSeq is
// its length, the last keep changes (and, from any point, all or
// ErrChangesTrimmed) read back as the reference has them.
type feedModel struct {
	path string
	db   *storh.DB
	docs *storh.Docs
	keep int
	recs map[uuidv7.UUID]int64 // the collection: id → n
	feed []change              // every change, Seq i+1 at i
	// gone: the changes up to it may have been trimmed (the most
	// last-keep has been at a commit); the ones after must be there.
	gone  uint64
	t     testing.TB
	outer *testing.T
}

// ids come from a small pool so that replacements and deletes of stored
// records are common.
func (m *feedModel) drawID(t *rapid.T) uuidv7.UUID {
	return idAt(m.t, 1_700_000_000_000+int64(rapid.IntRange(0, 11).Draw(t, "id")))
}

func (m *feedModel) open(t *rapid.T, opts ...storh.CollectionOption) {
	var err error
	if m.db == nil {
		m.db, err = storh.Open(m.path, storh.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
	}
	if m.docs, err = m.db.Docs("d", opts...); err != nil {
		t.Fatal(err)
	}
}

func (m *feedModel) put(id uuidv7.UUID, n int64) {
	m.recs[id] = n
	m.feed = append(m.feed, change{uint64(len(m.feed) + 1), storh.OpPut, id, n})
}

func (m *feedModel) del(id uuidv7.UUID) {
	if _, ok := m.recs[id]; ok {
		delete(m.recs, id)
		m.feed = append(m.feed, change{uint64(len(m.feed) + 1), storh.OpDelete, id, -1})
	}
}

// check reads the feed back against the reference.
func (m *feedModel) check(t *rapid.T) {
	last := uint64(len(m.feed))
	if got, err := m.docs.LastSeq(); err != nil || got != last {
		t.Fatalf("LastSeq: %d, %v; want %d", got, err, last)
	}
	m.gone = max(m.gone, uint64(max(0, int(last)-m.keep)))
	kept := m.gone
	if last > kept {
		sameChanges(m.t, readChanges(m.t, m.docs.Changes, kept, int(last-kept)), m.feed[kept:])
	}
	after := uint64(rapid.IntRange(0, int(last)).Draw(t, "read after"))
	if after == last {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []change
	for ev, err := range m.docs.Changes(ctx, after) {
		if err != nil {
			if errors.Is(err, storh.ErrChangesTrimmed) && after < kept {
				return
			}
			t.Fatalf("Changes(%d) of %d kept %d: %v", after, last, m.keep, err)
		}
		got = append(got, asChange(m.t, ev))
		if uint64(len(got)) == last-after {
			break
		}
	}
	sameChanges(m.t, got, m.feed[after:])
}

// drawKeep draws a feed's keep: mostly small, so that commits trim, and
// at times past a block of the file's feed (100 changes).
func drawKeep(t *rapid.T) int {
	if rapid.IntRange(0, 3).Draw(t, "long feed") == 0 {
		return rapid.IntRange(90, 320).Draw(t, "keep")
	}
	return rapid.IntRange(1, 40).Draw(t, "keep")
}

func TestChangesModel(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		m := &feedModel{keep: drawKeep(rt), recs: map[uuidv7.UUID]int64{}, t: t, outer: t}
		m.path = filepath.Join(dir, fmt.Sprintf("feed-%d.db", run))
		if onPostgres {
			m.path = pgtest.SchemaURL(t)
		}
		m.open(rt, storh.WithChangeFeed(m.keep))
		defer func() { m.db.Close() }()
		rt.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				n := rapid.Int64Range(0, 9).Draw(t, "n")
				if rapid.Bool().Draw(t, "new id") {
					r, err := m.docs.Put(storh.Map{"n": n})
					if err != nil {
						t.Fatal(err)
					}
					m.put(r.ID, n)
					return
				}
				id := m.drawID(t)
				if _, err := m.docs.PutWithID(id, storh.Map{"n": n}); err != nil {
					t.Fatal(err)
				}
				m.put(id, n)
			},
			// Many changes in one commit: on a file a commit's changes
			// fill the feed's tail and its blocks of 100, which trims
			// cross.
			"put many": func(t *rapid.T) {
				batch := make([]any, rapid.IntRange(1, 250).Draw(t, "batch"))
				ns := make([]int64, len(batch))
				for i := range batch {
					ns[i] = rapid.Int64Range(0, 9).Draw(t, "batch n")
					batch[i] = storh.Map{"n": ns[i]}
				}
				recs, err := m.docs.PutMany(batch)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range recs {
					m.put(r.ID, ns[i])
				}
			},
			"patch": func(t *rapid.T) {
				id := m.drawID(t)
				_, err := m.docs.Patch(id, storh.Inc("n", 1))
				if _, ok := m.recs[id]; !ok {
					if !errors.Is(err, storh.ErrNotFound) {
						t.Fatalf("Patch of a missing record: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				m.put(id, m.recs[id]+1)
			},
			"delete": func(t *rapid.T) {
				id := m.drawID(t)
				if err := m.docs.Delete(id); err != nil {
					t.Fatal(err)
				}
				m.del(id)
			},
			"delete matching": func(t *rapid.T) {
				below := rapid.Int64Range(0, 10).Draw(t, "below")
				n, err := m.docs.DeleteMatching(query.All().Where(query.Field("n").Lt(below)))
				if err != nil {
					t.Fatal(err)
				}
				var gone []uuidv7.UUID
				for id, v := range m.recs {
					if v < below {
						gone = append(gone, id)
					}
				}
				slices.SortFunc(gone, func(a, b uuidv7.UUID) int { return a.Compare(b) })
				if n != len(gone) {
					t.Fatalf("DeleteMatching: %d deleted, want %d", n, len(gone))
				}
				for _, id := range gone { // in id order, as it walks them
					m.del(id)
				}
			},
			"transaction": func(t *rapid.T) {
				type step struct {
					del bool
					id  uuidv7.UUID
					n   int64
				}
				var steps []step
				for range rapid.IntRange(1, 5).Draw(t, "steps") {
					steps = append(steps, step{rapid.Bool().Draw(t, "tx delete"), m.drawID(t), rapid.Int64Range(0, 9).Draw(t, "tx n")})
				}
				rollback := rapid.IntRange(0, 4).Draw(t, "rollback") == 0
				errRollback := errors.New("rollback")
				err := m.db.Update(func(tx *storh.Tx) error {
					d, err := tx.Docs("d")
					if err != nil {
						return err
					}
					for _, s := range steps {
						if s.del {
							err = d.Delete(s.id)
						} else {
							_, err = d.PutWithID(s.id, storh.Map{"n": s.n})
						}
						if err != nil {
							return err
						}
					}
					if rollback {
						return errRollback
					}
					return nil
				})
				if rollback {
					if !errors.Is(err, errRollback) {
						t.Fatalf("Update: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range steps {
					if s.del {
						m.del(s.id)
					} else {
						m.put(s.id, s.n)
					}
				}
			},
			"reopen": func(t *rapid.T) {
				if err := m.db.Close(); err != nil {
					t.Fatal(err)
				}
				m.db = nil
				m.open(t)
			},
			"keep": func(t *rapid.T) {
				m.keep = drawKeep(t)
				m.open(t, storh.WithChangeFeed(m.keep))
			},
			"": m.check,
		})
	})
}
