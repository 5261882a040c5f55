package reliability

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The power-cut file system's own tests: what it keeps, loses and tears
// must be exactly what its model allows, or the power-loss suite proves
// nothing.

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7/5)
	}
	return b
}

func writeFile(t *testing.T, path string, off int64, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDirectory(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// cutNow unmounts p, cuts it and returns the report.
func cutNow(t *testing.T, p *powerFS, model cutModel, seed uint64) cutReport {
	t.Helper()
	if err := p.unmount(); err != nil {
		t.Fatal(err)
	}
	rep, err := p.cut(model, rand.New(rand.NewPCG(seed, 15)))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func readOrNil(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPowerFSSyncedSurvives: a write followed by fsync (and the file's name
// by a directory fsync) survives every model of cut, whatever happens to
// the unsynced write after it; the unsynced write lands whole, not at all,
// or torn at the cut's sector size, and nowhere else.
func TestPowerFSSyncedSurvives(t *testing.T) {
	const synced, off, n = 20000, 3000, 12000
	old, neu := pattern(synced, 1), pattern(n, 101)
	for _, model := range cutModels {
		for seed := range uint64(6) {
			p, backing, mnt := requireFUSE(t)
			path := filepath.Join(mnt, "a")
			writeFile(t, path, 0, old, true)
			syncDirectory(t, mnt)
			writeFile(t, path, off, neu, false)
			rep := cutNow(t, p, model, seed)
			got := readOrNil(t, filepath.Join(backing, "a"))
			if len(got) != synced || !bytes.Equal(got[:off], old[:off]) || !bytes.Equal(got[off+n:], old[off+n:]) {
				t.Fatalf("%s seed %d (%v): the synced bytes outside the unsynced write changed (%d bytes)", model, seed, rep, len(got))
			}
			g := rep.Grain
			for at := off; at < off+n; {
				next := min((at/g+1)*g, off+n)
				block := got[at:next]
				isOld, isNew := bytes.Equal(block, old[at:next]), bytes.Equal(block, neu[at-off:next-off])
				if !isOld && !isNew {
					t.Fatalf("%s seed %d (%v): bytes %d to %d are neither the old nor the new sector", model, seed, rep, at, next)
				}
				switch {
				case model == cutDropAll && !isOld:
					t.Fatalf("drop-all seed %d: the unsynced write landed at %d", seed, at)
				case model == cutMetaFirst && isOld != (at >= 2*os.Getpagesize()):
					t.Fatalf("meta-first seed %d: at %d, old=%v; only the first two pages may land", seed, at, isOld)
				}
				at = next
			}
		}
	}
}

// TestPowerFSTearsOnlyAtSectors: over many random cuts, an unsynced write
// is seen kept, lost and torn, at both sector sizes, and a torn write
// changes whole sectors only.
func TestPowerFSTearsOnlyAtSectors(t *testing.T) {
	const size = 64 << 10
	old, neu := pattern(size, 3), pattern(size, 77)
	seen := map[string]bool{}
	for seed := uint64(0); seed < 24; seed++ {
		p, backing, mnt := requireFUSE(t)
		path := filepath.Join(mnt, "a")
		writeFile(t, path, 0, old, true)
		syncDirectory(t, mnt)
		writeFile(t, path, 0, neu, false)
		rep := cutNow(t, p, cutRandom, seed)
		got := readOrNil(t, filepath.Join(backing, "a"))
		if len(got) != size {
			t.Fatalf("seed %d: %d bytes, want %d", seed, len(got), size)
		}
		kept := 0
		for at := 0; at < size; at += rep.Grain {
			switch {
			case bytes.Equal(got[at:at+rep.Grain], neu[at:at+rep.Grain]):
				kept++
			case !bytes.Equal(got[at:at+rep.Grain], old[at:at+rep.Grain]):
				t.Fatalf("seed %d: sector at %d (grain %d) is torn inside", seed, at, rep.Grain)
			}
		}
		switch sectors := size / rep.Grain; {
		case kept == 0:
			seen["lost"] = true
		case kept == sectors:
			seen["kept"] = true
		default:
			seen["torn"] = true
		}
		seen[map[int]string{512: "grain 512", 4096: "grain 4096"}[rep.Grain]] = true
	}
	for _, want := range []string{"kept", "lost", "torn", "grain 512", "grain 4096"} {
		if !seen[want] {
			t.Errorf("24 random cuts never showed %q (saw %v)", want, seen)
		}
	}
}

// TestPowerFSNames: a file's name lasts only once its directory is
// synced; fsync of the file itself does not make it last, and an unsynced
// rename or removal is undone whole.
func TestPowerFSNames(t *testing.T) {
	t.Run("new file, file synced only", func(t *testing.T) {
		p, backing, mnt := requireFUSE(t)
		writeFile(t, filepath.Join(mnt, "new"), 0, []byte("data"), true)
		cutNow(t, p, cutDropAll, 1)
		if got := readOrNil(t, filepath.Join(backing, "new")); got != nil {
			t.Fatalf("a file whose directory was never synced survived a drop-all cut: %q", got)
		}
	})
	t.Run("new file, directory synced", func(t *testing.T) {
		for _, model := range cutModels {
			p, backing, mnt := requireFUSE(t)
			writeFile(t, filepath.Join(mnt, "new"), 0, []byte("data"), true)
			syncDirectory(t, mnt)
			cutNow(t, p, model, 2)
			if got := readOrNil(t, filepath.Join(backing, "new")); string(got) != "data" {
				t.Fatalf("%s: a synced file in a synced directory reads %q", model, got)
			}
		}
	})
	t.Run("rename and unlink", func(t *testing.T) {
		p, backing, mnt := requireFUSE(t)
		writeFile(t, filepath.Join(mnt, "a"), 0, []byte("A"), true)
		writeFile(t, filepath.Join(mnt, "b"), 0, []byte("B"), true)
		writeFile(t, filepath.Join(mnt, "c"), 0, []byte("C"), true)
		syncDirectory(t, mnt)
		if err := os.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "b")); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(mnt, "c")); err != nil {
			t.Fatal(err)
		}
		rep := cutNow(t, p, cutDropAll, 3)
		for name, want := range map[string]string{"a": "A", "b": "B", "c": "C"} {
			if got := readOrNil(t, filepath.Join(backing, name)); string(got) != want {
				t.Fatalf("after undoing the rename and the removal (%v), %s reads %q, want %q", rep, name, got, want)
			}
		}
		p.remount(t)
		if err := os.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "b")); err != nil {
			t.Fatal(err)
		}
		syncDirectory(t, mnt)
		cutNow(t, p, cutDropAll, 4)
		if a, b := readOrNil(t, filepath.Join(backing, "a")), readOrNil(t, filepath.Join(backing, "b")); a != nil || string(b) != "A" {
			t.Fatalf("after a synced rename: a=%q b=%q", a, b)
		}
	})
	t.Run("random keeps a prefix", func(t *testing.T) {
		// Three creations in order: a cut may keep the first ones only.
		for seed := uint64(0); seed < 12; seed++ {
			p, backing, mnt := requireFUSE(t)
			for _, name := range []string{"1", "2", "3"} {
				writeFile(t, filepath.Join(mnt, name), 0, []byte(name), true)
			}
			cutNow(t, p, cutRandom, seed)
			gap := false
			for _, name := range []string{"1", "2", "3"} {
				got := readOrNil(t, filepath.Join(backing, name))
				if got != nil && gap {
					t.Fatalf("seed %d: %s survived though an earlier creation did not", seed, name)
				}
				gap = gap || got == nil
			}
		}
	})
}

// TestPowerFSTruncate: an unsynced truncation is lost under drop-all and
// kept once synced.
func TestPowerFSTruncate(t *testing.T) {
	p, backing, mnt := requireFUSE(t)
	path := filepath.Join(mnt, "a")
	writeFile(t, path, 0, pattern(9000, 5), true)
	syncDirectory(t, mnt)
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	cutNow(t, p, cutDropAll, 1)
	if got := readOrNil(t, filepath.Join(backing, "a")); len(got) != 9000 {
		t.Fatalf("an unsynced truncation survived a drop-all cut: %d bytes", len(got))
	}
	p.remount(t)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(16384); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cutNow(t, p, cutDropAll, 2)
	if got := readOrNil(t, filepath.Join(backing, "a")); len(got) != 16384 || !bytes.Equal(got[:9000], pattern(9000, 5)) {
		t.Fatalf("a synced extension: %d bytes", len(got))
	}
}
