package reliability

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ---------------------------------------------------------------------------
// Damaged record values
// ---------------------------------------------------------------------------

type damagedRec struct {
	coll string
	id   uuidv7.UUID
	kind string // expected Problem kind: "checksum" or "decode"
}

// TestCorruptValues flips bytes inside stored values through a raw bbolt
// handle and checks every reader: Verify names exactly the damaged ids, Get
// and Stream refuse them with ErrCorrupt and return the rest byte for byte,
// ContinueOnError skips them, and Repair quarantines them, after which
// Verify is clean and the counts drop by the number quarantined.
func TestCorruptValues(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(runSeed(t), 1))
	path := scratch(t, "values.db")
	m := buildDB(t, path, 700, 700, 0)

	// Pick the damaged records: the first and last of each collection (the
	// edges of every scan), a run of neighbours, and random ones.
	damaged := map[uuidv7.UUID]damagedRec{}
	for coll, recs := range m {
		ids := sortedIDs(recs)
		pick := []int{0, len(ids) - 1, 300, 301, 302}
		for range 8 {
			pick = append(pick, r.IntN(len(ids)))
		}
		for _, i := range pick {
			damaged[ids[i]] = damagedRec{coll: coll, id: ids[i], kind: "checksum"}
		}
	}
	// One record in "docs" gets a payload that is not a record but carries
	// a correct checksum: only decoding can tell. Pick one not yet damaged.
	var forged uuidv7.UUID
	for _, id := range sortedIDs(m["docs"])[100:] {
		if _, ok := damaged[id]; !ok {
			forged = id
			break
		}
	}
	damaged[forged] = damagedRec{coll: "docs", id: forged, kind: "decode"}

	original := map[uuidv7.UUID][]byte{} // the damaged bytes, as written
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		for id, d := range damaged {
			recs := tx.Bucket([]byte(d.coll)).Bucket([]byte("r"))
			v := bytes.Clone(recs.Get(id[:]))
			if d.kind == "decode" {
				// 0xc1 is the one byte msgpack never uses. Same length, so
				// the counters stay right and only the record is wrong.
				for i := 5; i < len(v); i++ {
					v[i] = 0xc1
				}
				seal(v, id) // a valid checksum over undecodable bytes
			} else {
				for range 1 + r.IntN(3) {
					v[r.IntN(len(v))] ^= byte(1 + r.IntN(255))
				}
			}
			original[id] = v
			if err := recs.Put(id[:], v); err != nil {
				return err
			}
		}
		return nil
	})
	// A flip can cancel an earlier flip of the same byte; such a record is
	// intact again and must read as intact.
	for id, d := range damaged {
		if d.kind == "checksum" && bytes.Equal(original[id], encoded(t, id, m[d.coll][id])) {
			delete(damaged, id)
		}
	}
	t.Logf("%d records, %d damaged (%d forged with a valid checksum)", m.total(), len(damaged), 1)

	db, err := storh.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()

	// Verify names every damaged id, and nothing else.
	got := map[uuidv7.UUID]string{}
	rep, err := db.Verify(func(p storh.Problem) {
		if _, dup := got[p.ID]; dup || p.ID.IsZero() {
			t.Errorf("unexpected problem: %v", p)
		}
		got[p.ID] = string(p.Kind)
	})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for id, d := range damaged {
		if got[id] != d.kind {
			t.Errorf("Verify: %s %s reported as %q, want %q", d.coll, id, got[id], d.kind)
		}
	}
	if rep.Problems != len(damaged) || len(got) != len(damaged) {
		t.Errorf("Verify: %d problems on %d ids, want %d", rep.Problems, len(got), len(damaged))
	}

	handles := map[string]collection{}
	docs, err := db.Docs("docs")
	if err != nil {
		t.Fatal(err)
	}
	events, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	handles["docs"] = docs
	handles["events"] = events

	// Get: ErrCorrupt naming the id for every damaged record, exact bytes
	// for the rest. The forged one passes its checksum, so reads hand it
	// out, but it is never data: decoding it fails with ErrCorrupt.
	for coll, recs := range m {
		h := handles[coll]
		for id, tag := range recs {
			rec, err := h.Get(id)
			if d, bad := damaged[id]; bad && d.kind == "decode" {
				checkForged(t, "Get", rec, err)
			} else if bad {
				if !errors.Is(err, storh.ErrCorrupt) || !strings.Contains(err.Error(), id.String()) {
					t.Errorf("Get(damaged %s %s) = %v; want ErrCorrupt naming the id", coll, id, err)
				}
			} else if err != nil || !bytes.Equal(rec.Raw(), encoded(t, id, tag)[5:]) {
				t.Errorf("Get(%s %s) = %v; want the record exactly", coll, id, err)
			}
		}
	}

	for coll, recs := range m {
		h := handles[coll]
		ids := sortedIDs(recs)
		var wantBad []uuidv7.UUID // what reads refuse: checksum failures
		for _, id := range ids {
			if d, ok := damaged[id]; ok && d.kind != "decode" {
				wantBad = append(wantBad, id)
			}
		}
		for _, reverse := range []bool{false, true} {
			q := query.All()
			order := slices.Clone(ids)
			bad := slices.Clone(wantBad)
			if reverse {
				q = q.Reverse()
				slices.Reverse(order)
				slices.Reverse(bad)
			}
			name := fmt.Sprintf("%s reverse=%v", coll, reverse)

			// Without ContinueOnError the stream stops with ErrCorrupt at
			// the first damaged record, after exactly the records before it.
			n := 0
			var streamErr error
			for rec, err := range h.Stream(q) {
				if err != nil {
					streamErr = err
					break
				}
				if order[n] == forged {
					checkForged(t, name, rec, nil)
				} else {
					checkStreamed(t, name, rec, order[n], m[coll][order[n]])
				}
				n++
			}
			if len(bad) > 0 {
				if !errors.Is(streamErr, storh.ErrCorrupt) || !strings.Contains(streamErr.Error(), bad[0].String()) {
					t.Errorf("%s: stream error %v; want ErrCorrupt naming %s", name, streamErr, bad[0])
				}
				if n != slices.Index(order, bad[0]) {
					t.Errorf("%s: %d records before the error, want %d", name, n, slices.Index(order, bad[0]))
				}
			}

			// With ContinueOnError every readable record comes back, in
			// order, and every damaged one is reported once.
			var reported []uuidv7.UUID
			cq := q.ContinueOnError(func(id uuidv7.UUID, err error) {
				if !errors.Is(err, storh.ErrCorrupt) {
					t.Errorf("%s: ContinueOnError got %v, want ErrCorrupt", name, err)
				}
				reported = append(reported, id)
			})
			var readable []uuidv7.UUID
			for _, id := range order {
				if !slices.Contains(bad, id) {
					readable = append(readable, id)
				}
			}
			n = 0
			for rec, err := range h.Stream(cq) {
				if err != nil {
					t.Fatalf("%s: ContinueOnError stream: %v", name, err)
				}
				if n >= len(readable) {
					t.Fatalf("%s: more records than stored", name)
				}
				if readable[n] == forged {
					checkForged(t, name, rec, nil)
				} else {
					checkStreamed(t, name, rec, readable[n], m[coll][readable[n]])
				}
				n++
			}
			if n != len(readable) || !slices.Equal(reported, bad) {
				t.Errorf("%s: ContinueOnError gave %d records (want %d) and reported %v (want %v)", name, n, len(readable), reported, bad)
			}
		}

		// A filtered stream reads the raw bytes: a damaged record never
		// matches, an intact one still does. One lookup of each kind per
		// collection (each is a full scan).
		var probes []uuidv7.UUID
		if len(wantBad) > 0 {
			probes = append(probes, wantBad[len(wantBad)/2])
		}
		for _, id := range ids {
			if _, bad := damaged[id]; !bad {
				probes = append(probes, id)
				break
			}
		}
		for _, id := range probes {
			_, bad := damaged[id]
			var hits []uuidv7.UUID
			for rec, err := range h.Stream(query.All().WhereEqual("t", recs[id]).ContinueOnError(func(uuidv7.UUID, error) {})) {
				if err != nil {
					t.Fatalf("filtered stream: %v", err)
				}
				hits = append(hits, rec.ID)
			}
			if found := len(hits) == 1 && hits[0] == id; found == bad || len(hits) > 1 {
				t.Errorf("%s: WhereEqual(t, %s) found %v; damaged=%v", coll, recs[id], hits, bad)
			}
		}
	}

	// Counters are metadata: damage to values does not change them.
	counts := map[string]int{}
	for coll, recs := range m {
		n, err := handles[coll].Count()
		if err != nil || n != len(recs) {
			t.Errorf("Count(%s) = %d, %v; want %d", coll, n, err, len(recs))
		}
		counts[coll] = n
	}

	// Repair moves every damaged record to the quarantine.
	rep, err = db.Repair(nil)
	if err != nil {
		t.Fatalf("Repair: %v", err)
	}
	if rep.Quarantined != len(damaged) {
		t.Errorf("Repair quarantined %d, want %d", rep.Quarantined, len(damaged))
	}
	rep, err = db.Verify(func(p storh.Problem) { t.Errorf("after Repair: %v", p) })
	if err != nil || rep.Problems != 0 {
		t.Errorf("Verify after Repair: %+v, %v", rep, err)
	}
	for coll, h := range handles {
		lost := 0
		for _, d := range damaged {
			if d.coll == coll {
				lost++
			}
		}
		if n, err := h.Count(); err != nil || n != counts[coll]-lost {
			t.Errorf("Count(%s) after Repair = %d, %v; want %d", coll, n, err, counts[coll]-lost)
		}
	}
	for id, d := range damaged {
		if _, err := handles[d.coll].Get(id); !errors.Is(err, storh.ErrNotFound) {
			t.Errorf("Get(quarantined %s) = %v, want ErrNotFound", id, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The quarantine keeps the damaged bytes exactly, for manual recovery;
	// the records left are exactly the intact ones.
	testkit.ViewBolt(t, path, func(tx *bolt.Tx) {
		for id, d := range damaged {
			q := tx.Bucket([]byte(d.coll)).Bucket([]byte("q"))
			if q == nil || !bytes.Equal(q.Get(id[:]), original[id]) {
				t.Errorf("quarantine of %s %s does not hold the damaged bytes", d.coll, id)
			}
		}
	})
	raw := readRaw(t, path)
	for coll, recs := range m {
		for id, tag := range recs {
			_, bad := damaged[id]
			v, present := raw[coll][id]
			if bad == present || (present && !bytes.Equal(v, encoded(t, id, tag))) {
				t.Errorf("after Repair %s %s: present=%v damaged=%v", coll, id, present, bad)
			}
		}
	}
}

// TestCorruptTruncatedValue shortens values below their header: Verify
// reports each (and the byte counter that no longer adds up), Repair
// quarantines them and recounts.
func TestCorruptTruncatedValue(t *testing.T) {
	t.Parallel()
	path := scratch(t, "short.db")
	m := buildDB(t, path, 50, 0, 0)
	ids := sortedIDs(m["docs"])
	short := []uuidv7.UUID{ids[3], ids[40]}
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		recs := tx.Bucket([]byte("docs")).Bucket([]byte("r"))
		for i, id := range short {
			if err := recs.Put(id[:], []byte{1, 2, 3}[:i+1]); err != nil {
				return err
			}
		}
		return nil
	})
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	kinds := map[string]int{}
	if _, err := db.Verify(func(p storh.Problem) { kinds[string(p.Kind)]++ }); err != nil {
		t.Fatal(err)
	}
	if kinds["checksum"] != 2 || kinds["counter"] != 1 || len(kinds) != 2 {
		t.Errorf("Verify found %v; want 2 checksum and 1 counter problem", kinds)
	}
	docs, _ := db.Docs("docs")
	for _, id := range short {
		if _, err := docs.Get(id); !errors.Is(err, storh.ErrCorrupt) || !strings.Contains(err.Error(), "shorter than its header") {
			t.Errorf("Get(%s) = %v; want ErrCorrupt about the short value", id, err)
		}
	}
	rep, err := db.Repair(nil)
	if err != nil || rep.Quarantined != 2 || rep.Recounted != 1 {
		t.Errorf("Repair = %+v, %v; want 2 quarantined, 1 recounted", rep, err)
	}
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
		t.Errorf("Verify after Repair = %+v, %v", rep, err)
	}
	if n, _ := docs.Count(); n != len(ids)-2 {
		t.Errorf("Count = %d, want %d", n, len(ids)-2)
	}
}

