package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/query"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// A queue is a collection of kind KindQueue: its records bucket holds the
// jobs' payloads, checksummed like any record, and a jobs bucket beside it
// ("j") holds each job's state and the indexes that make every queue
// operation a seek:
//
//	j/s  id → state: format, state, attempts, sequence, lease end, last
//	          change, due time, claim token, last failure reason,
//	          CRC-32C of all that ‖ id
//	j/p  pending: due time (ms) ‖ sequence (8 bytes each, big-endian) → id
//	j/c  claimed: lease end (ms, 8 bytes) ‖ id
//	j/d  done:    completion time (ms) ‖ id
//	j/x  dead:    time of death (ms) ‖ id
//
// The sequence is given at enqueue and kept for the job's life, and so is
// the due time, when the job may first be claimed (the enqueue's time, or
// a later one: EnqueueAt), but for a failure with a backoff, which moves
// it later. Pending jobs leave in due order, ties in enqueue order: a
// claim is one seek to the first entry, and stops at the first entry not
// due yet. A job that comes back (released, failed, or its lease expired)
// goes back to its own place, ahead of every job due after it. Stores
// before formatDue keyed pending jobs by sequence alone; opening one for
// writing rewrites them (upgradeDue), and a store opened read-only before
// that is read in its old layout (Coll.oldPending). The state record is the truth; the indexes and the
// counters in the metadata bucket follow it in the same transaction, and
// Repair rebuilds them from it.
//
// On a store whose writers run at once (kv.Locker), the operations that
// move jobs one by one (claims, completions, failures, extensions,
// releases, taking back expired leases) hold the queue beside each other
// (HoldMoving) and lock the rows they move: a claim takes the first
// pending entries no one else holds (SKIP LOCKED), a completion waits for
// the job's state row. Enqueues hold it beside them too (HoldRows): they
// take their places in turn on the sequence's row (nextSeq). Their counter
// changes go to counter slots of their DB's own (slots.go), so counting
// does not make them take turns. Everything else holds the queue alone,
// as on bbolt, where no slot is ever written.
var (
	bucketJobs     = []byte("j")
	bucketJobState = []byte("s")
	bucketPending  = []byte("p")
	bucketClaimed  = []byte("c")
	bucketDone     = []byte("d")
	bucketDead     = []byte("x")

	keyJobSeq     = []byte("qseq")
	jobSlotPrefix = []byte("qs:")
	// counters, one per state
	keyJobCount = [...][]byte{api.JobPending: []byte("qn:p"), api.JobClaimed: []byte("qn:c"), api.JobDone: []byte("qn:d"), api.JobDead: []byte("qn:x")}
)

// Job is one job's state, and its payload when an operation returns it.
type Job struct {
	ID         uuidv7.UUID
	State      api.JobState
	Attempts   int    // claims not given back with Release
	Seq        uint64 // place in the enqueue order
	LeaseUntil int64  // ms; while claimed
	Changed    int64  // ms of the last change of state
	Due        int64  // ms; when the job may be claimed, kept while claimed
	Reason     string // the reason given by the last Fail, or "lease expired"
	Payload    []byte // the checked msgpack payload, owned by the caller
	// Claim is the token of the job's last claim: a random number drawn
	// by the claim, so a worker's call naming it acts only while that
	// claim holds, whatever the clock did meanwhile (0: never claimed).
	Claim uint64
}

const (
	// A job state of jobFormat1 (before formatDue) has no due time: its
	// job was due at once, and reads as due at 0, ahead of all others, as
	// its pending entry after upgradeDue.
	jobFormat1  = 1
	jobFixed1   = 30 // format, state, attempts(4), seq(8), lease(8), changed(8)
	jobFormat   = 2
	jobFixed    = 46 // jobFixed1's, due(8), claim token(8)
	jobCRC      = 4
	maxJobNotes = 1024 // a failure reason longer than this is cut
)

// scratch returns n bytes for a key or value of this transaction's job
// writes, cut from blocks shared by many jobs: bbolt keeps what it is given
// until the commit, so nothing cut is ever reused, but a batch of jobs
// costs a few allocations instead of several per job. Blocks double from
// a few hundred bytes, what a move of one job takes, so that a claim or a
// completion of one job, each a transaction of its own, does not allocate
// and clear a block sized for a batch.
func (c *Coll) scratch(n int) []byte {
	const first, block = 512, 64 << 10
	if n > block/4 {
		return make([]byte, n)
	}
	if cap(c.jobArena)-len(c.jobArena) < n {
		c.jobArena = make([]byte, 0, min(block, max(first, 2*cap(c.jobArena), n)))
	}
	start := len(c.jobArena)
	c.jobArena = c.jobArena[:start+n]
	return c.jobArena[start : start+n : start+n]
}

