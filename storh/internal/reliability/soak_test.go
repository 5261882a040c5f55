package reliability

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestRaceSoak runs everything at once against one database for a while:
// single-record writers (puts, upserts, deletes through group commit), a
// log appender (PutMany), bulk ingestion (PutStream), transfers between
// accounts (Update) with an auditor checking the total in View snapshots,
// streams checking order and bytes, Verify on the live database, and a
// goroutine that closes and reopens the database under all of them. Run it
// with -race. Calls that fail with ErrClosed during a reopen must have
// written nothing; everything acknowledged must be there at the end, byte
// for byte. ~20 s with STORH_LONG=1, 4 s otherwise, 5 min with STORH_SOAK=1.
func TestRaceSoak(t *testing.T) {
	t.Parallel()
	dur := 20 * time.Second
	if !testkit.Long() {
		dur = 4 * time.Second
	}
	if os.Getenv("STORH_SOAK") == "1" {
		dur = 5 * time.Minute
	}
	seed := runSeed(t)
	path := scratch(t, "soak.db")
	s := &soak{t: t, path: path, stop: make(chan struct{}), maxStreams: int(20 * dur / (20 * time.Second))}
	db, err := storh.Open(path, storh.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	s.db.Store(db)
	s.initAccounts()

	start := time.Now()
	var wg sync.WaitGroup
	workers := map[string]func(r *rand.Rand){
		"writer-1": s.writer, "writer-2": s.writer, "appender": s.appender, "bulk": s.bulker,
		"transfers": s.transfers, "auditor": s.auditor, "streamer-1": s.streamer, "streamer-2": s.streamer,
		"verifier": s.verifier,
	}
	i := uint64(0)
	for name, fn := range workers {
		i++
		r := rand.New(rand.NewPCG(seed, i))
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s panicked: %v", name, p)
					s.halt()
				}
			}()
			fn(r)
		})
	}
	wg.Go(func() { s.reopener(rand.New(rand.NewPCG(seed, 0))) })
	select {
	case <-time.After(dur):
	case <-s.stop:
	}
	s.halt()
	wg.Wait()
	if err := s.db.Load().Close(); err != nil && !errors.Is(err, storh.ErrClosed) {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if s.verifyProblems > 0 {
		t.Errorf("Verify on the live database (writers running) reported %d problems on a healthy file, e.g. %v", s.verifyProblems, s.verifySamples)
	}
	s.final()
	t.Logf("%v: %d writes, %d deletes, %d PutMany batches, %d PutStream records, %d transfers, %d audits, %d streamed records, %d live verifies, %d reopens, %d calls refused with ErrClosed",
		elapsed.Round(time.Millisecond), s.writes.Load(), s.deletes.Load(), s.batches.Load(), s.bulked.Load(), s.transfersN.Load(), s.audits.Load(),
		s.streamed.Load(), s.verifies.Load(), s.reopens.Load(), s.refused.Load())
}

type soak struct {
	t    *testing.T
	path string
	db   atomic.Pointer[storh.DB]
	stop chan struct{}
	once sync.Once

	mu   sync.Mutex
	docs map[uuidv7.UUID]string // acknowledged state of "docs"
	logs map[uuidv7.UUID]string // acknowledged "events"
	bulk map[string]bool        // tags committed by PutStream into "bulk"

	maxStreams int // bounds the file: PutStream is by far the fastest writer

	verifyProblems int      // found by Verify on the live database (guarded by mu)
	verifySamples  []string // the first few

	tagSeq                                                                                     atomic.Int64
	writes, deletes, batches, bulked, transfersN, audits, streamed, verifies, reopens, refused atomic.Int64
}

const (
	soakAccounts = 10
	soakBalance  = 1000
)

func (s *soak) halt() { s.once.Do(func() { close(s.stop) }) }

func (s *soak) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

func (s *soak) fail(format string, args ...any) {
	s.t.Errorf(format, args...)
	s.halt()
}

func (s *soak) tag(prefix string) string {
	return prefix + "." + strconv.FormatInt(s.tagSeq.Add(1), 10)
}

// call runs fn against the current database until it does not fail with
// ErrClosed (a reopen raced it); it reports whether fn succeeded.
func (s *soak) call(what string, fn func(db *storh.DB) error) bool {
	for !s.stopped() {
		db := s.db.Load()
		err := fn(db)
		if err == nil {
			return true
		}
		if errors.Is(err, storh.ErrClosed) {
			s.refused.Add(1)
			for s.db.Load() == db && !s.stopped() {
				time.Sleep(time.Millisecond) // the reopener swaps the pointer right after Open
			}
			continue
		}
		s.fail("%s: %v", what, err)
		return false
	}
	return false
}