// collection is what Docs and Log share for reading.
type collection interface {
	Get(uuidv7.UUID) (storh.Record, error)
	Stream(query.Query) iter.Seq2[storh.Record, error]
	Count() (int, error)
}

// checkStreamed asserts a streamed record is the expected one, byte for
// byte.
// checkForged: a record whose checksum is valid but whose payload is not a
// record is handed out by reads, and fails every decode with ErrCorrupt.
func checkForged(t *testing.T, name string, rec storh.Record, err error) {
	t.Helper()
	var m storh.Map
	if err != nil {
		t.Errorf("%s(forged %s) = %v; want the record, failing to decode", name, rec.ID, err)
	} else if derr := rec.Decode(&m); !errors.Is(derr, storh.ErrCorrupt) || !strings.Contains(derr.Error(), rec.ID.String()) || rec.Data() != nil {
		t.Errorf("%s(forged %s): Decode = %v, Data = %v; want ErrCorrupt naming the id and nil", name, rec.ID, derr, rec.Data())
	}
}

func checkStreamed(t *testing.T, name string, rec storh.Record, wantID uuidv7.UUID, tag string) {
	t.Helper()
	if rec.ID != wantID {
		t.Fatalf("%s: got %s, want %s", name, rec.ID, wantID)
	}

	if !bytes.Equal(rec.Raw(), encoded(t, uuidv7.Nil, tag)[5:]) {
		t.Errorf("%s: record %s differs from what was written", name, wantID)
	}
}

