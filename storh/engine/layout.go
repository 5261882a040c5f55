package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// On-disk layout (docs/architecture.md has the picture):
//
//	"\x00storh"            database metadata: "format" → formatVersion, and
//	                       "listsRebuild" while upgradeLists has indexes to build
//	"\x00quarantine"       top-level entries Repair moved out (only after a repair)
//	<collection name>/     one top-level bucket per collection, created by its first write
//	    "m"/               collection metadata: kind, count, bytes; "s"/, its schema (schema.go)
//	    "r"/               records: 16-byte binary UUIDv7 → stored value
//	    "q"/               quarantine: entries Repair moved out (only after a repair)
//
// Collection names are printable text, so they can never collide with the
// database's own buckets, whose names start with a NUL byte.
var (
	dbMetaBucket  = []byte("\x00storh")
	keyFormat     = []byte("format")
	keyListsBuild = []byte("listsRebuild")
	bucketMeta    = []byte("m")
	bucketRecords = []byte("r")
	keyKind       = []byte("kind")
	keyCount      = []byte("count")
	keyBytes      = []byte("bytes")
)

// Formats, as builds before this one wrote them. A new file started at
// formatBase; creating its first blocked index (internal/blockindex)
// raised it to formatChained, which a storh from before chained blocks
// refuses to open rather than misread. A file of
// formatBlocked holds blocks of version 1, which this build reads, and
// chains when it writes to them (chainStep). A store whose writers run at
// once (PostgreSQL) is raised to formatShared when this build first opens
// it for writing: its writers keep counters in slots (slots.go) and
// unique values in claims (claims.go), which a storh from before them
// would count wrong and not keep. A file reaches it only as a copy of
// such a store. A store at formatLists reads a dotted path through lists
// (mpack.PathValues): an index on one holds an entry per value the path
// reaches and a mark where it went through a list (indexDef.Lists), which a
// storh from before would misread, and would keep the old way, through
// maps only, when it writes. This build makes new stores at formatLists
// and raises every other store to it when it opens it for writing,
// rebuilding the indexes made before (upgradeLists); a copy's destination
// keeps its source's marker until then. A store at formatSchemas has a
// collection with a JSON Schema (below). A store at formatDue has a queue,
// whose pending jobs are keyed by due time (queue.go): creating the first
// queue raises the marker, and an open for writing raises a store with
// queues made before, rewriting their pending entries (upgradeQueues); a
// store without queues stays at its format. A store at formatFeed keeps a
// change feed (below), and a store at formatNumbered a feed numbered by
// its backend, one at formatFeedBlocks a file's feed in blocks, and one at
// formatRuns a numbered feed in runs. This build reads all eleven.
const (
	formatBase    = 1
	formatBlocked = 2
	formatChained = 3
	formatShared  = 4
	formatLists   = 5
	// formatSchemas: a collection holds a JSON Schema (schema.go), which
	// every write must pass. A storh from before schemas would ignore it
	// and store what it refuses, so storing the first schema raises the
	// marker to this, on a file or a shared store alike; a store without
	// schemas stays at its format, readable by older builds.
	formatSchemas = 6
	// formatDue: a queue's pending entries are keyed by due time ‖
	// sequence and its job states hold the due time (jobFormat), where a
	// storh from before reads them by sequence alone, and would hand out
	// jobs before they are due and misread the states. Only a store with
	// a queue needs it.
	formatDue = formatSchemas + 1
	// formatFeed: a collection keeps a change feed (feed.go), which every
	// write of a record must add to. A storh from before would write
	// without it, so turning a feed on raises the marker to this; a
	// store without feeds stays at its format.
	formatFeed = formatSchemas + 2
	// formatNumbered: on a store whose writers run at once (PostgreSQL),
	// a feed's changes are numbered by the backend at commit (feed.go),
	// and its counter holds the trim floor: a storh from before would
	// number from that floor again. Only such a store with a feed needs
	// it; a file's feeds stay at formatFeed.
	formatNumbered = formatSchemas + 3
	// formatFeedBlocks: a file's feed stores a commit's changes as one block
	// of ids, with no copy of the records they put, and the values that
	// later writes replace or delete beside it (feed.go), where a storh
	// from before reads a change each with its record. A file whose feed
	// records a change in this build is raised to it; the changes stored
	// before read on as they were.
	formatFeedBlocks = formatSchemas + 4
	// formatRuns: on a store whose writers run at once, a feed numbered by
	// its backend stores a commit's changes as a run of ids, with no copy
	// of the records they put, and the values that later writes replace
	// or delete beside it (feed.go), where a storh from before stores a
	// change each with its record, and would misread a run. A store whose
	// numbered feed records a change in this build is raised to it; the
	// changes stored before read on as they were.
	formatRuns    = formatSchemas + 5
	formatVersion = formatRuns
)