func (s *soak) initAccounts() {
	s.docs, s.logs, s.bulk = map[uuidv7.UUID]string{}, map[uuidv7.UUID]string{}, map[string]bool{}
	err := s.db.Load().Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("acct")
		if err != nil {
			return err
		}
		for i := range soakAccounts {
			if _, err := d.PutWithID(acctID(i), storh.Map{"bal": soakBalance / soakAccounts}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

func acctID(i int) uuidv7.UUID { return uuidv7.MinForTimestampMs(1_600_000_000_000 + int64(i)) }

// writer does single-record puts, upserts and deletes on ids it owns.
func (s *soak) writer(r *rand.Rand) {
	var owned []uuidv7.UUID
	for !s.stopped() {
		switch n := r.IntN(10); {
		case n < 5 || len(owned) == 0:
			tag := s.tag("w")
			var id uuidv7.UUID
			if s.call("put", func(db *storh.DB) error {
				d, err := db.Docs("docs")
				if err != nil {
					return err
				}
				rec, err := d.Put(content(tag))
				id = rec.ID
				return err
			}) {
				s.set(s.docs, id, tag)
				owned = append(owned, id)
				s.writes.Add(1)
			}
		case n < 8:
			id, tag := owned[r.IntN(len(owned))], s.tag("u")
			if s.call("upsert", func(db *storh.DB) error {
				d, err := db.Docs("docs")
				if err == nil {
					_, err = d.PutWithID(id, content(tag))
				}
				return err
			}) {
				s.set(s.docs, id, tag)
				s.writes.Add(1)
			}
		default:
			i := r.IntN(len(owned))
			id := owned[i]
			if s.call("delete", func(db *storh.DB) error {
				d, err := db.Docs("docs")
				if err == nil {
					err = d.Delete(id)
				}
				return err
			}) {
				owned = slices.Delete(owned, i, i+1)
				s.mu.Lock()
				delete(s.docs, id)
				s.mu.Unlock()
				s.deletes.Add(1)
			}
		}
	}
}

func (s *soak) set(m map[uuidv7.UUID]string, id uuidv7.UUID, tag string) {
	s.mu.Lock()
	m[id] = tag
	s.mu.Unlock()
}

// appender writes PutMany batches with explicit ids into the log.
func (s *soak) appender(r *rand.Rand) {
	for !s.stopped() {
		n := 1 + r.IntN(50)
		items := make([]any, n)
		tags := map[uuidv7.UUID]string{}
		for i := range items {
			id, tag := uuidv7.New(), s.tag("a")
			items[i] = storh.Entry{ID: id, Data: content(tag)}
			tags[id] = tag
		}
		if s.call("putmany", func(db *storh.DB) error {
			l, err := db.Log("events")
			if err == nil {
				_, err = l.PutMany(items)
			}
			return err
		}) {
			for id, tag := range tags {
				s.set(s.logs, id, tag)
			}
			s.batches.Add(1)
		}
	}
}

// bulker ingests streams just over one StreamBatch; a stream cut by a reopen
// reports exactly how many records it committed.
func (s *soak) bulker(r *rand.Rand) {
	for range s.maxStreams {
		if s.stopped() {
			return
		}
		prefix := s.tag("b")
		n := storh.StreamBatch + 1 + r.IntN(500)
		done := 0
		for done < n && !s.stopped() {
			db := s.db.Load()
			l, err := db.Log("bulk")
			if err == nil {
				var got int
				start := done
				got, err = l.PutStream(func(yield func(any) bool) {
					for i := start; i < n; i++ {
						if !yield(content(prefix + "." + strconv.Itoa(i))) {
							return
						}
					}
				})
				s.mu.Lock()
				for i := start; i < start+got; i++ {
					s.bulk[prefix+"."+strconv.Itoa(i)] = true
				}
				s.mu.Unlock()
				done += got
				s.bulked.Add(int64(got))
			}
			if err != nil {
				if !errors.Is(err, storh.ErrClosed) {
					s.fail("PutStream: %v", err)
					return
				}
				s.refused.Add(1)
				for s.db.Load() == db && !s.stopped() {
					time.Sleep(time.Millisecond)
				}
			}
		}
	}
}

// transfers moves money between accounts in Update transactions.
func (s *soak) transfers(r *rand.Rand) {
	for !s.stopped() {
		from, to := r.IntN(soakAccounts), r.IntN(soakAccounts)
		amount := int64(1 + r.IntN(20))
		if s.call("transfer", func(db *storh.DB) error {
			return db.Update(func(tx *storh.Tx) error {
				d, err := tx.Docs("acct")
				if err != nil {
					return err
				}
				a, err := d.Get(acctID(from))
				if err != nil {
					return err
				}
				b, err := d.Get(acctID(to))
				if err != nil {
					return err
				}
				ab, bb := a.Data()["bal"].(int64), b.Data()["bal"].(int64)
				if from == to {
					return nil
				}
				if _, err := d.PutWithID(acctID(from), storh.Map{"bal": ab - amount}); err != nil {
					return err
				}
				_, err = d.PutWithID(acctID(to), storh.Map{"bal": bb + amount})
				return err
			})
		}) {
			s.transfersN.Add(1)
		}
	}
}

// auditor checks in View snapshots that the accounts always sum to the
// same total: a torn or half-visible transfer would show.
func (s *soak) auditor(r *rand.Rand) {
	for !s.stopped() {
		s.call("audit", func(db *storh.DB) error {
			return db.View(func(tx *storh.Tx) error {
				d, err := tx.Docs("acct")
				if err != nil {
					return err
				}
				var sum int64
				n := 0
				for rec, err := range d.Stream(query.All()) {
					if err != nil {
						return err
					}
					sum += rec.Data()["bal"].(int64)
					n++
				}
				if n != soakAccounts || sum != soakBalance {
					s.fail("audit: %d accounts holding %d, want %d holding %d", n, sum, soakAccounts, soakBalance)
				}
				return nil
			})
		})
		s.audits.Add(1)
	}
}

// streamer reads whole collections, forwards or backwards, optionally
// filtered, and checks order and bytes.
func (s *soak) streamer(r *rand.Rand) {
	for !s.stopped() {
		coll := []string{"docs", "events", "bulk"}[r.IntN(3)]
		q := query.All()
		reverse := r.IntN(2) == 0
		if reverse {
			q = q.Reverse()
		}
		if r.IntN(4) == 0 {
			q = q.Limit(1 + r.IntN(600))
		}
		s.call("stream "+coll, func(db *storh.DB) error {
			var h collection
			var err error
			if coll == "docs" {
				h, err = db.Docs(coll)
			} else {
				h, err = db.Log(coll)
			}
			if err != nil {
				return err
			}
			var last uuidv7.UUID
			first := true
			for rec, err := range h.Stream(q) {
				if err != nil {
					return err
				}
				if !first && (rec.ID.Compare(last) <= 0) != reverse {
					s.fail("stream %s: %s after %s (reverse=%v)", coll, rec.ID, last, reverse)
					return nil
				}
				first, last = false, rec.ID
				tag, _ := rec.Data()["t"].(string)
				want, err := storhEncode(rec.ID, tag)
				if err != nil || !bytes.Equal(rec.Raw(), want[engine.HeaderSize:]) {
					s.fail("stream %s: record %s (%s) differs from what was written", coll, rec.ID, tag)
					return nil
				}
				s.streamed.Add(1)
			}
			return nil
		})
	}
}

// verifier runs Verify on the live database: a consistent snapshot must be
// clean even while everything else writes.
func (s *soak) verifier(r *rand.Rand) {
	for !s.stopped() {
		// Problems are collected, not fatal, so that the rest of the soak
		// still runs when Verify misbehaves.
		s.call("verify", func(db *storh.DB) error {
			_, err := db.Verify(func(p storh.Problem) {
				s.mu.Lock()
				if s.verifyProblems++; s.verifyProblems <= 5 {
					s.verifySamples = append(s.verifySamples, p.String())
				}
				s.mu.Unlock()
			})
			return err
		})
		s.verifies.Add(1)
		time.Sleep(time.Duration(100+r.IntN(200)) * time.Millisecond) // pacing: a Verify reads everything
	}
}

// reopener closes and reopens the database under everyone.
func (s *soak) reopener(r *rand.Rand) {
	for !s.stopped() {
		time.Sleep(time.Duration(100+r.IntN(400)) * time.Millisecond) // pacing
		old := s.db.Load()
		if err := old.Close(); err != nil {
			s.fail("Close: %v", err)
			return
		}
		db, err := storh.Open(s.path, storh.WithoutSync())
		if err != nil {
			s.fail("reopen: %v", err)
			return
		}
		s.db.Store(db)
		s.reopens.Add(1)
	}
}

// final checks the closed database against everything acknowledged.
func (s *soak) final() {
	t := s.t
	db, err := storh.Open(s.path)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := db.Verify(func(p storh.Problem) { t.Errorf("final Verify: %v", p) }); err != nil || rep.Problems != 0 {
		t.Errorf("final Verify: %+v, %v", rep, err)
	}
	db.Close()
	raw := readRaw(t, s.path)
	check := func(coll string, want map[uuidv7.UUID]string) {
		for id, tag := range want {
			if v, ok := raw[coll][id]; !ok || !bytes.Equal(v, encoded(t, id, tag)) {
				t.Errorf("%s %s (%s): acknowledged write missing or changed", coll, id, tag)
			}
		}
		for id, v := range raw[coll] {
			if _, ok := want[id]; !ok {
				t.Errorf("%s %s (%s): present but not acknowledged (or acknowledged deleted)", coll, id, tagOf(id, v))
			}
		}
	}
	check("docs", s.docs)
	check("events", s.logs)
	got := map[string]bool{}
	for id, v := range raw["bulk"] {
		got[tagOf(id, v)] = true
	}
	if len(got) != len(s.bulk) || len(raw["bulk"]) != len(s.bulk) {
		t.Errorf("bulk holds %d records (%d distinct tags); PutStream reported %d committed", len(raw["bulk"]), len(got), len(s.bulk))
	}
	for tag := range s.bulk {
		if !got[tag] {
			t.Errorf("bulk: committed record %s missing", tag)
			break
		}
	}
	var sum int64
	for id, v := range raw["acct"] {
		p, _ := engine.Payload(id[:], v)
		m, _ := engine.DecodeMapIn(p, nil)
		sum += m["bal"].(int64)
	}
	if sum != soakBalance {
		t.Errorf("accounts hold %d at the end, want %d", sum, soakBalance)
	}
}
