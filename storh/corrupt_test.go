package storh_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// got0 is the first record of a collection.
func got0(t *testing.T, c *storh.Docs) storh.Record {
	t.Helper()
	recs := collect(t, c.Stream(query.All().Limit(1)))
	if len(recs) != 1 {
		t.Fatal("no record")
	}
	return recs[0]
}

func TestCorruptRecord(t *testing.T) {
	fileOnly(t)
	for _, tc := range []struct {
		name string
		edit func(v []byte)
	}{
		{"payload byte flipped", func(v []byte) { v[len(v)-1] ^= 0x01 }},
		{"checksum byte flipped", func(v []byte) { v[2] ^= 0x80 }},
		{"unknown format version", func(v []byte) { v[0] = 0xee }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := newPath(t)
			db := openAt(t, path)
			log, _ := db.Log("events")
			var all []uuidv7.UUID
			for i := range 10 {
				r, err := log.PutWithID(idAt(t, int64(100+i)), storh.Map{"i": i, "s": "some text"})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, r.ID)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			const bad = 4
			testkit.Damage(t, path, "events", all[bad][:], tc.edit)

			db = openAt(t, path)
			log, err := db.Log("events")
			if err != nil {
				t.Fatal(err)
			}
			_, err = log.Get(all[bad])
			checkErr(t, err, storh.ErrCorrupt, `"events"`, all[bad].String())
			for i, id := range all {
				if i == bad {
					continue
				}
				r, err := log.Get(id)
				if err != nil || r.Data()["i"] != int64(i) {
					t.Errorf("Get(#%d) = %v, %v", i, r.Data(), err)
				}
			}

			// A stream yields the good records before it, then stops with the error.
			got, err := streamErr(log.Stream(query.All()))
			checkErr(t, err, storh.ErrCorrupt, `"events"`, all[bad].String())
			if !sameIDs(ids(got), all[:bad]) {
				t.Errorf("stream before the error: %v; want %v", ids(got), all[:bad])
			}
			// The same newest first.
			got, err = streamErr(log.Stream(query.All().Reverse()))
			checkErr(t, err, storh.ErrCorrupt, all[bad].String())
			if len(got) != len(all)-bad-1 {
				t.Errorf("reverse stream before the error: %d records; want %d", len(got), len(all)-bad-1)
			}
			// A filter never reports a corrupt record as a match or a miss.
			_, err = streamErr(log.Stream(query.All().WhereEqual("i", 9)))
			checkErr(t, err, storh.ErrCorrupt, all[bad].String())

			// ContinueOnError skips it, reports its id, and returns the rest.
			var reported []uuidv7.UUID
			q := query.All().ContinueOnError(func(id uuidv7.UUID, err error) {
				if !errors.Is(err, storh.ErrCorrupt) {
					t.Errorf("reported error %v; want ErrCorrupt", err)
				}
				reported = append(reported, id)
			})
			got = collect(t, log.Stream(q))
			want := append(append([]uuidv7.UUID(nil), all[:bad]...), all[bad+1:]...)
			if !sameIDs(ids(got), want) {
				t.Errorf("ContinueOnError stream: %v; want %v", ids(got), want)
			}
			if len(reported) != 1 || reported[0] != all[bad] {
				t.Errorf("reported %v; want [%v]", reported, all[bad])
			}
			// Limit counts returned records, not skipped ones.
			got = collect(t, log.Stream(q.Limit(bad+1)))
			if len(got) != bad+1 || got[bad].ID != all[bad+1] {
				t.Errorf("ContinueOnError with Limit(%d): %v", bad+1, ids(got))
			}

			// Inside a transaction the same rules hold.
			err = db.View(func(tx *storh.Tx) error {
				l, err := tx.Log("events")
				if err != nil {
					return err
				}
				_, err = l.Get(all[bad])
				return err
			})
			checkErr(t, err, storh.ErrCorrupt, all[bad].String())
			if n := mustCount(t, log); n != len(all) {
				t.Errorf("Count = %d; want %d", n, len(all))
			}
		})
	}
}

// TestUndecodableRecordWithValidChecksum stores a value whose checksum is
// right but whose payload is not a msgpack map (as a buggy writer or a
// future format could leave). storh.ErrCorrupt promises that a value that
// "fails its checksum or decode" is reported as corrupt, never returned as
// data.
func TestUndecodableRecordWithValidChecksum(t *testing.T) {
	fileOnly(t)
	path := newPath(t)
	db := openAt(t, path)
	docs, _ := db.Docs("d")
	good, _ := docs.PutWithID(idAt(t, 1), storh.Map{"a": 1})
	bad, _ := docs.PutWithID(idAt(t, 2), storh.Map{"a": 2})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.Damage(t, path, "d", bad.ID[:], func(v []byte) {
		// Keep the header, replace the payload with a msgpack string of the
		// same length, and fix the checksum.
		p := v[5:]
		p[0] = 0xa0 | byte(len(p)-1)
		for i := 1; i < len(p); i++ {
			p[i] = 'x'
		}
		seal(v, bad.ID)
	})
	db = openAt(t, path)
	docs, _ = db.Docs("d")
	if _, err := docs.Get(good.ID); err != nil {
		t.Fatal(err)
	}
	// Its checksum is valid, so reads hand it out (they do not re-validate
	// the encoding), but it is never returned as data: decoding fails with
	// ErrCorrupt naming the id, and Verify reports it.
	r, err := docs.Get(bad.ID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	var m storh.Map
	if err := r.Decode(&m); !errors.Is(err, storh.ErrCorrupt) || !strings.Contains(err.Error(), bad.ID.String()) {
		t.Errorf("Decode of an undecodable record = %v; want ErrCorrupt naming %s", err, bad.ID)
	}
	if d := r.Data(); d != nil {
		t.Errorf("Data of an undecodable record = %v; want nil", d)
	}
	if d, err := r.DataErr(); d != nil || !errors.Is(err, storh.ErrCorrupt) || !strings.Contains(err.Error(), bad.ID.String()) {
		t.Errorf("DataErr of an undecodable record = %v, %v; want ErrCorrupt naming %s", d, err, bad.ID)
	}
	if d, err := got0(t, docs).DataErr(); d == nil || err != nil {
		t.Errorf("DataErr of a sound record = %v, %v", d, err)
	}
	got, err := streamErr(docs.Stream(query.All()))
	if err != nil || len(got) != 2 || got[1].Data() != nil {
		t.Errorf("Stream over an undecodable record: %d records, err %v", len(got), err)
	}
	rep, err := db.Verify(nil)
	if err != nil || rep.Problems != 1 {
		t.Errorf("Verify: %+v, %v; want the one decode problem", rep, err)
	}
}