// appendFillPercent packs pages full: records arrive in ascending id order,
// so pages split at the end and a half-empty page would never fill again.
// bbolt resets FillPercent on every transaction, so it is set per handle.
const appendFillPercent = 1.0

// Kind is what a collection is: it is stored in the collection's metadata
// and checked on every open.
type Kind uint8

const (
	KindDocs  Kind = 1
	KindLog   Kind = 2
	KindQueue Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindDocs:
		return "docs"
	case KindLog:
		return "log"
	case KindQueue:
		return "queue"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// validateName checks a collection name.
func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", errs.ErrInvalidName)
	case len(name) > api.MaxNameLength:
		return fmt.Errorf("%w: %q... is %d bytes; the limit is %d", errs.ErrInvalidName, name[:32], len(name), api.MaxNameLength)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not valid UTF-8", errs.ErrInvalidName, name)
	}
	for i, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: %q has a non-printable character at byte %d", errs.ErrInvalidName, name, i)
		}
	}
	return nil
}

// Coll is one collection's buckets inside one transaction, with the counter
// changes that transaction has made but not yet written.
type Coll struct {
	Name     string
	Kind     Kind
	root     kv.Bucket
	meta     kv.Bucket
	remote   bool             // on a store over a network (see loadMeta)
	metaInts map[string]int64 // meta's integers, read at once on a remote store
	kindRead []byte           // the kind as loadMeta read it
	records  kv.Bucket
	inserter kv.Inserter // records, where the backend inserts for less
	// pipe is the transaction on a remote store whose reads are round
	// trips (kv.Pipeliner): reads of many records go as one (fetch.go).
	pipe     kv.Pipeliner
	writable bool
	// shared: the transaction holds the collection beside other writers
	// (kv.Locker; HoldRows or HoldMoving); anything else upgrades the hold
	// first (Tx.holdAlone). rowsChecked: rowsReady has decided.
	shared      bool
	rowsChecked bool
	// rows holds, beside other writers, the records this transaction read
	// with their rows locked, as it left them since (nil: absent).
	rows map[uuidv7.UUID][]byte

	idx       []*collIndex // loaded on first use in the transaction
	idxLoaded bool
	// schemaSet is the collection's schema (nil: none) once schemaRead:
	// read on the transaction's first put (Tx.schema).
	schemaSet  *Schema
	schemaRead bool
	mems       *ixMems // the DB's views of blocked indexes' journals; nil outside a DB
	// failed is the first damage a read of this collection met where the
	// read could not return an error (a damaged index block under a
	// cursor): the transaction fails with it (Tx.damage).
	failed error

	baseCount, baseBytes   int64
	baseRead               bool // the counters were read (on first use)
	slotCount, slotBytes   int64
	slotsRead              bool // the counter slots were added up (on first use)
	countDelta, bytesDelta int64

	key [16]byte // scratch for bbolt calls

	// wrote is set by the transaction's first record write here, with the
	// watchers' epoch then (see Tx.noteChange).
	wrote      bool
	watchEpoch uint64

	// last is an upper bound of the largest key in the records bucket as
	// this transaction sees it (deletes only lower the true maximum). Ids
	// beyond it are certainly new, so appends, by far the common write,
	// skip the lookup that tells an insert from a replace.
	last      uuidv7.UUID
	lastKnown bool
	empty     bool
	// Beside other writers on a remote store, the bound comes from the
	// DB's cache (bounds, by the records bucket's identity) instead of a
	// round trip: lower than the truth when other processes appended
	// since, which an insert of an id they took finds out (kv.ErrConflict;
	// the run after it reads the bound afresh, see Tx.forgetBounds).
	boundKey   kv.Identifier
	bounds     *sync.Map // uint64 → bound
	lastCached bool

	// A queue's jobs buckets, opened once per transaction, and its job
	// counters and next sequence as this transaction changed them: written
	// back once, by flush, instead of once per job.
	jobs     *jobs
	jobDelta [5]int64
	// slots are the counter slots (see slots.go) as read with the
	// metadata on a remote store; on a local one they are read when asked.
	// slotKey is the queue slot of this transaction's DB, whose tail names
	// its slots of every kind.
	slots    map[string][]byte
	slotKey  []byte
	jobSeq   int64 // -1 until read
	seqFresh bool  // beside other writers, jobSeq read with no key to lock: insert it
	jobArena []byte
	// oldPending: the store is before formatDue (opened read-only or as a
	// copy's destination), its queues' pending entries keyed by sequence
	// alone (see queue.go).
	oldPending bool
	// announced: this transaction announced that it makes jobs pending
	// (queue_notify.go).
	announced bool

	feed feedState // the change feed, found on first use (feed.go)

	// rule: the queue's stored rule, read on first use (queue_rule.go).
	rule              QueueRule
	hasRule, ruleRead bool
}