// jobNote is reason as a job keeps it: valid UTF-8, each byte that is not
// part of a character replaced by U+FFFD, cut on a character boundary to at
// most maxJobNotes bytes. A reason is often an error's text, which may
// quote bytes from anywhere (a file name, a peer's reply); refusing it
// would fail the Fail and leave the job claimed until its lease ends, so
// it is repaired instead, and a reader always gets text.
func jobNote(reason string) string {
	if len(reason) <= maxJobNotes && utf8.ValidString(reason) {
		return reason
	}
	b := make([]byte, 0, min(len(reason), maxJobNotes))
	// Ranging over a string yields utf8.RuneError for each byte that does
	// not start a valid character.
	for _, r := range reason {
		if len(b)+utf8.RuneLen(r) > maxJobNotes {
			break
		}
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}

// appendJob appends the stored form of j to dst.
func appendJob(dst []byte, j Job) []byte {
	reason := jobNote(j.Reason)
	start := len(dst)
	dst = append(dst, jobFormat, byte(j.State))
	dst = binary.BigEndian.AppendUint32(dst, uint32(j.Attempts))
	dst = binary.BigEndian.AppendUint64(dst, j.Seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(j.LeaseUntil))
	dst = binary.BigEndian.AppendUint64(dst, uint64(j.Changed))
	dst = binary.BigEndian.AppendUint64(dst, uint64(j.Due))
	dst = binary.BigEndian.AppendUint64(dst, j.Claim)
	dst = append(dst, reason...)
	body := dst[start:]
	return binary.BigEndian.AppendUint32(dst, crc32.Update(crc32.Checksum(body, castagnoli), castagnoli, j.ID[:]))
}

// jobSize is the stored size of j, but for a reason that jobNote repairs,
// which may grow: appendJob then grows its buffer.
func jobSize(j Job) int { return jobFixed + min(len(j.Reason), maxJobNotes) + jobCRC }

func decodeJob(id uuidv7.UUID, b []byte) (Job, error) {
	fixed := jobFixed
	if len(b) > 0 && b[0] == jobFormat1 {
		fixed = jobFixed1
	}
	if len(b) < fixed+jobCRC || (b[0] != jobFormat && b[0] != jobFormat1) {
		return Job{}, fmt.Errorf("%w: job %s: state of %d bytes is not a job state", errs.ErrCorrupt, id, len(b))
	}
	body := b[:len(b)-jobCRC]
	if crc32.Update(crc32.Checksum(body, castagnoli), castagnoli, id[:]) != binary.BigEndian.Uint32(b[len(body):]) {
		return Job{}, fmt.Errorf("%w: job %s: state checksum mismatch", errs.ErrCorrupt, id)
	}
	j := Job{
		ID:         id,
		State:      api.JobState(b[1]),
		Attempts:   int(binary.BigEndian.Uint32(b[2:])),
		Seq:        binary.BigEndian.Uint64(b[6:]),
		LeaseUntil: int64(binary.BigEndian.Uint64(b[14:])),
		Changed:    int64(binary.BigEndian.Uint64(b[22:])),
		Reason:     string(body[fixed:]),
	}
	if fixed == jobFixed {
		j.Due = int64(binary.BigEndian.Uint64(b[30:]))
		j.Claim = binary.BigEndian.Uint64(b[38:])
	}
	if j.State < api.JobPending || j.State > api.JobDead {
		return Job{}, fmt.Errorf("%w: job %s: unknown state %d", errs.ErrCorrupt, id, j.State)
	}
	return j, nil
}

// jobs is a queue's jobs bucket and its sub-buckets in one transaction.
type jobs struct {
	root, state, pending, claimed, done, dead kv.Bucket
	// old: the pending entries are keyed by sequence alone (a store
	// before formatDue, opened read-only).
	old bool
	// key holds the id of a lookup: a slice of a parameter passed to an
	// interface method escapes, which would cost an allocation per call.
	key [16]byte
}

// stateOf returns the stored state of id, or nil.
func (j *jobs) stateOf(id uuidv7.UUID) []byte {
	j.key = id
	return j.state.Get(j.key[:])
}

// jobBuckets opens the jobs buckets of queue c; with create (in a write
// transaction) it makes the ones missing. Without, a queue nothing was ever
// enqueued to has none: nil, nil.
func (c *Coll) jobBuckets(create bool) (*jobs, error) {
	if c.Kind != KindQueue {
		return nil, fmt.Errorf("%w: %q is a %s, not a queue", errs.ErrWrongKind, c.Name, c.Kind)
	}
	if c.jobs != nil {
		return c.jobs, nil
	}
	root := c.root.Bucket(bucketJobs)
	if root == nil {
		if !create {
			return nil, nil
		}
		var err error
		if root, err = c.root.CreateBucket(bucketJobs); err != nil {
			return nil, mapStoreErr(err)
		}
	}
	j := &jobs{root: root, old: c.oldPending}
	for _, sub := range []struct {
		b    *kv.Bucket
		name []byte
	}{{&j.state, bucketJobState}, {&j.pending, bucketPending}, {&j.claimed, bucketClaimed}, {&j.done, bucketDone}, {&j.dead, bucketDead}} {
		*sub.b = root.Bucket(sub.name)
		if *sub.b == nil {
			if !create {
				return nil, fmt.Errorf("%w: queue %q lacks its %q jobs bucket", errs.ErrCorrupt, c.Name, sub.name)
			}
			var err error
			if *sub.b, err = root.CreateBucket(sub.name); err != nil {
				return nil, mapStoreErr(err)
			}
		}
	}
	// Every jobs bucket is keyed in arrival order (ids, sequences, times
	// that move forward): pack them full like records. The claimed and
	// done keys of jobs with different leases or out-of-order completions
	// land between others, which splits a full page once; what arrives in
	// order, by far the most, fills pages instead of leaving them half empty.
	for _, b := range []kv.Bucket{j.state, j.pending, j.claimed, j.done, j.dead} {
		b.SetFillPercent(appendFillPercent)
	}
	c.jobs = j
	return j, nil
}

// flushJobs writes back the job counters and sequence this transaction
// changed, holding the queue alone (beside other writers, flushSlots
// does).
func (c *Coll) flushJobs() error {
	for s := api.JobPending; s <= api.JobDead; s++ {
		if d := c.jobDelta[s]; d != 0 {
			if err := c.putMeta(keyJobCount[s], c.getMeta(keyJobCount[s])+d); err != nil {
				return err
			}
			c.jobDelta[s] = 0
		}
	}
	if c.jobSeq >= 0 {
		if err := c.putMeta(keyJobSeq, c.jobSeq); err != nil {
			return err
		}
		c.jobSeq = -1
	}
	return nil
}

// jobSlotSize is a counter slot's value: a delta per state.
const jobSlotSize = 32

// addSlot adds a counter slot's deltas to sum; a slot of another size
// (damage, which Verify reports) adds nothing.
func addSlot(sum *[5]int64, v []byte) {
	if len(v) != jobSlotSize {
		return
	}
	for s := api.JobPending; s <= api.JobDead; s++ {
		sum[s] += int64(binary.BigEndian.Uint64(v[(s-1)*8:]))
	}
}

// slotSum adds up a queue's counter slots among rows, and lists those of
// the wrong size.
func slotSum(rows map[string][]byte) (sum [5]int64, bad []string) {
	for _, k := range sortedKeys(rows) {
		if !strings.HasPrefix(k, string(jobSlotPrefix)) {
			continue
		}
		if len(rows[k]) != jobSlotSize {
			bad = append(bad, k)
		}
		addSlot(&sum, rows[k])
	}
	return sum, bad
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// nextSeq hands out the next place in the enqueue order. Beside other
// writers the sequence is read with its row locked: enqueuers in other
// processes take their places in turn, and claimers need not wait for
// them. Before the first enqueue there is no row to lock: flushSlots
// inserts it, and of two first enqueuers one fails (kv.ErrConflict) and
// runs again.
func (c *Coll) nextSeq() uint64 {
	if c.jobSeq < 0 && c.shared {
		v := c.meta.(kv.RowLocker).LockKeys([][]byte{keyJobSeq}, true)[0]
		c.jobSeq, c.seqFresh = 0, v == nil
		if len(v) == 8 {
			c.jobSeq = int64(binary.BigEndian.Uint64(v))
		}
	}
	if c.jobSeq < 0 {
		c.jobSeq = c.getMeta(keyJobSeq)
	}
	c.jobSeq++
	return uint64(c.jobSeq - 1)
}

// firstPending returns up to n pending jobs' ids due by now, in due
// order, on a store with one writer at a time.
func (j *jobs) firstPending(c *Coll, now int64, n int) ([]uuidv7.UUID, error) {
	var ids []uuidv7.UUID
	cur := j.pending.Cursor()
	for k, v := cur.First(); k != nil && len(ids) < n && pendingDue(k) <= now; k, v = cur.Next() {
		id, err := pendingID(c, k, v)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// pendingDue is the due time of pending entry key k: 0 for a key of the
// layout before formatDue (a sequence alone), whose jobs were due at once.
func pendingDue(k []byte) int64 {
	if len(k) != 16 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(k))
}

// dueBound is the pending key bound before which every entry is due by
// now.
func dueBound(now int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(now)+1) }

// pendingID returns the job id of pending entry k, v.
func pendingID(c *Coll, k, v []byte) (uuidv7.UUID, error) {
	if len(v) != 16 {
		return uuidv7.UUID{}, fmt.Errorf("%w: queue %q: pending entry %x holds %d bytes, not a job id", errs.ErrCorrupt, c.Name, k, len(v))
	}
	return uuidv7.UUID(v), nil
}

// claimable returns, beside other writers, up to n pending jobs' ids, in
// enqueue order, the first ones no other claimer holds, with their states
// and stored payloads, after taking back the claims whose lease ended by
// now. Entries and states are locked (a pending job's state is held at
// most for a moment, by a worker's late call that finds it no longer
// claimed); the payloads are read without a lock, as their jobs' rows are
// held. All that is read in the same round trip as the first expired
// claims, as if none had expired, which is by far the most common case:
// when some had, the jobs taken back go to their places, maybe ahead of
// those read, and the pending entries are read again. Those first read
// but not read again stay locked, with their states, until the
// transaction ends; other claimers pass them by meanwhile.
func (t *Tx) claimable(c *Coll, j *jobs, now int64, n int, rule QueueRule) (ids []uuidv7.UUID, states, payloads [][]byte, err error) {
	expired := j.expiredFrom(nil, now)
	pending := &kv.Read{Bucket: j.pending, Op: kv.LockRange, To: dueBound(now), N: n,
		Follow: []kv.Follow{{Bucket: j.state, Lock: true}, {Bucket: c.records}}}
	kv.Pipeline(t.ktx, expired, pending)
	if len(expired.Found) > 0 {
		if _, err := t.requeueShared(c, j, now, rule, expired); err != nil {
			return nil, nil, nil, err
		}
		kv.Pipeline(t.ktx, pending)
	}
	if err := t.failure(); err != nil {
		return nil, nil, nil, err
	}
	ids = make([]uuidv7.UUID, len(pending.Found))
	for i, k := range pending.Found {
		if ids[i], err = pendingID(c, k, pending.Values[i]); err != nil {
			return nil, nil, nil, err
		}
	}
	return ids, pending.Followed[0], pending.Followed[1], nil
}

// decodeJobs decodes the states of ids as read (nil: missing).
func decodeJobs(ids []uuidv7.UUID, states [][]byte) ([]Job, error) {
	out := make([]Job, len(ids))
	for i, v := range states {
		if v == nil {
			return nil, fmt.Errorf("%w: no job %s", errs.ErrNotFound, ids[i])
		}
		job, err := decodeJob(ids[i], v)
		if err != nil {
			return nil, err
		}
		out[i] = job
	}
	return out, nil
}

// loadMany loads the states of ids, on a store with one writer at a time.
func (j *jobs) loadMany(ids []uuidv7.UUID) ([]Job, error) {
	states := make([][]byte, len(ids))
	for i, id := range ids {
		states[i] = j.stateOf(id)
	}
	return decodeJobs(ids, states)
}

func (j *jobs) load(id uuidv7.UUID) (Job, error) {
	v := j.stateOf(id)
	if v == nil {
		return Job{}, fmt.Errorf("%w: no job %s", errs.ErrNotFound, id)
	}
	return decodeJob(id, v)
}

// index returns the index of the job's state and its key there.
func (j *jobs) index(job Job) (kv.Bucket, []byte) { return j.indexIn(job, make([]byte, 24)) }

// indexIn is index with the key written into buf (24 bytes).
func (j *jobs) indexIn(job Job, buf []byte) (kv.Bucket, []byte) {
	switch job.State {
	case api.JobPending:
		if j.old {
			binary.BigEndian.PutUint64(buf, job.Seq)
			return j.pending, buf[:8]
		}
		binary.BigEndian.PutUint64(buf, uint64(job.Due))
		binary.BigEndian.PutUint64(buf[8:], job.Seq)
		return j.pending, buf[:16]
	case api.JobClaimed:
		return j.claimed, putTimeKey(buf, job.LeaseUntil, job.ID)
	case api.JobDone:
		return j.done, putTimeKey(buf, job.Changed, job.ID)
	default:
		return j.dead, putTimeKey(buf, job.Changed, job.ID)
	}
}

func putTimeKey(buf []byte, ms int64, id uuidv7.UUID) []byte {
	binary.BigEndian.PutUint64(buf, uint64(ms))
	copy(buf[8:24], id[:])
	return buf[:24]
}

// move stores job in its new state: out of the old state's index, into the
// new one's, counters moved. old is the state as stored (zero for a new
// job).
func (t *Tx) move(c *Coll, j *jobs, old, job Job) error {
	if old.State != 0 {
		b, k := j.index(old)
		if err := b.Delete(k); err != nil {
			return mapStoreErr(err)
		}
		c.jobDelta[old.State]--
	}
	b, k := j.indexIn(job, c.scratch(24))
	v := []byte(nil)
	if job.State == api.JobPending {
		v = append(c.scratch(16)[:0], job.ID[:]...)
	}
	if err := b.Put(k, v); err != nil {
		return mapStoreErr(err)
	}
	c.jobDelta[job.State]++
	if job.State == api.JobPending {
		t.wake(c)
		if old.State != api.JobPending {
			t.announcePending(c)
		}
	}
	key := append(c.scratch(16)[:0], job.ID[:]...)
	return mapStoreErr(j.state.Put(key, appendJob(c.scratch(jobSize(job))[:0], job)))
}

// Enqueue adds a pending job under id with value (from AppendValue) as its
// payload, due at due (ms; now for a job to run at once), at the end of the
// enqueue order. An id already in the queue, in any state, fails with
// ErrExists and nothing changes.
func (t *Tx) Enqueue(c *Coll, id uuidv7.UUID, value []byte, now, due int64) error {
	j, err := c.jobBuckets(true)
	if err != nil {
		return err
	}
	// A job's state and payload share its id: an id past the largest
	// payload key is new, and needs no lookup.
	if !c.beyondLast(id) && (c.has(id) || j.stateOf(id) != nil) {
		return fmt.Errorf("%w: a job with this id is in the queue", errs.ErrExists)
	}
	if err := t.Put(c, id, value, true); err != nil {
		return err
	}
	return t.move(c, j, Job{}, Job{ID: id, State: api.JobPending, Seq: c.nextSeq(), Changed: now, Due: max(0, due)})
}

// Claim leases up to n of the pending jobs due by now, the first due
// first (ties in enqueue order), until
// now+lease, after returning to pending (or dead) the claims whose lease
// ended by now. It returns the claimed jobs with their payloads; none
// pending is ErrEmpty.
func (t *Tx) Claim(c *Coll, now, lease int64, n int, rule QueueRule) ([]Job, error) {
	j, err := c.jobBuckets(false)
	if err != nil {
		return nil, err
	}
	if j == nil {
		return nil, errs.ErrEmpty // nothing was ever enqueued
	}
	var (
		ids      []uuidv7.UUID
		olds     []Job
		payloads [][]byte // beside other writers; else read as needed
	)
	if c.shared {
		var states [][]byte
		if ids, states, payloads, err = t.claimable(c, j, now, n, rule); err == nil {
			olds, err = decodeJobs(ids, states)
		}
	} else if _, err = t.requeueExpired(c, j, now, rule); err == nil {
		if ids, err = j.firstPending(c, now, n); err == nil {
			olds, err = j.loadMany(ids)
		}
	}
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, errs.ErrEmpty
	}
	out := make([]Job, 0, len(ids))
	for i, id := range ids {
		old := olds[i]
		if old.State != api.JobPending {
			return nil, fmt.Errorf("%w: queue %q: job %s is in the pending index but %s", errs.ErrCorrupt, c.Name, id, old.State)
		}
		job := old
		var stored []byte
		if c.shared {
			stored = payloads[i]
		} else {
			stored = c.stored(id)
		}
		payload, err := t.get(c, id, stored)
		if errors.Is(err, errs.ErrCorrupt) || errors.Is(err, errs.ErrNotFound) {
			// A job no worker can read would stop the queue at its
			// place forever: it goes to the dead letters, saying why.
			job.State, job.Changed, job.Reason = api.JobDead, now, "payload unreadable: "+err.Error()
			if err := t.move(c, j, old, job); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
		job.State, job.Attempts, job.LeaseUntil, job.Changed = api.JobClaimed, old.Attempts+1, now+lease, now
		job.Claim = claimToken(old.Claim)
		if err := t.move(c, j, old, job); err != nil {
			return nil, err
		}
		job.Payload = bytes.Clone(payload)
		out = append(out, job)
	}
	if len(out) == 0 {
		return nil, errs.ErrEmpty
	}
	return out, nil
}

// RequeueExpired returns to pending every claim whose lease ended by now,
// or to dead when it has used the queue's max attempts, and says how many.
func (t *Tx) RequeueExpired(c *Coll, now int64, rule QueueRule) (int, error) {
	j, err := c.jobBuckets(false)
	if err != nil || j == nil {
		return 0, err
	}
	return t.requeueExpired(c, j, now, rule)
}

func (t *Tx) requeueExpired(c *Coll, j *jobs, now int64, rule QueueRule) (int, error) {
	if c.shared {
		return t.requeueExpiredShared(c, j, now, rule)
	}
	var ids []uuidv7.UUID
	cur := j.claimed.Cursor()
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		if len(k) != 24 {
			return 0, fmt.Errorf("%w: queue %q: claimed entry %x is not a lease key", errs.ErrCorrupt, c.Name, k)
		}
		if int64(binary.BigEndian.Uint64(k)) > now {
			break
		}
		ids = append(ids, uuidv7.UUID(k[8:]))
	}
	for _, id := range ids {
		old, err := j.load(id)
		if err != nil {
			return 0, err
		}
		if err := t.expire(c, j, old, now, rule); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// requeueChunk bounds the expired claims a shared holder takes back per
// round trip.
const requeueChunk = 256

// expiredFrom is the read, beside other writers, of the next chunk of
// claims whose lease ended by now, from lease key from on (nil: the
// first): it locks their lease entries.
func (j *jobs) expiredFrom(from []byte, now int64) *kv.Read {
	bound := binary.BigEndian.AppendUint64(nil, uint64(now)+1)
	return &kv.Read{Bucket: j.claimed, Op: kv.LockRange, From: from, To: bound, N: requeueChunk}
}

// requeueExpiredShared is requeueExpired beside other writers.
func (t *Tx) requeueExpiredShared(c *Coll, j *jobs, now int64, rule QueueRule) (int, error) {
	chunk := j.expiredFrom(nil, now)
	kv.Pipeline(t.ktx, chunk)
	return t.requeueShared(c, j, now, rule, chunk)
}

// requeueShared takes back, beside other writers, the expired claims of
// chunk (read by expiredFrom) and of the chunks after it whose lease
// entry and state no one else holds (a worker completing one holds its
// state; another claimer taking them back holds the entry), and leaves
// the rest to them.
func (t *Tx) requeueShared(c *Coll, j *jobs, now int64, rule QueueRule, chunk *kv.Read) (int, error) {
	n := 0
	for {
		keys := chunk.Found
		ids := make([][]byte, len(keys))
		for i, k := range keys {
			if len(k) != 24 {
				return n, fmt.Errorf("%w: queue %q: claimed entry %x is not a lease key", errs.ErrCorrupt, c.Name, k)
			}
			ids[i] = k[8:]
		}
		states := j.state.(kv.RowLocker).LockKeys(ids, false)
		for i, v := range states {
			if v == nil {
				continue // held by its worker, or by another claimer
			}
			old, err := decodeJob(uuidv7.UUID(ids[i]), v)
			if err != nil {
				return n, err
			}
			if old.State != api.JobClaimed || old.LeaseUntil != int64(binary.BigEndian.Uint64(keys[i])) {
				return n, fmt.Errorf("%w: queue %q: job %s is in the claimed index under lease %d, but %s with lease %d",
					errs.ErrCorrupt, c.Name, old.ID, int64(binary.BigEndian.Uint64(keys[i])), old.State, old.LeaseUntil)
			}
			if err := t.expire(c, j, old, now, rule); err != nil {
				return n, err
			}
			n++
		}
		if len(keys) < requeueChunk {
			return n, t.ktx.Err()
		}
		chunk = j.expiredFrom(append(bytes.Clone(keys[len(keys)-1]), 0), now)
		kv.Pipeline(t.ktx, chunk)
	}
}

// expire takes back job old, whose lease ended: to pending, or to dead
// once it has used the queue's max attempts (its stored rule, else rule).
// An expired lease is not backed off: the job has waited its lease
// already, and goes back to its place.
func (t *Tx) expire(c *Coll, j *jobs, old Job, now int64, rule QueueRule) error {
	job := old
	job.Changed, job.LeaseUntil, job.Reason = now, 0, "lease expired"
	job.State = api.JobPending
	r, err := t.queueRule(c, rule)
	if err != nil {
		return err
	}
	if job.Attempts >= r.MaxAttempts {
		job.State = api.JobDead
	}
	return t.move(c, j, old, job)
}

// claimToken draws a claim's token: random, never 0 (no token), never
// the claim before's.
func claimToken(before uint64) uint64 {
	for {
		if v := rand.Uint64(); v != 0 && v != before {
			return v
		}
	}
}

// claimed loads job id and checks that it is claimed; with a token (not
// 0), by the claim that drew it.
func (t *Tx) claimed(c *Coll, id uuidv7.UUID, token uint64) (*jobs, Job, error) {
	j, err := c.jobBuckets(false)
	if err != nil {
		return nil, Job{}, err
	}
	if j == nil {
		return nil, Job{}, fmt.Errorf("%w: no job %s", errs.ErrNotFound, id)
	}
	var job Job
	if c.shared {
		// Wait for whoever holds the job (a claimer taking back its lease,
		// another worker's call for it) and read its state as they left it.
		v := j.state.(kv.RowLocker).LockKeys([][]byte{id[:]}, true)[0]
		switch {
		case t.ktx.Err() != nil:
			return nil, Job{}, t.ktx.Err()
		case v == nil:
			return nil, Job{}, fmt.Errorf("%w: no job %s", errs.ErrNotFound, id)
		}
		job, err = decodeJob(id, v)
	} else {
		job, err = j.load(id)
	}
	if err != nil {
		return nil, Job{}, err
	}
	if job.State != api.JobClaimed {
		return nil, Job{}, fmt.Errorf("%w: job %s is %s", errs.ErrNotClaimed, id, job.State)
	}
	if token != 0 && job.Claim != token {
		return nil, Job{}, fmt.Errorf("%w: job %s is claimed again since this claim (its lease ended and another claim took it)", errs.ErrNotClaimed, id)
	}
	return j, job, nil
}

// Complete marks a claimed job done; with a token (not 0), only while the
// claim that drew it holds. A claim whose lease ended but that no claim
// has taken back yet still completes.
func (t *Tx) Complete(c *Coll, id uuidv7.UUID, token uint64, now int64) error {
	j, old, err := t.claimed(c, id, token)
	if err != nil {
		return err
	}
	job := old
	job.State, job.LeaseUntil, job.Changed = api.JobDone, 0, now
	return t.move(c, j, old, job)
}

// CompleteMany marks done the claimed jobs among ids and says how many;
// an id not in the queue, or not claimed, is passed by. Beside other
// writers it locks the states of all of them in one round trip, in key
// order, where completing them one by one took a trip each, in the
// caller's order, which let two overlapping batches deadlock.
func (t *Tx) CompleteMany(c *Coll, ids []uuidv7.UUID, now int64) (int, error) {
	j, err := c.jobBuckets(false)
	if err != nil || j == nil {
		return 0, err
	}
	var states [][]byte // beside other writers; else read as needed
	if c.shared {
		keys := make([][]byte, len(ids))
		for i := range ids {
			keys[i] = ids[i][:]
		}
		states = j.state.(kv.RowLocker).LockKeys(keys, true)
		if err := t.ktx.Err(); err != nil {
			return 0, err
		}
	}
	completed := make(map[uuidv7.UUID]bool, len(ids))
	for i, id := range ids {
		if completed[id] {
			continue // listed twice: done now
		}
		var v []byte
		if c.shared {
			v = states[i]
		} else {
			v = j.stateOf(id)
		}
		if v == nil {
			continue
		}
		old, err := decodeJob(id, v)
		if err != nil {
			return 0, err
		}
		if old.State != api.JobClaimed {
			continue
		}
		job := old
		job.State, job.LeaseUntil, job.Changed = api.JobDone, 0, now
		if err := t.move(c, j, old, job); err != nil {
			return 0, err
		}
		completed[id] = true
	}
	return len(completed), nil
}

// Fail ends a claim in failure: the job goes back to pending, or to dead
// once it has used the queue's max attempts. The queue's stored rule
// (else rule) decides, read here, in the Fail's transaction, so that
// another process's SetQueueOptions applies from its commit on. With a
// backoff the pending job is due after it (BackoffDelay), by now; without,
// it goes back to its place. It reports whether it died. A token (not 0)
// limits it to the claim that drew it.
func (t *Tx) Fail(c *Coll, id uuidv7.UUID, token uint64, reason string, now int64, rule QueueRule) (bool, error) {
	j, old, err := t.claimed(c, id, token)
	if err != nil {
		return false, err
	}
	job := old
	job.State, job.LeaseUntil, job.Changed, job.Reason = api.JobPending, 0, now, reason
	r, err := t.queueRule(c, rule)
	if err != nil {
		return false, err
	}
	if job.Attempts >= r.MaxAttempts {
		job.State = api.JobDead
	} else if r.BackoffMin > 0 {
		job.Due = now + BackoffDelay(r, job.Attempts, rand.Float64())
	}
	return job.State == api.JobDead, t.move(c, j, old, job)
}

// Extend moves a claimed job's lease end to now+lease and returns it. A
// token (not 0) limits it to the claim that drew it.
func (t *Tx) Extend(c *Coll, id uuidv7.UUID, token uint64, now, lease int64) (int64, error) {
	j, old, err := t.claimed(c, id, token)
	if err != nil {
		return 0, err
	}
	job := old
	job.LeaseUntil = now + lease // Changed stays: the state did not change
	// Waiters time the earliest lease end again: it may be sooner now.
	t.wake(c)
	return job.LeaseUntil, t.move(c, j, old, job)
}

// Release gives a claim back: the job is pending again, at its place, and
// the claim does not count as an attempt.
func (t *Tx) Release(c *Coll, id uuidv7.UUID, now int64) error {
	j, old, err := t.claimed(c, id, 0)
	if err != nil {
		return err
	}
	job := old
	job.State, job.LeaseUntil, job.Changed = api.JobPending, 0, now
	job.Attempts = max(0, old.Attempts-1)
	return t.move(c, j, old, job)
}

// Retry puts a dead job back to pending, at its place, with its attempts
// reset.
func (t *Tx) Retry(c *Coll, id uuidv7.UUID, now int64) error {
	j, err := c.jobBuckets(false)
	if err != nil {
		return err
	}
	if j == nil {
		return fmt.Errorf("%w: no job %s", errs.ErrNotFound, id)
	}
	old, err := j.load(id)
	if err != nil {
		return err
	}
	if old.State != api.JobDead {
		return fmt.Errorf("%w: job %s is %s; only a dead job is retried", errs.ErrNotDead, id, old.State)
	}
	job := old
	job.State, job.Attempts, job.Changed = api.JobPending, 0, now
	return t.move(c, j, old, job)
}

// Cancel deletes job id, payload included, unless a worker holds it: a
// pending, done or dead job goes, and so does a claimed one whose lease
// ended by now, which the next claim would take back anyway. A claim that
// holds fails with ErrClaimed and nothing changes: its worker may be
// halfway through the job, and only it can end the claim.
func (t *Tx) Cancel(c *Coll, id uuidv7.UUID, now int64) error {
	j, err := c.jobBuckets(false)
	if err != nil {
		return err
	}
	if j == nil {
		return fmt.Errorf("%w: no job %s", errs.ErrNotFound, id)
	}
	job, err := j.load(id)
	if err != nil {
		return err
	}
	if job.State == api.JobClaimed && job.LeaseUntil > now {
		return fmt.Errorf("%w: job %s is leased to a worker for %d ms more; let it complete or fail the job, or Release it, then cancel",
			errs.ErrClaimed, id, job.LeaseUntil-now)
	}
	index, key := j.index(job)
	return t.dropJob(c, j, index, key, id, job.State)
}

// dropJob deletes job id, in state and under key in that state's index,
// with its payload.
func (t *Tx) dropJob(c *Coll, j *jobs, index kv.Bucket, key []byte, id uuidv7.UUID, state api.JobState) error {
	if err := index.Delete(key); err != nil {
		return mapStoreErr(err)
	}
	if err := j.state.Delete(id[:]); err != nil {
		return mapStoreErr(err)
	}
	if _, err := t.Delete(c, id); err != nil {
		return err
	}
	c.jobDelta[state]--
	return nil
}

// LookupJob returns job id's state, with its payload (owned by the caller).
func (t *Tx) LookupJob(c *Coll, id uuidv7.UUID) (Job, error) {
	j, err := c.jobBuckets(false)
	if err != nil {
		return Job{}, err
	}
	if j == nil {
		return Job{}, fmt.Errorf("%w: no job %s", errs.ErrNotFound, id)
	}
	job, err := j.load(id)
	if err != nil {
		return Job{}, err
	}
	payload, err := t.Get(c, id)
	if err != nil {
		return Job{}, fmt.Errorf("job %s: %w", id, err)
	}
	job.Payload = bytes.Clone(payload)
	return job, nil
}

// PurgeDone deletes up to max jobs completed before the time before (ms),
// oldest first, payloads included; more reports that others remain.
func (t *Tx) PurgeDone(c *Coll, before int64, max int) (n int, more bool, err error) {
	return t.purge(c, api.JobDone, before, max)
}

// PurgeDead is PurgeDone for the dead jobs, by the time they died.
func (t *Tx) PurgeDead(c *Coll, before int64, max int) (n int, more bool, err error) {
	return t.purge(c, api.JobDead, before, max)
}

func (t *Tx) purge(c *Coll, state api.JobState, before int64, max int) (n int, more bool, err error) {
	j, err := c.jobBuckets(false)
	if err != nil || j == nil {
		return 0, false, err
	}
	index, _ := j.index(Job{State: state})
	var keys [][]byte
	cur := index.Cursor()
	k, _ := cur.First()
	for ; k != nil && len(keys) < max; k, _ = cur.Next() {
		if len(k) != 24 {
			return 0, false, fmt.Errorf("%w: queue %q: %s entry %x is not a time key", errs.ErrCorrupt, c.Name, state, k)
		}
		if int64(binary.BigEndian.Uint64(k)) >= before {
			break
		}
		keys = append(keys, bytes.Clone(k))
	}
	more = k != nil && len(k) == 24 && int64(binary.BigEndian.Uint64(k)) < before
	for _, key := range keys {
		if err := t.dropJob(c, j, index, key, uuidv7.UUID(key[8:]), state); err != nil {
			return 0, false, err
		}
	}
	return len(keys), more, nil
}

// JobCounts returns the number of jobs in each state (index by JobState).
func (t *Tx) JobCounts(c *Coll) [5]int64 {
	n, _ := slotSum(c.slotRows())
	for s := api.JobPending; s <= api.JobDead; s++ {
		n[s] += c.getMeta(keyJobCount[s]) + c.jobDelta[s]
	}
	return n
}

// Scheduled returns the number of pending jobs not due by now. It walks
// the pending index back from its last entry, which is due last, and stops
// at the first due one: it costs a step per scheduled job, not per job of
// the queue, and nothing when none is scheduled. A counter could not do
// it: a job becomes due with no write to count it down.
func (t *Tx) Scheduled(c *Coll, now int64) int64 {
	j, err := c.jobBuckets(false)
	if err != nil || j == nil {
		return 0
	}
	var n int64
	cur := j.pending.Cursor()
	for k, _ := cur.Last(); k != nil && pendingDue(k) > now; k, _ = cur.Prev() {
		n++
	}
	return n
}

// NextDue returns the earliest due time among pending jobs (ms): the first
// pending entry's.
func (t *Tx) NextDue(c *Coll) (int64, bool) {
	j, err := c.jobBuckets(false)
	if err != nil || j == nil {
		return 0, false
	}
	k, _ := j.pending.Cursor().First()
	if k == nil {
		return 0, false
	}
	return pendingDue(k), true
}

// NextLeaseEnd returns the earliest lease end among claimed jobs (ms).
func (t *Tx) NextLeaseEnd(c *Coll) (int64, bool) {
	j, err := c.jobBuckets(false)
	if err != nil || j == nil {
		return 0, false
	}
	k, _ := j.claimed.Cursor().First()
	if len(k) != 24 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k)), true
}

// JobsIn calls fn for the jobs in state, in that state's index order
// (pending: enqueue order; claimed: lease end; done and dead: time), from
// the position after, up to max of them, without payloads. It returns the
// index key to resume after.
func (t *Tx) JobsIn(c *Coll, state api.JobState, after []byte, max int, fn func(Job)) ([]byte, error) {
	if state < api.JobPending || state > api.JobDead {
		return nil, fmt.Errorf("%w: no job state %d", query.ErrInvalidQuery, state)
	}
	j, err := c.jobBuckets(false)
	if err != nil || j == nil {
		return nil, err
	}
	b, _ := j.index(Job{State: state})
	cur := b.Cursor()
	var k, v []byte
	if after == nil {
		k, v = cur.First()
	} else if k, v = cur.Seek(after); k != nil && bytes.Equal(k, after) {
		k, v = cur.Next()
	}
	var last []byte
	for n := 0; k != nil && n < max; k, v = cur.Next() {
		var id uuidv7.UUID
		switch {
		case state == api.JobPending && len(v) == 16:
			id = uuidv7.UUID(v)
		case state != api.JobPending && len(k) == 24:
			id = uuidv7.UUID(k[8:])
		default:
			return nil, fmt.Errorf("%w: queue %q: %s index entry %x is malformed", errs.ErrCorrupt, c.Name, state, k)
		}
		job, err := j.load(id)
		if err != nil {
			return nil, err
		}
		fn(job)
		last = append(last[:0], k...)
		n++
	}
	if k == nil {
		return nil, nil
	}
	return last, nil
}

// JobExists reports whether queue c holds a job (or a payload) under id.
func (t *Tx) JobExists(c *Coll, id uuidv7.UUID) (bool, error) {
	if c.beyondLast(id) {
		return false, nil
	}
	if c.has(id) {
		return true, nil
	}
	j, err := c.jobBuckets(false)
	if err != nil || j == nil {
		return false, err
	}
	return j.stateOf(id) != nil, nil
}
