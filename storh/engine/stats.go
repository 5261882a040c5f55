package engine

import (
	"time"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// CollStats describes one collection.
type CollStats struct {
	Name    string
	Kind    Kind
	Records int
	Bytes   int64 // stored value bytes (headers included), not file pages
	FirstID uuidv7.UUID
	LastID  uuidv7.UUID // zero when the collection is empty
}

// CollStats reads c's statistics: counters from metadata, first and last id
// from the two ends of the records bucket (O(log n), no scan).
func (c *Coll) Stats() CollStats {
	s := CollStats{Name: c.Name, Kind: c.Kind, Records: int(c.Count()), Bytes: c.Bytes()}
	cur := c.records.Cursor()
	if k, _ := cur.First(); len(k) == 16 {
		copy(s.FirstID[:], k)
	}
	if k, _ := cur.Last(); len(k) == 16 {
		copy(s.LastID[:], k)
	}
	return s
}

// Collections lists the collections in name order. Top-level entries that
// cannot be collections (the database's own buckets, and strays Verify
// reports) are left out.
func (t *Tx) Collections() ([]CollStats, error) {
	var out []CollStats
	c := t.ktx.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil || validateName(string(k)) != nil {
			continue
		}
		coll, err := t.Coll(string(k), 0, false)
		if err != nil {
			return nil, err
		}
		out = append(out, coll.Stats())
	}
	return out, nil
}

// FileSize returns the apparent size of the database file, the one open
// (whatever its path names by now). On another backend there is no file:
// it is 0.
func (db *DB) FileSize() (int64, error) {
	if db.file.bolt == nil {
		return 0, nil
	}
	fi, err := db.file.fd.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// FreeBytes is how much of the file is free pages (and pages freed by
// recent commits that readers may still see): room later writes reuse
// before the file grows, and what a compaction gives back. It reads
// bbolt's freelist counters, in memory.
func (db *DB) FreeBytes() int64 {
	if db.file.bolt == nil {
		return 0
	}
	st := db.file.bolt.Stats()
	return int64(st.FreePageN+st.PendingPageN) * int64(db.file.bolt.Info().PageSize)
}

// CommitStats counts the write transactions this DB has committed since it
// was opened, with bbolt's page writes and the time spent in them.
type CommitStats struct {
	Commits    int64         // committed write transactions (a group commit counts once)
	Reruns     int64         // write transactions run again after a conflict with another store's (PostgreSQL)
	PageWrites int64         // page write calls those commits made
	IOTime     time.Duration // time spent writing and syncing pages
}

// CommitStats reads the commit counters. On a file the transaction id in
// the meta page rises by one per commit, so counting needs no bookkeeping
// of ours; elsewhere the DB counts its commits, and there are no pages.
func (db *DB) CommitStats() (CommitStats, error) {
	if db.file.bolt == nil {
		return CommitStats{Commits: db.group.commits.Load(), Reruns: db.group.reruns.Load()}, nil
	}
	var s CommitStats
	err := db.ViewSafe(func(tx *Tx) error {
		s.Commits = int64(tx.btx.ID()) - int64(db.file.openTxid)
		return nil
	})
	ts := db.file.bolt.Stats().TxStats
	s.PageWrites, s.IOTime = ts.GetWrite(), ts.GetWriteTime()
	return s, err
}