// bound is a cached upper bound of a records bucket's largest key.
type bound struct {
	last  uuidv7.UUID
	empty bool
}

// fail records damage found by a read that cannot return it.
func (c *Coll) fail(err error) {
	if c.failed == nil {
		c.failed = err
	}
}

func (c *Coll) beyondLast(id uuidv7.UUID) bool {
	if !c.lastKnown && c.shared && c.bounds != nil {
		if b, ok := c.bounds.Load(c.boundKey.ID()); ok {
			b := b.(bound)
			c.last, c.empty, c.lastKnown, c.lastCached = b.last, b.empty, true, true
		}
	}
	if !c.lastKnown {
		k, _ := c.records.Cursor().Last()
		c.empty = k == nil
		copy(c.last[:], k)
		c.lastKnown = true
	}
	return c.empty || id.Compare(c.last) > 0
}

// has reports whether the records bucket holds id.
func (c *Coll) has(id uuidv7.UUID) bool { return c.stored(id) != nil }

// stored reads the stored value of id, or nil.
func (c *Coll) stored(id uuidv7.UUID) []byte {
	c.key = id
	return c.records.Get(c.key[:])
}

// current returns the stored value of id that this transaction acts on.
// Beside other writers (HoldRows) the record's row is locked as it is
// read, and the value kept with the transaction: it stays as read until
// the commit, and a later write of id needs no round trip to learn it.
func (c *Coll) current(id uuidv7.UUID) []byte {
	if !c.shared {
		return c.stored(id)
	}
	if v, ok := c.rows[id]; ok {
		return v
	}
	return c.lockRow(id)
}

// lockRow reads id with its row locked, beside other writers, and keeps
// the value with the transaction (see current).
func (c *Coll) lockRow(id uuidv7.UUID) []byte {
	c.key = id
	v := c.records.(kv.RowLocker).LockKeys([][]byte{c.key[:]}, true)[0]
	if c.rows == nil {
		c.rows = make(map[uuidv7.UUID][]byte, 1)
	}
	c.rows[id] = v
	return v
}

// wroteRow keeps what the transaction wrote under id (nil: deleted), if
// it keeps that row (current).
func (c *Coll) wroteRow(id uuidv7.UUID, v []byte) {
	if _, ok := c.rows[id]; ok {
		c.rows[id] = v
	}
}

func (c *Coll) raiseLast(id uuidv7.UUID) {
	if c.empty || id.Compare(c.last) > 0 {
		c.last, c.empty = id, false
	}
}

// Count returns the number of records as seen by this transaction.
func (c *Coll) Count() int64 {
	c.readBase()
	c.readSlots()
	return c.baseCount + c.slotCount + c.countDelta
}

// Bytes returns the total size of stored values as seen by this transaction.
func (c *Coll) Bytes() int64 {
	c.readBase()
	c.readSlots()
	return c.baseBytes + c.slotBytes + c.bytesDelta
}

// readSlots adds up the record counter slots the first time they are
// needed (see slots.go).
func (c *Coll) readSlots() {
	if !c.slotsRead {
		sum, _ := collSlotSum(c.slotRows())
		c.slotCount, c.slotBytes = sum[0], sum[1]
		c.slotsRead = true
	}
}

// readBase reads the stored counters the first time they are needed: most
// transactions (a page, a point read) never ask, and on a backend over a
// network each read is a round trip.
func (c *Coll) readBase() {
	if !c.baseRead {
		c.baseCount = c.getMeta(keyCount)
		c.baseBytes = c.getMeta(keyBytes)
		c.baseRead = true
	}
}

func openColl(tx kv.Tx, name string) (*Coll, error) {
	return openCollIn(tx, tx.Bucket([]byte(name)), name, nil)
}

// openCollIn opens collection name from its top-level bucket root (nil:
// there is none). On a remote store, kinds (if not nil) maps the identity
// of collections' top-level buckets (kv.Identifier) to their kinds: a
// collection found there is opened without a round trip, and its
// metadata is read when first needed.
func openCollIn(tx kv.Tx, root kv.Bucket, name string, kinds *sync.Map) (*Coll, error) {
	if root == nil {
		return nil, nil
	}
	meta, recs := root.Bucket(bucketMeta), root.Bucket(bucketRecords)
	if meta == nil || recs == nil {
		return nil, fmt.Errorf("%w: collection %q lacks its %s bucket", errs.ErrCorrupt, name, missing(meta, recs))
	}
	c := &Coll{Name: name, root: root, meta: meta, records: recs, writable: tx.Writable(), jobSeq: -1}
	var kind []byte
	// A bucket of the file is local: asking its cursor would make one.
	if _, local := meta.(boltBucket); !local && isRemote(meta.Cursor()) {
		c.remote = true
		c.pipe, _ = tx.(kv.Pipeliner)
		// A kind is written when its collection is created and never
		// changes, and a bucket's identity is never given to another: a
		// kind seen once under an identity is the kind for good.
		var id uint64
		ider, identified := root.(kv.Identifier)
		if identified && kinds != nil {
			id = ider.ID()
			if k, ok := kinds.Load(id); ok {
				kind = []byte{byte(k.(Kind))}
			}
		}
		if kind == nil {
			c.loadMeta()
			kind = c.kindRead
			if identified && kinds != nil && len(kind) == 1 {
				kinds.Store(id, Kind(kind[0]))
			}
		}
	} else {
		kind = meta.Get(keyKind)
	}
	if len(kind) != 1 {
		return nil, fmt.Errorf("%w: collection %q has no valid kind", errs.ErrCorrupt, name)
	}
	c.Kind = Kind(kind[0])
	if tx.Writable() {
		recs.SetFillPercent(appendFillPercent)
		c.inserter, _ = recs.(kv.Inserter)
	}
	return c, nil
}