func sortedIDs(recs map[uuidv7.UUID]string) []uuidv7.UUID {
	ids := make([]uuidv7.UUID, 0, len(recs))
	for id := range recs {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, uuidv7.UUID.Compare)
	return ids
}

func rawUpdate(tb testing.TB, path string, fn func(*bolt.Tx) error) {
	tb.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		tb.Fatalf("raw open: %v", err)
	}
	defer bdb.Close()
	if err := bdb.Update(fn); err != nil {
		tb.Fatalf("raw update: %v", err)
	}
}

// breakCounter adds delta to a collection's stored record count through raw
// bbolt, as an engine bug would.
func breakCounter(t *testing.T, path, coll string, delta int64) {
	t.Helper()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(coll)).Bucket([]byte("m"))
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], binary.BigEndian.Uint64(meta.Get([]byte("count")))+uint64(delta))
		return meta.Put([]byte("count"), v[:])
	})
}

// ---------------------------------------------------------------------------
// Damaged files
// ---------------------------------------------------------------------------

// damageReport is what the damage-read child saw, as JSON on its stdout.
type damageReport struct {
	OpenErr     string
	OpenCorrupt bool

	VerifyErr     string
	VerifyCorrupt bool
	Problems      int
	ProblemKinds  map[string]int

	Get         readTally // Get of every manifest record
	Stream      readTally // Stream with ContinueOnError of every collection
	ViewGet     readTally // the same reads inside a View callback
	ViewStream  readTally
	ViewErr     string
	UpdateGet   readTally // and inside an Update callback that returns nil
	UpdateErr   string
	UpdatePanic bool // the Update committed although a read inside it hit a damaged page
	RepairErr   string
	AfterRepair readTally // Get again after Repair
	CloseErr    string
}

