package reliability

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestQueueVerifyRepair damages a queue's job bookkeeping through raw bbolt,
// one way at a time, as an engine bug or a stray write would: Verify must
// name the damage as a queue problem, Repair must rebuild the indexes and
// counters from the job states, and afterwards the queue must verify clean
// and hand out every job that has a payload, in enqueue order.
func TestQueueVerifyRepair(t *testing.T) {
	jobsBucket := func(tx *bolt.Tx, sub string) *bolt.Bucket {
		return tx.Bucket([]byte("work")).Bucket([]byte("j")).Bucket([]byte(sub))
	}
	for _, tc := range []struct {
		name   string
		damage func(tx *bolt.Tx, ids []uuidv7.UUID) error
		want   string // in a queue problem
		lost   int    // jobs that cannot come back (their state or payload is gone)
	}{
		{"pending entry deleted", func(tx *bolt.Tx, _ []uuidv7.UUID) error {
			k, _ := jobsBucket(tx, "p").Cursor().First()
			return jobsBucket(tx, "p").Delete(k)
		}, "missing from the pending index", 0},
		{"stray claimed entry", func(tx *bolt.Tx, ids []uuidv7.UUID) error {
			k := binary.BigEndian.AppendUint64(nil, 42)
			return jobsBucket(tx, "c").Put(append(k, ids[3][:]...), []byte{})
		}, "in the claimed index", 0},
		{"counter off", func(tx *bolt.Tx, _ []uuidv7.UUID) error {
			return tx.Bucket([]byte("work")).Bucket([]byte("m")).Put([]byte("qn:p"), make([]byte, 8))
		}, "pending counter", 0},
		{"state checksum", func(tx *bolt.Tx, ids []uuidv7.UUID) error {
			v := append([]byte(nil), jobsBucket(tx, "s").Get(ids[2][:])...)
			v[3] ^= 1
			return jobsBucket(tx, "s").Put(ids[2][:], v)
		}, "checksum", 0},
		{"state deleted", func(tx *bolt.Tx, ids []uuidv7.UUID) error {
			return jobsBucket(tx, "s").Delete(ids[4][:])
		}, "payload without a job state", 0},
		{"payload deleted", func(tx *bolt.Tx, ids []uuidv7.UUID) error {
			return tx.Bucket([]byte("work")).Bucket([]byte("r")).Delete(ids[5][:])
		}, "without its payload", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "q.db")
			db, err := storh.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			q, err := db.Queue("work")
			if err != nil {
				t.Fatal(err)
			}
			items := make([]any, 10)
			for i := range items {
				items[i] = map[string]any{"i": i}
			}
			ids, err := q.EnqueueMany(items)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			rawUpdate(t, path, func(tx *bolt.Tx) error { return tc.damage(tx, ids) })

			db, err = storh.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var problems []string
			if _, err := db.Verify(func(p storh.Problem) {
				if p.Kind == storh.ProblemQueue {
					problems = append(problems, p.String())
				}
			}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(problems, "\n"), tc.want) {
				t.Fatalf("Verify's queue problems %q do not say %q", problems, tc.want)
			}
			rep, err := db.Repair(nil)
			if err != nil || rep.Reindexed == 0 {
				t.Fatalf("Repair: %+v, %v", rep, err)
			}
			problems = nil
			if _, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) }); err != nil || len(problems) > 0 {
				t.Fatalf("after Repair: %v %q", err, problems)
			}
			q, err = db.Queue("work")
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for {
				j, err := q.Claim(time.Minute)
				if errors.Is(err, storh.ErrEmpty) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				var v struct{ I int }
				if err := j.Decode(&v); err != nil {
					t.Fatal(err)
				}
				got = append(got, v.I)
			}
			if len(got) != len(ids)-tc.lost {
				t.Fatalf("claimed %v after Repair, want %d jobs", got, len(ids)-tc.lost)
			}
			for i := 1; i < len(got); i++ {
				// A job restored from its payload alone goes to the end;
				// the others keep their order.
				if got[i] < got[i-1] && tc.name != "state deleted" && tc.name != "state checksum" {
					t.Fatalf("claimed out of enqueue order after Repair: %v", got)
				}
			}
		})
	}
}