// loadMeta reads a remote collection's metadata bucket, a handful of
// small keys, in one round trip (a Get per key would cost one each): its
// kind, its integers (counters, the queue's sequence) and the queue's
// counter slots.
func (c *Coll) loadMeta() {
	if c.metaInts != nil {
		return
	}
	c.metaInts = make(map[string]int64, 8)
	cur := c.meta.Cursor()
	cur.(kv.ReadAhead).ReadAhead(32)
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		switch {
		case bytes.Equal(k, keyKind):
			c.kindRead = v
		case isSlot(k):
			if c.slots == nil {
				c.slots = map[string][]byte{}
			}
			c.slots[string(k)] = v
		case len(v) == 8:
			c.metaInts[string(k)] = int64(binary.BigEndian.Uint64(v))
		}
	}
}

func missing(meta, recs kv.Bucket) string {
	if meta == nil {
		return "metadata"
	}
	return "records"
}

func createColl(tx kv.Tx, name string, kind Kind) (*Coll, error) {
	root, err := tx.CreateBucket([]byte(name))
	if err != nil {
		return nil, mapStoreErr(err)
	}
	meta, err := root.CreateBucket(bucketMeta)
	if err != nil {
		return nil, mapStoreErr(err)
	}
	if _, err := root.CreateBucket(bucketRecords); err != nil {
		return nil, mapStoreErr(err)
	}
	if err := meta.Put(keyKind, []byte{byte(kind)}); err != nil {
		return nil, mapStoreErr(err)
	}
	if err := putInt(meta, keyCount, 0); err != nil {
		return nil, err
	}
	if err := putInt(meta, keyBytes, 0); err != nil {
		return nil, err
	}
	return openColl(tx, name)
}

// flush writes the counter changes of the transaction: beside other
// writers into the DB's slots, alone into the base counters (see
// slots.go).
func (c *Coll) flush() error {
	if err := c.flushFeed(); err != nil {
		return err
	}
	if c.shared {
		return c.flushSlots()
	}
	if err := c.foldSlots(); err != nil {
		return err
	}
	if err := c.flushIndexes(); err != nil {
		return err
	}
	if err := c.flushJobs(); err != nil {
		return err
	}
	if c.countDelta == 0 && c.bytesDelta == 0 {
		return nil
	}
	c.readBase()
	if err := c.putMeta(keyCount, c.baseCount+c.countDelta); err != nil {
		return err
	}
	if err := c.putMeta(keyBytes, c.baseBytes+c.bytesDelta); err != nil {
		return err
	}
	c.baseCount, c.baseBytes = c.baseCount+c.countDelta, c.baseBytes+c.bytesDelta
	c.countDelta, c.bytesDelta = 0, 0
	return nil
}

// isRemote reports whether a cursor's bucket is on a server that it
// reads from in pages, where a read costs a round trip.
func isRemote(c kv.Cursor) bool {
	_, ok := c.(kv.ReadAhead)
	return ok
}

// getMeta reads an integer of the collection's metadata (0 if absent).
func (c *Coll) getMeta(key []byte) int64 {
	if c.remote {
		c.loadMeta()
		return c.metaInts[string(key)]
	}
	return getInt(c.meta, key)
}

// putMeta writes an integer of the collection's metadata.
func (c *Coll) putMeta(key []byte, n int64) error {
	if c.remote {
		c.loadMeta()
		c.metaInts[string(key)] = n
	}
	return putInt(c.meta, key, n)
}

func getInt(b kv.Bucket, key []byte) int64 {
	v := b.Get(key)
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func putInt(b kv.Bucket, key []byte, n int64) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(n))
	return mapStoreErr(b.Put(key, v[:]))
}

// forEach calls fn for every key of b in order, nested buckets included
// (with a nil value), and stops at the first error.
func forEach(b kv.Bucket, fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}