// readTally classifies reads: Exact means the bytes that were written;
// Wrong means data that differs or an id that was never written, which
// must never happen.
type readTally struct {
	Exact, Wrong, Corrupt, NotFound, Other int
	Samples                                map[string][]string // a few details per kind
}

func (r *readTally) add(kind string, detail string) {
	switch kind {
	case "exact":
		r.Exact++
		return
	case "wrong":
		r.Wrong++
	case "corrupt":
		r.Corrupt++
	case "notfound":
		r.NotFound++
	default:
		r.Other++
	}
	if r.Samples == nil {
		r.Samples = map[string][]string{}
	}
	if len(r.Samples[kind]) < 3 {
		r.Samples[kind] = append(r.Samples[kind], detail)
	}
}

func init() { roles["damage-read"] = damageReadChild }

// damageReadChild opens a damaged database and reads everything it can:
// Verify, Get of every record in the manifest, Stream of every collection,
// Repair, and Get again. It reports what it saw; a panic or runtime fault
// kills it, which the parent reports as a failure.
func damageReadChild() int {
	path := os.Getenv("STORH_REL_DB")
	var man map[string]map[string]string
	b, err := os.ReadFile(os.Getenv("STORH_REL_MANIFEST"))
	if err == nil {
		err = json.Unmarshal(b, &man)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifest:", err)
		return 3
	}
	var rep damageReport
	defer func() {
		out, _ := json.Marshal(rep)
		fmt.Println(string(out))
	}()
	db, err := storh.Open(path, storh.WithLockTimeout(2e9))
	if err != nil {
		rep.OpenErr, rep.OpenCorrupt = err.Error(), errors.Is(err, storh.ErrCorrupt)
		return 0
	}
	rep.ProblemKinds = map[string]int{}
	vr, err := db.Verify(func(p storh.Problem) { rep.ProblemKinds[string(p.Kind)]++ })
	rep.Problems = vr.Problems
	if err != nil {
		rep.VerifyErr, rep.VerifyCorrupt = err.Error(), errors.Is(err, storh.ErrCorrupt)
	}
	classify := func(tally *readTally, coll string, id uuidv7.UUID, rec storh.Record, err error) {
		tag, known := man[coll][id.String()]
		switch {
		case err == nil && !known:
			tally.add("wrong", fmt.Sprintf("%s %s was never written", coll, id))
		case err == nil && bytes.Equal(rec.Raw(), encodedOrNil(tag)):
			tally.add("exact", "")
		case err == nil:
			tally.add("wrong", fmt.Sprintf("%s %s differs", coll, id))
		case errors.Is(err, storh.ErrCorrupt):
			tally.add("corrupt", err.Error())
		case errors.Is(err, storh.ErrNotFound):
			tally.add("notfound", err.Error())
		default:
			tally.add("other", err.Error())
		}
	}
	readAll := func(tally *readTally, stream *readTally, open func(string) (collection, error)) {
		for coll, recs := range man {
			h, err := open(coll)
			if err != nil {
				for range recs {
					classify(tally, coll, uuidv7.UUID{}, storh.Record{}, err)
				}
				continue
			}
			for s := range recs {
				id := uuidv7.MustParse(s)
				rec, err := h.Get(id)
				classify(tally, coll, id, rec, err)
			}
			if stream == nil {
				continue
			}
			q := query.All().ContinueOnError(func(id uuidv7.UUID, err error) { classify(stream, coll, id, storh.Record{}, err) })
			for rec, err := range h.Stream(q) {
				classify(stream, coll, rec.ID, rec, err)
				if err != nil {
					break
				}
			}
		}
	}
	dbHandle := func(coll string) (collection, error) { return handle(db, coll) }
	readAll(&rep.Get, &rep.Stream, dbHandle)
	// Reads inside callbacks meet the same damaged pages: they must give
	// errors too, never kill the process, and a write transaction that hit
	// one must not commit even though its callback returns nil.
	if err := db.View(func(tx *storh.Tx) error {
		readAll(&rep.ViewGet, &rep.ViewStream, func(coll string) (collection, error) { return txHandle(tx, coll) })
		return nil
	}); err != nil {
		rep.ViewErr = err.Error()
	}
	hit := false
	if err := db.Update(func(tx *storh.Tx) error {
		readAll(&rep.UpdateGet, nil, func(coll string) (collection, error) { return txHandle(tx, coll) })
		// A contained bbolt panic says "the database file is damaged".
		hit = strings.Contains(strings.Join(rep.UpdateGet.Samples["corrupt"], "\n"), "database file is damaged")
		return nil
	}); err != nil {
		rep.UpdateErr = err.Error()
	}
	rep.UpdatePanic = hit && rep.UpdateErr == ""
	if _, err := db.Repair(nil); err != nil {
		rep.RepairErr = err.Error()
	}
	readAll(&rep.AfterRepair, nil, dbHandle)
	if err := db.Close(); err != nil {
		rep.CloseErr = err.Error()
	}
	return 0
}

