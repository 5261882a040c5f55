package engine

import (
	"sync"

	"github.com/storhdb/storh-go/storh/kv"
)

// queueNotices wakes this process's ClaimWait waiters when another
// process's commit makes a job pending, on a store other processes write
// to (kv.Shared). A waiter watches its queue's topic (WatchQueue), and
// every commit that makes a job of a watched queue pending announces it
// (Tx.move), a wake-only notice: the listener wakes the queue's waiters,
// which claim as after a commit of their own, so a notice lost or late
// costs a wake, never a job. The listener is started by the first wait
// and watches each queue from its first wait until Close.
type queueNotices struct {
	mu       sync.Mutex
	listener kv.Listener
	watching map[string]bool
}

// WatchQueue makes commits of other processes that make jobs of queue name
// pending wake this DB's waiters (JobSignal), on a store other processes
// write to; elsewhere it does nothing. It returns once they will: a job
// made pending by a commit after it returns wakes the waiters.
func (db *DB) WatchQueue(name string) error {
	shared, ok := db.store.(kv.Shared)
	if !ok {
		return nil
	}
	if r, ok := db.store.(kv.Replica); ok && r.Replaying() {
		return nil // a hot standby hears no notices
	}
	n := &db.queueNotices
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.watching[name] {
		return nil
	}
	if n.listener == nil {
		var l kv.Listener
		var err error
		l, err = shared.Listen(func(note kv.Notice, err error) bool {
			if err != nil {
				// A notice may be lost (a dropped connection): forget
				// this listener and wake every waiter, whose next wait
				// starts another and watches again. Not here: a
				// WatchQueue holding mu may be waiting for this
				// goroutine to serve its Watch.
				go func() {
					n.mu.Lock()
					if n.listener == l {
						n.listener, n.watching = nil, nil
					}
					n.mu.Unlock()
					db.signals.wakeAll()
				}()
				return false
			}
			db.signals.wake(note.Topic)
			return true
		})
		if err != nil {
			return mapStoreErr(err)
		}
		n.listener = l
	}
	if err := n.listener.Watch(name); err != nil {
		return mapStoreErr(err)
	}
	if n.watching == nil {
		n.watching = map[string]bool{}
	}
	n.watching[name] = true
	return nil
}

// stopQueueNotices stops the listener (at Close).
func (db *DB) stopQueueNotices() {
	n := &db.queueNotices
	n.mu.Lock()
	l := n.listener
	n.listener, n.watching = nil, nil
	n.mu.Unlock()
	if l != nil {
		l.Stop()
	}
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
