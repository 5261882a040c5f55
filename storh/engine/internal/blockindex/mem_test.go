package blockindex

import (
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestMemModel drives an index through the package's API as the engine
// does, commits journaled and published, folds in steps of any size, and
// checks that every way a transaction gets its view reads the entries the
// commits left: the view its own process published (mine; some commits
// are another process's, which it never sees published), that of a
// process that never saw a publication and reads the journal the others
// wrote (other), and one decoded afresh (no Mem).
func TestMemModel(t *testing.T) {
	setTune(t, "block=100")
	rapid.Check(t, func(rt *rapid.T) {
		blocks, journal := newMemBucket(), newMemBucket()
		if err := WriteBlocks(blocks, nil); err != nil {
			rt.Fatal(err)
		}
		var views Views
		mine, other := views.Get("mine", 1), views.Get("other", 1)
		var floor, seq uint64
		want := map[string]bool{}
		read := func(what string, m *Mem) {
			v, err := m.View(journal, floor, seq)
			if err != nil {
				rt.Fatalf("%s: %v", what, err)
			}
			cur := NewCursor(NewBlockCursor(blocks, "model", true, func(err error) { rt.Fatalf("%s: damage: %v", what, err) }), v.Source(seq))
			var got []string
			for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
				got = append(got, string(k))
			}
			var keys []string
			for _, k := range slices.Sorted(maps.Keys(want)) {
				if want[k] {
					keys = append(keys, k)
				}
			}
			if !slices.Equal(got, keys) {
				rt.Fatalf("%s at floor %d, seq %d: read %q, want %q", what, floor, seq, got, keys)
			}
		}
		for range rapid.IntRange(1, 30).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 4).Draw(rt, "op"); op {
			case 0, 1, 4: // a commit, of this process or (4) of another
				p := &Pending{}
				for range rapid.IntRange(1, 8).Draw(rt, "changes") {
					k, del := entryKeyGen().Draw(rt, "key"), rapid.Bool().Draw(rt, "del")
					p.Add(k, del)
					want[string(k)] = !del
				}
				after, _, seg, err := p.Journal(journal, seq)
				if err != nil {
					rt.Fatal(err)
				}
				if op != 4 {
					mine.PublishCommit(floor, seq, after, seg)
				}
				seq = after
			case 2: // a fold, in steps, by this process
				if seq == floor {
					continue
				}
				v, err := mine.View(journal, floor, seq)
				if err != nil {
					rt.Fatal(err)
				}
				budget := rapid.IntRange(1, 400).Draw(rt, "budget")
				var from []byte
				for {
					if from, err = Fold(blocks, v, seq, from, budget); err != nil {
						rt.Fatalf("fold: %v", err)
					}
					if from == nil {
						break
					}
				}
				if _, err := DropFolded(journal, seq); err != nil {
					rt.Fatal(err)
				}
				mine.PublishFold(seq)
				floor = seq
			case 3:
				read("mine", mine)
				read("other", other)
				read("decoded afresh", nil)
			}
		}
		read("mine", mine)
		read("other", other)
		// A fold's publication drops what it put in the blocks.
		if v, err := mine.View(journal, floor, seq); err != nil || v.Floor() != floor {
			rt.Fatalf("mine's view: %v, or it starts other than at the floor %d", err, floor)
		}
	})
}