func encodedOrNil(tag string) []byte {
	v, err := storhEncode(uuidv7.Nil, tag)
	if err != nil {
		return nil
	}
	return v[5:]
}

func txHandle(tx *storh.Tx, coll string) (collection, error) {
	if coll == "events" {
		return tx.Log(coll)
	}
	return tx.Docs(coll)
}

func handle(db *storh.DB, coll string) (collection, error) {
	if coll == "events" {
		return db.Log(coll)
	}
	return db.Docs(coll)
}

// fileScenario damages a copy of the template file.
type fileScenario struct {
	name string
	// damage changes the file; info describes the template's pages.
	damage func(t *testing.T, f *os.File, info fileInfo, r *rand.Rand)
	// detect: the damage certainly hits live data, so Open or Verify must
	// say the file is damaged even if every read happens to succeed. In
	// every scenario, any read that does not return the written bytes must
	// come with such a report.
	detect bool
	// minExact: at least this many records (counted from the total) must
	// still read back exactly; -1 for no bound. A stale meta page costs at
	// most the last transaction (one record in the template).
	lost int
	// freshOK: the damaged file is indistinguishable from a new database.
	freshOK bool
}

// fileInfo describes the template: page size, high-water mark, which pages
// hold what, and which meta page is the newer.
type fileInfo struct {
	pageSize  int
	size      int64
	pages     map[string][]int // page type → page ids in use ("leaf", "branch", "freelist", "overflow")
	newerMeta int
}

