package engine

import (
	"sync"

	"github.com/storhdb/storh-go/storh/kv"
)

// queueNotices wakes this process's ClaimWait waiters when another
// process's commit makes a job pending, on a store other processes write
// to (kv.Shared). A waiter watches its queue's topic (WatchQueue), and
// every commit that makes a job of a watched queue pending announces it
// (Tx.move), a wake-only notice: the DB's listener (listen), the one that
// serves Watch and the change feeds' readers too, wakes the queue's
// waiters, which claim as after a commit of their own, so a notice lost
// or late costs a wake, never a job. Each queue is watched from its first
// wait until Close, or until the listener fails: its waiters are then
// woken, and the next wait watches again on a new listener.
type queueNotices struct {
	mu       sync.Mutex
	listener kv.Listener     // the listener the queues in watching are watched on
	watching map[string]bool // queues watched on listener
}

// WatchQueue makes commits of other processes that make jobs of queue name
// pending wake this DB's waiters (JobSignal), on a store other processes
// write to; elsewhere it does nothing. It returns once they will: a job
// made pending by a commit after it returns wakes the waiters.
func (db *DB) WatchQueue(name string) error {
	if r, ok := db.store.(kv.Replica); ok && r.Replaying() {
		return nil // a hot standby hears no notices
	}
	n := &db.queueNotices
	n.mu.Lock()
	defer n.mu.Unlock()
	// Not taken from n.listener: the listener may have failed since
	// (lose forgot it), and one that failed watches nothing.
	l, err := db.listen()
	if err != nil || l == nil {
		return err
	}
	if n.listener != l {
		n.listener, n.watching = l, nil
	}
	if n.watching[name] {
		return nil
	}
	if err := l.Watch(name); err != nil {
		return mapStoreErr(err)
	}
	if n.watching == nil {
		n.watching = map[string]bool{}
	}
	n.watching[name] = true
	return nil
}

// stopQueueNotices forgets the queues watched (at Close, which stops the
// listener).
func (db *DB) stopQueueNotices() {
	n := &db.queueNotices
	n.mu.Lock()
	n.listener, n.watching = nil, nil
	n.mu.Unlock()
}

// announcePending tells the waiters of other processes that this
// transaction makes a job of queue c pending (see queueNotices). The
// backend drops it when no process watches the queue.
func (t *Tx) announcePending(c *Coll) {
	if t.shared != nil && !c.announced {
		c.announced = true // once per transaction, however many jobs
		t.shared.Announce(c.Name, wakeKey)
	}
}

// wakeKey is the key of a queue's wake-only notice: it names no job.
var wakeKey = []byte{0}
