package engine

import (
	"bytes"
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// CollStats describes one collection.
type CollStats struct {
	Name    string
	Kind    Kind
	Records int64
	Bytes   int64 // stored value bytes (headers included), not file pages
	FirstID uuidv7.UUID
	LastID  uuidv7.UUID // zero when the collection is empty
}

// CollStats reads c's statistics: counters from metadata, first and last id
// from the two ends of the records bucket (O(log n), no scan).
func (c *Coll) Stats() CollStats {
	s := CollStats{Name: c.Name, Kind: c.Kind, Records: c.Count(), Bytes: c.Bytes()}
	cur := c.records.Cursor()
	if k, _ := cur.First(); len(k) == 16 {
		copy(s.FirstID[:], k)
	}
	if k, _ := cur.Last(); len(k) == 16 {
		copy(s.LastID[:], k)
	}
	return s
}

// Collections lists the collections in name order.
func (t *Tx) Collections() ([]CollStats, error) {
	var out []CollStats
	err := t.btx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		if bytes.Equal(name, dbMetaBucket) {
			return nil
		}
		c, err := t.Coll(string(name), 0, false)
		if err != nil {
			return err
		}
		out = append(out, c.Stats())
		return nil
	})
	return out, err
}

// FileSize returns the database file's size on disk.
func (db *DB) FileSize() (int64, error) {
	fi, err := os.Stat(db.path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