func inspect(t *testing.T, path string) fileInfo {
	t.Helper()
	info := fileInfo{pages: map[string][]int{}}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	info.size = fi.Size()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	info.pageSize = bdb.Info().PageSize
	err = bdb.View(func(tx *bolt.Tx) error {
		// Page needs a writable tx for concurrent safety; nothing else runs.
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil {
				return err
			}
			if p == nil {
				break
			}
			info.pages[p.Type] = append(info.pages[p.Type], id)
			for o := 1; o <= p.OverflowCount; o++ {
				info.pages["overflow"] = append(info.pages["overflow"], id+o)
			}
			id += p.OverflowCount
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The meta page with the larger transaction id is the one bbolt uses.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var txid [2]uint64
	for i := range 2 {
		buf := make([]byte, 128)
		if _, err := f.ReadAt(buf, int64(i*info.pageSize)); err != nil {
			t.Fatal(err)
		}
		// page header (16 bytes), then meta: magic, version, pageSize,
		// flags, root bucket (16), freelist, pgid, txid.
		txid[i] = binary.LittleEndian.Uint64(buf[16+4+4+4+4+16+8+8:])
	}
	if txid[1] > txid[0] {
		info.newerMeta = 1
	}
	return info
}

func overwrite(t *testing.T, f *os.File, off int64, b []byte) {
	t.Helper()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// pagesOf returns the in-use pages of the given types.
func pagesOf(t *testing.T, info fileInfo, types ...string) []int {
	var out []int
	for _, typ := range types {
		out = append(out, info.pages[typ]...)
	}
	if len(out) == 0 {
		t.Fatalf("template has no %v pages: %v", types, info.pages)
	}
	sort.Ints(out)
	return out
}

func fileScenarios() []fileScenario {
	truncate := func(size func(fileInfo) int64) func(*testing.T, *os.File, fileInfo, *rand.Rand) {
		return func(t *testing.T, f *os.File, info fileInfo, _ *rand.Rand) {
			if err := f.Truncate(size(info)); err != nil {
				t.Fatal(err)
			}
		}
	}
	page := func(types []string, fill func(r *rand.Rand, n int) []byte, keepHeader bool) func(*testing.T, *os.File, fileInfo, *rand.Rand) {
		return func(t *testing.T, f *os.File, info fileInfo, r *rand.Rand) {
			ids := pagesOf(t, info, types...)
			id := ids[r.IntN(len(ids))]
			off := int64(id * info.pageSize)
			b := fill(r, info.pageSize)
			if keepHeader {
				b, off = b[16:], off+16
			}
			overwrite(t, f, off, b)
		}
	}
	zeros := func(_ *rand.Rand, n int) []byte { return make([]byte, n) }
	// patch edits one page of a type in place, keeping the rest of it: the
	// precise damage a bad sector or a stray write leaves in an element
	// header (bbolt's layout: a 16-byte page header, then 16-byte element
	// headers; a branch element is pos, key size, child page id, a leaf
	// element flags, pos, key size, value size).
	patch := func(typ string, edit func(p []byte, id int)) func(*testing.T, *os.File, fileInfo, *rand.Rand) {
		return func(t *testing.T, f *os.File, info fileInfo, r *rand.Rand) {
			ids := pagesOf(t, info, typ)
			id := ids[r.IntN(len(ids))]
			p := make([]byte, info.pageSize)
			if _, err := f.ReadAt(p, int64(id*info.pageSize)); err != nil {
				t.Fatal(err)
			}
			edit(p, id)
			overwrite(t, f, int64(id*info.pageSize), p)
		}
	}
	le := binary.LittleEndian
	meta := func(which func(fileInfo) []int, fill func(*rand.Rand, int) []byte) func(*testing.T, *os.File, fileInfo, *rand.Rand) {
		return func(t *testing.T, f *os.File, info fileInfo, r *rand.Rand) {
			for _, i := range which(info) {
				overwrite(t, f, int64(i*info.pageSize), fill(r, info.pageSize))
			}
		}
	}
	both := func(fileInfo) []int { return []int{0, 1} }
	newer := func(i fileInfo) []int { return []int{i.newerMeta} }
	older := func(i fileInfo) []int { return []int{1 - i.newerMeta} }
	flipChecksum := func(t *testing.T, f *os.File, info fileInfo, _ *rand.Rand) {
		// The meta checksum is the last field; flip a byte of the root
		// bucket pointer instead so the stored checksum no longer matches.
		for i := range 2 {
			off := int64(i*info.pageSize + 16 + 16)
			b := make([]byte, 1)
			if _, err := f.ReadAt(b, off); err != nil {
				t.Fatal(err)
			}
			b[0] ^= 0x40
			overwrite(t, f, off, b)
		}
	}
	scatter := func(n int) func(*testing.T, *os.File, fileInfo, *rand.Rand) {
		return func(t *testing.T, f *os.File, info fileInfo, r *rand.Rand) {
			for range n {
				off := int64(2*info.pageSize) + r.Int64N(info.size-int64(2*info.pageSize))
				overwrite(t, f, off, []byte{byte(1 + r.IntN(255))})
			}
		}
	}
	return []fileScenario{
		{name: "truncate-to-zero", damage: truncate(func(fileInfo) int64 { return 0 }), freshOK: true, lost: -1},
		{name: "truncate-to-one-page", damage: truncate(func(i fileInfo) int64 { return int64(i.pageSize) }), detect: true, lost: -1},
		{name: "truncate-mid-meta", damage: truncate(func(i fileInfo) int64 { return int64(i.pageSize) + 100 }), detect: true, lost: -1},
		{name: "truncate-to-metas", damage: truncate(func(i fileInfo) int64 { return int64(2 * i.pageSize) }), detect: true, lost: -1},
		{name: "truncate-half", damage: truncate(func(i fileInfo) int64 { return i.size / 2 / int64(i.pageSize) * int64(i.pageSize) }), detect: true, lost: -1},
		{name: "truncate-last-page", damage: truncate(func(i fileInfo) int64 { return i.size - int64(i.pageSize) }), lost: -1},
		{name: "truncate-odd-size", damage: truncate(func(i fileInfo) int64 { return i.size - 1000 }), lost: -1},
		{name: "zero-both-metas", damage: meta(both, zeros), detect: true, lost: -1},
		{name: "random-both-metas", damage: meta(both, randomBytes), detect: true, lost: -1},
		{name: "meta-checksums", damage: flipChecksum, detect: true, lost: -1},
		// bbolt keeps two meta pages and falls back to the other one: the
		// file opens at the previous transaction. Verify still sees the
		// damaged page.
		{name: "zero-newer-meta", damage: meta(newer, zeros), detect: true, lost: 1},
		{name: "zero-older-meta", damage: meta(older, zeros), detect: true, lost: 0},
		{name: "zero-leaf-page", damage: page([]string{"leaf"}, zeros, false), detect: true, lost: -1},
		{name: "random-leaf-page", damage: page([]string{"leaf"}, randomBytes, false), detect: true, lost: -1},
		{name: "random-leaf-body", damage: page([]string{"leaf"}, randomBytes, true), detect: true, lost: -1},
		{name: "zero-branch-page", damage: page([]string{"branch"}, zeros, false), detect: true, lost: -1},
		{name: "random-branch-page", damage: page([]string{"branch"}, randomBytes, false), detect: true, lost: -1},
		{name: "random-branch-body", damage: page([]string{"branch"}, randomBytes, true), detect: true, lost: -1},
		{name: "zero-freelist-page", damage: page([]string{"freelist"}, zeros, false), detect: true, lost: -1},
		{name: "random-freelist-page", damage: page([]string{"freelist"}, randomBytes, false), detect: true, lost: -1},
		{name: "random-overflow-page", damage: page([]string{"overflow"}, randomBytes, false), detect: true, lost: -1},
		{name: "scatter-64-bytes", damage: scatter(64), lost: -1},
		// A branch whose first child is the branch itself: a cycle that
		// walks loop on, and a search recurses into without end.
		{name: "branch-cycle", damage: patch("branch", func(p []byte, id int) { le.PutUint64(p[16+8:], uint64(id)) }), detect: true, lost: -1},
		// A branch whose second child is its first again: a walk steps
		// back to keys it already returned.
		{name: "branch-shared-child", damage: patch("branch", func(p []byte, _ int) { copy(p[32+8:32+16], p[16+8:16+16]) }), detect: true, lost: -1},
		// Element sizes that reach past the end of the file's mapping: a
		// read there faults.
		{name: "branch-key-past-file", damage: patch("branch", func(p []byte, _ int) { le.PutUint32(p[16+4:], 0x300010) }), detect: true, lost: -1},
		{name: "leaf-value-past-file", damage: patch("leaf", func(p []byte, _ int) { le.PutUint32(p[16+12:], 0x7ffff000) }), detect: true, lost: -1},
	}
}

// TestCorruptFile damages the bbolt file itself in many ways and opens each
// copy in a child process: Open or Verify must report the damage (ErrCorrupt
// or problems), no read may return data that differs from what was written,
// and the process must neither panic nor die of a fault. Each random
// scenario runs with several seeds in the long run (testkit.Long), one
// otherwise.
func TestCorruptFile(t *testing.T) {
	t.Parallel()
	seed := runSeed(t)
	dir := t.TempDir()
	template := dir + "/template.db"
	m := buildDB(t, template, 800, 1500, 12)
	info := inspect(t, template)
	t.Logf("template: %d bytes, page size %d, pages %v", info.size, info.pageSize, counts(info.pages))
	manPath := dir + "/manifest.json"
	writeManifest(t, manPath, m)

	var mu sync.Mutex
	runs, detected, crashed := 0, 0, 0
	t.Run("damage", func(t *testing.T) {
		for i, sc := range fileScenarios() {
			seeds := 1
			if testkit.Long() && (strings.HasPrefix(sc.name, "random") || strings.HasPrefix(sc.name, "scatter")) {
				seeds = 3
			}
			for s := range seeds {
				t.Run(fmt.Sprintf("%s/%d", sc.name, s), func(t *testing.T) {
					t.Parallel()
					path := fmt.Sprintf("%s/%s-%d.db", dir, sc.name, s)
					copyFile(t, template, path)
					f, err := os.OpenFile(path, os.O_RDWR, 0)
					if err != nil {
						t.Fatal(err)
					}
					sc.damage(t, f, info, rand.New(rand.NewPCG(seed, uint64(i*100+s))))
					f.Close()
					res := runChild(t, "damage-read", "STORH_REL_DB="+path, "STORH_REL_MANIFEST="+manPath)
					mu.Lock()
					runs++
					if res.Exit != 0 {
						crashed++
					}
					mu.Unlock()
					if res.Exit != 0 {
						if diedBadly(res) {
							t.Fatalf("the process died reading a damaged file; it must get an error instead:\n%s", crashExcerpt(res.Stderr))
						}
						t.Fatalf("child exited %d:\n%s", res.Exit, tail(res.Stderr, 30))
					}
					var rep damageReport
					lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
					if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
						t.Fatalf("child report: %v\n%s", err, res.Stdout)
					}
					checkDamageReport(t, sc, rep, m.total())
					if rep.OpenCorrupt || rep.VerifyCorrupt || rep.Problems > 0 {
						mu.Lock()
						detected++
						mu.Unlock()
					}
				})
			}
		}
	})
	t.Logf("%d damaged files: %d reported as damaged, %d killed the process", runs, detected, crashed)
}

func checkDamageReport(t *testing.T, sc fileScenario, rep damageReport, total int) {
	t.Helper()
	t.Logf("open: %q; verify: %d problems %v, err %q; get %+v; stream %+v; in view %+v, err %q; in update %+v, err %q; repair err %q; after repair %+v",
		rep.OpenErr, rep.Problems, rep.ProblemKinds, rep.VerifyErr, rep.Get, rep.Stream, rep.ViewGet, rep.ViewErr, rep.UpdateGet, rep.UpdateErr, rep.RepairErr, rep.AfterRepair)
	for name, tally := range map[string]readTally{"Get": rep.Get, "Stream": rep.Stream, "Get after Repair": rep.AfterRepair,
		"Get in View": rep.ViewGet, "Stream in View": rep.ViewStream, "Get in Update": rep.UpdateGet} {
		if tally.Wrong > 0 {
			t.Errorf("%s returned wrong data %d times, silently: %v", name, tally.Wrong, tally.Samples["wrong"])
		}
	}
	if rep.UpdatePanic {
		t.Errorf("an Update whose reads hit a damaged page committed; it must fail with ErrCorrupt")
	}
	if rep.OpenErr != "" {
		if !rep.OpenCorrupt || !strings.Contains(rep.OpenErr, "damaged") {
			t.Errorf("Open failed with %q; want ErrCorrupt saying the file is damaged", rep.OpenErr)
		}
		return
	}
	if sc.freshOK {
		// bbolt initialises an empty file: the result is a new, empty
		// database. Nothing is returned, so nothing wrong is.
		if rep.Get.Exact != 0 {
			t.Errorf("a truncated-to-empty file read back %d records", rep.Get.Exact)
		}
		return
	}
	if rep.VerifyErr != "" && !rep.VerifyCorrupt {
		t.Errorf("Verify failed with %q, which does not wrap ErrCorrupt", rep.VerifyErr)
	}
	reported := rep.VerifyCorrupt || rep.Problems > 0
	imperfect := rep.Get.Exact != total || rep.Stream.Exact != total
	switch {
	case imperfect && !reported:
		t.Errorf("damage went unreported: Verify found nothing, yet Get read %+v and Stream %+v of %d records", rep.Get, rep.Stream, total)
	case sc.detect && !reported:
		t.Errorf("damage to live pages went unreported: Open succeeded and Verify found nothing")
	}
	if sc.lost >= 0 && rep.Get.Exact < total-sc.lost {
		t.Errorf("Get read %d of %d records exactly; at most %d may be lost to this damage", rep.Get.Exact, total, sc.lost)
	}
}

func counts(m map[string][]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}

func writeManifest(t *testing.T, path string, m manifest) {
	t.Helper()
	out := map[string]map[string]string{}
	for coll, recs := range m {
		out[coll] = map[string]string{}
		for id, tag := range recs {
			out[coll][id.String()] = tag
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptNonRecordEntries forges entries of every shape storh never
// writes, where records and collections belong: short and foreign keys
// holding values or nested buckets inside a records bucket, strays beside a
// collection's own buckets, and values or oddly named buckets at the top
// level of the file. Stats must keep working, Verify must name each one
// (and no counter problem for a nested bucket, which is not a record),
// Repair must move every one into a quarantine without losing what it
// held, after which Verify is clean and every real record reads back.
func TestCorruptNonRecordEntries(t *testing.T) {
	t.Parallel()
	path := scratch(t, "shapes.db")
	m := buildDB(t, path, 40, 10, 0)
	foreign := uuidv7.UUID{0x01, 0x8b, 0, 0, 0, 0, 0x40, 0, 0x80} // version 4: a foreign key
	v7 := uuidv7.MustParse("018bcfe5-0000-7000-8000-000000000001")
	type shape struct {
		where  string // "records", "collection" or "top"
		key    []byte
		bucket bool // a nested bucket holding one value, or a value
		kind   string
	}
	shapes := []shape{
		{"records", []byte("ab"), true, "key"},       // the shape that broke Repair
		{"records", []byte("abc"), false, "key"},     // short key, value
		{"records", foreign[:], false, "key"},        // 16 bytes, not a UUIDv7
		{"records", v7[:], true, "key"},              // a valid id holding a bucket
		{"collection", []byte("x"), false, "layout"}, // beside "m" and "r"
		{"collection", []byte("extra"), true, "layout"},
		{"top", []byte("a value"), false, "layout"},       // at the top level
		{"top", []byte("\x01not a name"), true, "layout"}, // a bucket no collection can be called
	}
	nested := []byte("kept inside")
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		for _, sh := range shapes {
			var parent *bolt.Bucket
			switch sh.where {
			case "records":
				parent = tx.Bucket([]byte("docs")).Bucket([]byte("r"))
			case "collection":
				parent = tx.Bucket([]byte("docs"))
			}
			if sh.bucket {
				var b *bolt.Bucket
				var err error
				if parent == nil {
					b, err = tx.CreateBucket(sh.key)
				} else {
					b, err = parent.CreateBucket(sh.key)
				}
				if err != nil {
					return err
				}
				if err := b.Put([]byte("k"), nested); err != nil {
					return err
				}
				continue
			}
			if parent == nil {
				parent = tx.Cursor().Bucket()
			}
			if err := parent.Put(sh.key, []byte("forged")); err != nil {
				return err
			}
		}
		return nil
	})

	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := db.Stats()
	if err != nil || len(st.Collections) != 2 {
		t.Fatalf("Stats over forged entries = %+v, %v; want the 2 collections", st.Collections, err)
	}
	var found []storh.Problem
	if _, err := db.Verify(func(p storh.Problem) { found = append(found, p) }); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, p := range found {
		kinds[string(p.Kind)]++
	}
	// Two forged values in the records bucket are real values the counters
	// never counted: one true counter problem. The nested buckets add none.
	want := map[string]int{"key": 4, "layout": 4, "counter": 1}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("Verify found %v; want %v:\n%v", kinds, want, found)
	}
	rep, err := db.Repair(nil)
	if err != nil {
		t.Fatalf("Repair: %v", err)
	}
	if rep.Quarantined != len(shapes) || rep.Recounted != 1 {
		t.Errorf("Repair = %+v; want %d quarantined, 1 recounted", rep, len(shapes))
	}
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
		t.Errorf("Verify after Repair = %+v, %v", rep, err)
	}
	// A second Repair finds nothing to do.
	if rep, err := db.Repair(nil); err != nil || rep.Problems != 0 || rep.Quarantined != 0 {
		t.Errorf("second Repair = %+v, %v", rep, err)
	}
	docs, _ := db.Docs("docs")
	if n, _ := docs.Count(); n != len(m["docs"]) {
		t.Errorf("Count = %d; want %d", n, len(m["docs"]))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw := readRaw(t, path)
	for coll, recs := range m {
		for id, tag := range recs {
			if !bytes.Equal(raw[coll][id], encoded(t, id, tag)) {
				t.Errorf("after Repair %s %s differs", coll, id)
			}
		}
	}
	// Everything moved is in a quarantine, nested contents included.
	testkit.ViewBolt(t, path, func(tx *bolt.Tx) {
		collQ := tx.Bucket([]byte("docs")).Bucket([]byte("q"))
		dbQ := tx.Bucket([]byte("\x00quarantine"))
		for _, sh := range shapes {
			q := collQ
			if sh.where == "top" {
				q = dbQ
			}
			switch {
			case q == nil:
				t.Errorf("%q: no quarantine bucket", sh.key)
			case sh.bucket && (q.Bucket(sh.key) == nil || !bytes.Equal(q.Bucket(sh.key).Get([]byte("k")), nested)):
				t.Errorf("%q: the nested bucket and its content are not in the quarantine", sh.key)
			case !sh.bucket && !bytes.Equal(q.Get(sh.key), []byte("forged")):
				t.Errorf("%q: the value is not in the quarantine", sh.key)
			}
		}
	})
}
