package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Watching. A watcher subscribes to one collection; every commit that
// writes records there hands the watcher, after the commit, each record it
// wrote (id and payload, in write order) with the commit's transaction id.
// The feed lives in memory: it costs a write nothing while nobody watches
// the collection (one atomic load), and a copy of each written payload
// while someone does. It sees the commits of this process only, which, with
// bbolt's exclusive file lock, are all the commits there are while the
// database is open.

// ErrLagged ends a watch whose watcher fell more than MaxWatchBacklog
// records (or MaxWatchBacklogBytes) behind the writers: rather than make
// writers wait or hold the records without bound, the feed lets it go.
var ErrLagged = errors.New("storh: watcher fell behind")

// Backlog bounds of one watcher.
const (
	MaxWatchBacklog      = 1 << 16
	MaxWatchBacklogBytes = 64 << 20
)

// Change is one record a commit wrote.
type Change struct {
	Txid    int
	ID      uuidv7.UUID
	Payload []byte // owned by the watcher
}

// Sub is one watcher's feed.
type Sub struct {
	db     *DB
	coll   string
	notify chan struct{} // one pending signal: changes are waiting

	mu      sync.Mutex
	backlog []Change
	bytes   int
	lagged  bool
	closed  bool
}

type watchers struct {
	any  atomic.Int32 // watchers of every collection
	mu   sync.RWMutex
	subs map[string]map[*Sub]struct{}
}

// Subscribe starts a feed of the commits to collection name. Close it.
func (db *DB) Subscribe(name string) *Sub {
	s := &Sub{db: db, coll: name, notify: make(chan struct{}, 1)}
	w := &db.watch
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[string]map[*Sub]struct{}{}
	}
	if w.subs[name] == nil {
		w.subs[name] = map[*Sub]struct{}{}
	}
	w.subs[name][s] = struct{}{}
	w.any.Add(1)
	w.mu.Unlock()
	// A write transaction notes its changes when it writes, if someone
	// watches then. One that wrote before this subscription may commit
	// after it, unseen by the feed and, if the caller's catch-up had read
	// past its ids already, by the catch-up too. Taking the writer lock
	// once (bbolt's, with a write transaction rolled back: nothing is
	// written; elsewhere the DB's own) waits for it to commit; every write
	// transaction after this sees the watcher.
	switch {
	case db.opts.ReadOnly:
	case db.bolt != nil:
		if btx, err := db.bolt.Begin(true); err == nil {
			_ = btx.Rollback()
		}
	default:
		db.writeMu.Lock()
		db.writeMu.Unlock()
	}
	return s
}

// Close ends the feed.
func (s *Sub) Close() {
	w := &s.db.watch
	w.mu.Lock()
	if _, ok := w.subs[s.coll][s]; ok {
		delete(w.subs[s.coll], s)
		if len(w.subs[s.coll]) == 0 {
			delete(w.subs, s.coll)
		}
		w.any.Add(-1)
	}
	w.mu.Unlock()
	s.mu.Lock()
	s.closed, s.backlog = true, nil
	s.mu.Unlock()
}

// Ready is signalled when changes may be waiting.
func (s *Sub) Ready() <-chan struct{} { return s.notify }

// Take returns the changes waiting, oldest first, or ErrLagged once the
// backlog overflowed.
func (s *Sub) Take() ([]Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lagged {
		return nil, fmt.Errorf("%w: more than %d records (or %d MiB) waited for it", ErrLagged, MaxWatchBacklog, MaxWatchBacklogBytes>>20)
	}
	out := s.backlog
	s.backlog, s.bytes = nil, 0
	return out, nil
}

// watched reports whether anyone watches collection name.
func (db *DB) watched(name string) bool {
	if db.watch.any.Load() == 0 {
		return false
	}
	db.watch.mu.RLock()
	defer db.watch.mu.RUnlock()
	return len(db.watch.subs[name]) > 0
}

// noteChange records a write for the watchers of c, when there are any.
func (t *Tx) noteChange(c *Coll, id uuidv7.UUID, payload []byte) {
	if t.db == nil || !t.db.watched(c.Name) {
		return
	}
	t.changes = append(t.changes, collChange{c.Name, Change{ID: id, Payload: append([]byte(nil), payload...)}})
}

type collChange struct {
	coll string
	Change
}

// publish hands a committed transaction's changes to the watchers.
func (db *DB) publish(txid int, changes []collChange) {
	db.watch.mu.RLock()
	defer db.watch.mu.RUnlock()
	for _, ch := range changes {
		for s := range db.watch.subs[ch.coll] {
			s.mu.Lock()
			if !s.closed && !s.lagged {
				c := ch.Change
				c.Txid = txid
				s.backlog = append(s.backlog, c)
				s.bytes += len(c.Payload)
				if len(s.backlog) > MaxWatchBacklog || s.bytes > MaxWatchBacklogBytes {
					s.lagged, s.backlog, s.bytes = true, nil, 0
				}
			}
			s.mu.Unlock()
			select {
			case s.notify <- struct{}{}:
			default:
			}
		}
	}
}

// TxID is the id of the transaction: for a read, the last commit it sees.
func (t *Tx) TxID() int { return t.btx.ID() }
