package engine

import (
	"bytes"
	"fmt"

	"github.com/storhdb/storh-go/storh/internal/api"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// checkQueue checks queue c's jobs: every job has a sound state record and
// its payload, sits in the index of its state under the key its state says
// and in no other, every payload has a job, the counters count the states,
// and the sequence counter is past every job's place. It reports each
// problem and whether there was one.
func checkQueue(c *Coll, emit func(api.Problem), pace *pace) (bool, error) {
	bad := false
	report := func(id uuidv7.UUID, format string, args ...any) {
		bad = true
		emit(api.Problem{Kind: api.ProblemQueue, Collection: c.Name, ID: id, Detail: fmt.Sprintf(format, args...)})
	}
	j, err := c.jobBuckets(false)
	if err != nil {
		report(uuidv7.UUID{}, "%s", trim(err))
		return bad, nil
	}
	if j == nil {
		if c.Count() > 0 {
			report(uuidv7.UUID{}, "%d payloads and no job states", c.Count())
		}
		return bad, nil
	}
	var counts [5]int64
	var maxSeq uint64
	seqSeen := false
	sc := j.state.Cursor()
	for k, v := sc.First(); k != nil; k, v = sc.Next() {
		if err := pace.step(len(v)); err != nil {
			return bad, err
		}
		if len(k) != 16 {
			report(uuidv7.UUID{}, "a job state under key %x, not a job id", k)
			continue
		}
		id := uuidv7.UUID(k)
		job, err := decodeJob(id, v)
		if err != nil {
			report(id, "%s", trim(err))
			continue
		}
		counts[job.State]++
		if !seqSeen || job.Seq > maxSeq {
			maxSeq, seqSeen = job.Seq, true
		}
		if c.records.Get(k) == nil {
			report(id, "a %s job without its payload", job.State)
		}
		b, key := j.index(job)
		got := b.Get(key)
		switch {
		case got == nil && !bucketHas(b, key):
			report(id, "a %s job missing from the %s index", job.State, job.State)
		case job.State == api.JobPending && !bytes.Equal(got, id[:]):
			report(id, "pending job's place %d holds another job", job.Seq)
		}
	}
	for s := api.JobPending; s <= api.JobDead; s++ {
		b, _ := j.index(Job{State: s})
		cur := b.Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			if err := pace.step(0); err != nil {
				return bad, err
			}
			var id uuidv7.UUID
			switch {
			case s == api.JobPending && (len(k) == 16) != j.old && (len(k) == 8) == j.old && len(v) == 16:
				id = uuidv7.UUID(v)
			case s != api.JobPending && len(k) == 24 && (v != nil || b.Bucket(k) == nil):
				id = uuidv7.UUID(k[8:])
			default:
				report(uuidv7.UUID{}, "a malformed entry %x in the %s index", k, s)
				continue
			}
			job, err := j.load(id)
			if err != nil {
				report(id, "in the %s index but %s", s, trim(err))
				continue
			}
			if _, want := j.index(job); job.State != s || !bytes.Equal(k, want) {
				report(id, "in the %s index under %x, but the job is %s", s, k, job.State)
			}
		}
	}
	rc := c.records.Cursor()
	for k, _ := rc.First(); k != nil; k, _ = rc.Next() {
		if err := pace.step(0); err != nil {
			return bad, err
		}
		if len(k) == 16 && j.state.Get(k) == nil {
			report(uuidv7.UUID(k), "a payload without a job state")
		}
	}
	slots, badSlots := slotSum(readSlotRows(c.meta))
	for _, k := range badSlots {
		report(uuidv7.UUID{}, "counter slot %x is not %d bytes", k, jobSlotSize)
	}
	for s := api.JobPending; s <= api.JobDead; s++ {
		if got := c.getMeta(keyJobCount[s]) + slots[s] + c.jobDelta[s]; got != counts[s] {
			report(uuidv7.UUID{}, "the %s counter says %d, the states %d", s, got, counts[s])
		}
	}
	next := uint64(c.getMeta(keyJobSeq))
	if c.jobSeq >= 0 {
		next = uint64(c.jobSeq)
	}
	if seqSeen && next <= maxSeq {
		report(uuidv7.UUID{}, "the next place %d is not past the last job's %d", next, maxSeq)
	}
	return bad, nil
}

// bucketHas tells a present key with an empty value from a missing one.
func bucketHas(b kv.Bucket, key []byte) bool {
	k, _ := b.Cursor().Seek(key)
	return bytes.Equal(k, key)
}

// repairQueue rebuilds queue c's indexes and counters from its job states,
// which are the truth: a state that cannot be read, or whose payload is
// gone, is dropped; a payload without a state becomes a pending job at the
// end of the order.
func (t *Tx) repairQueue(c *Coll, pace *pace) error {
	j, err := c.jobBuckets(true)
	if err != nil {
		return err
	}
	for _, name := range [][]byte{bucketPending, bucketClaimed, bucketDone, bucketDead} {
		if err := j.root.DeleteBucket(name); err != nil {
			return mapStoreErr(err)
		}
	}
	c.jobs = nil // its buckets are gone
	if j, err = c.jobBuckets(true); err != nil {
		return err
	}
	var drop [][]byte
	var keep []Job
	var next uint64
	sc := j.state.Cursor()
	for k, v := sc.First(); k != nil; k, v = sc.Next() {
		if err := pace.step(0); err != nil {
			return err
		}
		if len(k) != 16 {
			drop = append(drop, bytes.Clone(k))
			continue
		}
		job, err := decodeJob(uuidv7.UUID(k), v)
		if err != nil || c.records.Get(k) == nil {
			drop = append(drop, bytes.Clone(k))
			continue
		}
		keep = append(keep, job)
		next = max(next, job.Seq+1)
	}
	for _, k := range drop {
		if err := j.state.Delete(k); err != nil {
			return mapStoreErr(err)
		}
	}
	for s := api.JobPending; s <= api.JobDead; s++ {
		if err := c.putMeta(keyJobCount[s], 0); err != nil {
			return err
		}
		c.jobDelta[s] = 0
	}
	if err := c.deleteSlots(jobSlotPrefix); err != nil {
		return err
	}
	for _, job := range keep {
		if err := t.move(c, j, Job{}, job); err != nil {
			return err
		}
	}
	rc := c.records.Cursor()
	var orphans []uuidv7.UUID
	for k, _ := rc.First(); k != nil; k, _ = rc.Next() {
		if len(k) == 16 && j.state.Get(k) == nil {
			orphans = append(orphans, uuidv7.UUID(k))
		}
	}
	now := int64(0)
	if t.db != nil {
		now = t.db.Now().UnixMilli()
	}
	for _, id := range orphans {
		if err := t.move(c, j, Job{}, Job{ID: id, State: api.JobPending, Seq: next, Changed: now, Due: now, Reason: "restored by repair"}); err != nil {
			return err
		}
		next++
	}
	c.jobSeq = int64(next)
	return c.flushJobs() // c is not the transaction's: nothing else flushes it
}
