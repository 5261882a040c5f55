package storh

import (
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Docs is a document collection: records keyed by UUIDv7 that can be
// replaced (PutWithID of an existing id), patched and deleted. Get a
// handle from DB.Docs or Tx.Docs.
//
// Methods: Put, PutWithID, PutMany, PutStream, Get, Patch, PatchMatching,
// Delete; Stream, Find, First, CountMatching, Explain; Count, Stats, Name;
// Indexes, DropIndex; Watch, WatchReady, Changes, LastSeq.
type Docs struct{ coll }

// PutWithID stores data under id, replacing the record stored there, if any
// (upsert). id must be a UUIDv7, else ErrInvalidID and nothing is written.
func (d *Docs) PutWithID(id uuidv7.UUID, data any) (Record, error) { return d.coll.PutWithID(id, data) }

// Delete removes the record id. Deleting an id that is not stored is a
// no-op (nil), as is deleting from a collection not created yet; an id that
// is not a UUIDv7 is ErrInvalidID, and a collection dropped after the handle
// was opened is ErrNotFound, as for Put and Get.
func (d *Docs) Delete(id uuidv7.UUID) error {
	if err := checkID(id, false); err != nil {
		return opErr("delete", d.name, id.String(), -1, err)
	}
	var err error
	if d.tx != nil {
		if err = d.tx.usable(true); err == nil {
			// Looked up as for a read: a delete never creates the collection.
			err = d.inTxUse(false, engine.HoldRows, func(etx *engine.Tx, ec *engine.Coll) error {
				if ec == nil {
					return nil
				}
				_, err := etx.Delete(ec, id)
				return err
			})
		}
	} else {
		err = d.submit(id, nil)
	}
	return opErr("delete", d.name, id.String(), -1, err)
}
