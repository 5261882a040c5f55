package engine

import (
	"bytes"
	"errors"

	"github.com/storhdb/storh-go/storh/internal/errs"
)

// upgradeQueues brings a store up to formatDue when this build opens it
// for writing: in one transaction, every queue's pending entries, keyed by
// sequence alone, are keyed again by due time ‖ sequence, due at 0 (their
// jobs were due when they were enqueued, and their job states, of
// jobFormat1, read as due at 0 too), and the format marker is raised, so
// that no storh from before opens the store once it may hold a delayed
// job. Their order is kept: every entry moves to the same due time, and
// stays ordered by its sequence, ahead of every job enqueued afterwards.
// It costs a write per pending job, once. A store without queues is left
// as it is, readable by the builds before (a read of its collections'
// kinds at each open for writing); its first queue raises the marker
// (Tx.openColl). A queue too damaged to open is passed by: Repair rebuilds
// its indexes from its job states, in this layout.
func (db *DB) upgradeQueues() error {
	var queues bool
	if err := db.ViewSafe(func(tx *Tx) error {
		names, err := queueNames(tx)
		queues = len(names) > 0
		return err
	}); err != nil || !queues {
		return err
	}
	return db.UpdateSafe(func(tx *Tx) error {
		meta := tx.ktx.Bucket(dbMetaBucket)
		if getInt(meta, keyFormat) >= formatDue {
			return nil // another process has done it since Open looked
		}
		names, err := queueNames(tx)
		if err != nil {
			return err
		}
		for _, name := range names {
			c, err := tx.Coll(name, KindQueue, false)
			if errors.Is(err, errs.ErrCorrupt) {
				continue
			}
			if err != nil {
				return err
			}
			if err := rekeyPending(c); err != nil {
				return err
			}
		}
		return tx.needFormat(formatDue)
	})
}

// queueNames lists the queues of the store, but those too damaged to
// open, looking at the collections without enlisting them in tx.
func queueNames(tx *Tx) ([]string, error) {
	var names, queues []string
	cur := tx.ktx.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if v == nil && validateName(string(k)) == nil {
			names = append(names, string(k))
		}
	}
	for _, name := range names {
		err := tx.damaged(name)
		var look *Coll
		if err == nil {
			look, err = openColl(tx.ktx, name)
		}
		if errors.Is(err, errs.ErrCorrupt) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if look != nil && look.Kind == KindQueue {
			queues = append(queues, name)
		}
	}
	return queues, nil
}

// rekeyPending keys queue c's pending entries of the layout before
// formatDue (8 bytes: the sequence) by due time 0 ‖ sequence.
func rekeyPending(c *Coll) error {
	j, err := c.jobBuckets(false)
	if err != nil || j == nil {
		return err
	}
	var keys, ids [][]byte
	cur := j.pending.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if len(k) == 8 {
			keys, ids = append(keys, bytes.Clone(k)), append(ids, bytes.Clone(v))
		}
	}
	for i, k := range keys {
		if err := j.pending.Delete(k); err != nil {
			return mapStoreErr(err)
		}
		if err := j.pending.Put(append(make([]byte, 8, 16), k...), ids[i]); err != nil {
			return mapStoreErr(err)
		}
	}
	return nil
}
