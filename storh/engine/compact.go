package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/vmihailenco/msgpack/v5"

	bolt "go.etcd.io/bbolt"
)

// compactTxBytes bounds the keys and values one transaction of Compact
// writes, so a large file does not build its whole copy in memory.
const compactTxBytes = 64 << 20

// Compact copies the live data of the database at src into a new file dst
// (which must not exist), leaving free pages behind. It opens src read-only,
// so no process may have it open for writing (opts.LockTimeout bounds the
// wait). Pages are packed full, except those of index entries, which keep
// the room the engine leaves in them (see copier.fill).
//
// It checks ctx before it starts and every few thousand keys (or few MiB of
// values) of the copy: a done ctx ends the write transaction, closes and
// removes dst, and returns an error wrapping ctx.Err().
func Compact(ctx context.Context, src, dst string, opts Options) (api.CompactReport, error) {
	var rep api.CompactReport
	if _, err := os.Stat(dst); err == nil {
		return rep, fmt.Errorf("%w: compaction target %s already exists; choose a new file", errs.ErrExists, dst)
	}
	pace := newPace(ctx)
	if err := pace.check(); err != nil {
		return rep, fmt.Errorf("cancelled before anything was copied: %s was not created: %w", dst, err)
	}
	opts.ReadOnly = true
	in, err := Open(src, opts)
	if err != nil {
		return rep, err
	}
	defer in.Close()
	mode := opts.FileMode
	if mode == 0 {
		mode = 0o600
	}
	out, err := bolt.Open(dst, mode, &bolt.Options{FreelistType: bolt.FreelistMapType})
	if err != nil {
		return rep, mapStoreErr(err)
	}
	err = containPanic(func() error { return compactInto(out, in.file.bolt, compactTxBytes, pace) })
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The copy is synced; its name is not until its directory is.
		err = syncDir(filepath.Dir(dst))
	}
	if err != nil {
		os.Remove(dst)
		if pace.stopped(err) {
			return rep, fmt.Errorf("cancelled: %s was removed: %w", dst, err)
		}
		return rep, mapStoreErr(err)
	}
	if rep.SrcSize, rep.SrcAllocated, err = diskUsage(src); err != nil {
		return rep, err
	}
	if rep.SrcInUse, err = inUse(src, opts.LockTimeout); err != nil {
		return rep, err
	}
	if rep.DstSize, rep.DstAllocated, err = diskUsage(dst); err != nil {
		return rep, err
	}
	rep.DstInUse, err = inUse(dst, opts.LockTimeout)
	return rep, err
}

// compactInto copies every key of src into the empty database dst, as
// bolt.Compact does (which cannot be interrupted): values as they are,
// nested buckets whole with their sequences, top-level values too (storh
// never writes one, but a damaged file may hold one and a copy should
// not lose it), in write transactions of at most maxBytes of keys and
// values. It reads src in one read transaction, so the values it puts
// (which bbolt does not copy until the commit) stay valid. It checks pace
// between keys.
func compactInto(dst, src *bolt.DB, maxBytes int64, pace *pace) error {
	tx, err := dst.Begin(true)
	if err != nil {
		return err
	}
	c := &copier{dst: dst, tx: tx, max: maxBytes, pace: pace}
	defer func() { _ = c.tx.Rollback() }() // after the commit: ErrTxClosed, ignored
	err = src.View(func(stx *bolt.Tx) error {
		c.src = stx
		return c.copyBucket(stx.Cursor().Bucket(), nil)
	})
	if err != nil {
		return err
	}
	return c.tx.Commit()
}

// copier is the state of compactInto: the source's read transaction, the
// open write transaction, its generation (bumped at each commit: buckets of
// an earlier transaction are stale and must be looked up again) and the
// bytes it has written.
type copier struct {
	src       *bolt.Tx
	dst       *bolt.DB
	tx        *bolt.Tx
	gen       int
	size, max int64
	pace      *pace
}

// copyBucket copies the keys of src into the bucket at path in dst (the
// root for an empty path), which exists and is empty.
func (c *copier) copyBucket(src *bolt.Bucket, path [][]byte) error {
	var dst *bolt.Bucket
	gen := -1
	cur := src.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if err := c.pace.step(len(v)); err != nil {
			return err
		}
		if err := c.room(len(k) + len(v)); err != nil {
			return err
		}
		if gen != c.gen {
			dst, gen = c.bucket(path), c.gen
		}
		if v != nil {
			if err := dst.Put(k, v); err != nil {
				return err
			}
			continue
		}
		child := src.Bucket(k)
		nb, err := dst.CreateBucket(k)
		if err != nil {
			return err
		}
		if err := nb.SetSequence(child.Sequence()); err != nil {
			return err
		}
		sub := append(path[:len(path):len(path)], k)
		nb.FillPercent = c.fill(sub)
		if err := c.copyBucket(child, sub); err != nil {
			return err
		}
	}
	return nil
}

// room commits the transaction and begins the next when size more bytes
// would take it past the bound.
func (c *copier) room(size int) error {
	if c.size > 0 && c.size+int64(size) > c.max {
		if err := c.tx.Commit(); err != nil {
			return err
		}
		tx, err := c.dst.Begin(true)
		if err != nil {
			return err
		}
		c.tx, c.gen, c.size = tx, c.gen+1, 0
	}
	c.size += int64(size)
	return nil
}

// bucket looks up the bucket at path in the current transaction and sets
// the fill percent of it and of every bucket above it (bbolt forgets fill
// percents at the end of each transaction).
func (c *copier) bucket(path [][]byte) *bolt.Bucket {
	b := c.tx.Cursor().Bucket() // the root
	b.FillPercent = c.fill(nil)
	for i, k := range path {
		if b = b.Bucket(k); b == nil {
			panic(fmt.Sprintf("compact: bucket %q vanished from the copy", path[:i+1]))
		}
		b.FillPercent = c.fill(path[:i+1])
	}
	return b
}

// fill is the fill percent of the bucket at path in the copy: what the
// engine gives it when it writes, so the copy's pages neither split at the
// first insert nor waste room the engine would not leave. An index's
// entries bucket (collection, "i", index name) gets entriesFill of the
// index's layout, read from its definition in the source (a definition
// that does not decode counts as the keys layout, whose room costs a
// damaged file nothing). Every other bucket is packed full, as
// bolt.Compact packs them: records arrive in id order
// (appendFillPercent), a journal grows at its end, and the rest is small.
func (c *copier) fill(path [][]byte) float64 {
	if len(path) != 3 || !bytes.Equal(path[1], bucketIndexEntries) {
		return appendFillPercent
	}
	var def indexDef
	if coll := c.src.Bucket(path[0]); coll != nil {
		if defs := coll.Bucket(bucketIndexDefs); defs != nil {
			_ = msgpack.Unmarshal(defs.Get(path[2]), &def)
		}
	}
	return entriesFill(def.Layout)
}

// inUse returns the bytes of the pages of the database file at path that
// hold data: every page below the high-water mark that is not free. It
// opens the file read-only with the freelist loaded (a read-only open skips
// it by default, and would count free pages as data).
func inUse(path string, timeout time.Duration) (int64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true,
		FreelistType: bolt.FreelistMapType, Timeout: max(timeout, time.Nanosecond)})
	if err != nil {
		return 0, mapStoreErr(err)
	}
	defer db.Close()
	var n int64
	err = db.View(func(tx *bolt.Tx) error {
		st := db.Stats()
		n = tx.Size() - int64(st.FreePageN+st.PendingPageN)*int64(db.Info().PageSize)
		return nil
	})
	return max(0, n), err
}
