package storh

// Queue is a durable job queue. This release reserves the collection kind,
// so that a name created as a queue cannot be reopened as Docs or Log and
// vice versa; the enqueue, lease and acknowledge operations arrive in a later
// release. Count and Stats work today.
type Queue struct{ c coll }

// Name returns the queue's name.
func (q *Queue) Name() string { return q.c.name }

// Count returns the number of jobs in the queue.
func (q *Queue) Count() (int, error) { return q.c.Count() }

// Stats returns the queue's statistics.
func (q *Queue) Stats() (CollectionInfo, error) { return q.c.Stats() }
