package engine

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Watching. A watcher subscribes to one collection; every commit that
// writes records there hands the watcher, after the commit, each record it
// wrote (id and payload, in write order) with the commit's transaction id.
// The feed lives in memory: it costs a write nothing while nobody watches
// the collection (one atomic load), and a copy of each written payload
// while someone does. On bbolt it sees the commits of this process, which,
// with the exclusive file lock, are all the commits there are while the
// database is open. On a store other processes write to (kv.Shared), a
// write transaction also announces the ids it wrote with its commit while
// some process watches the collection (PostgreSQL then orders those
// commits one at a time, database-wide, to queue the notices in commit
// order), and the DB's listener (listen), which watches
// each subscribed collection, hears the other processes' announcements
// and reads those records for the feed: a record deleted before the
// listener reads it is not delivered, and one written again is read at
// its latest value (its later write is delivered too).

// Backlog bounds of one watcher.
const (
	maxWatchBacklog      = 1 << 16
	maxWatchBacklogBytes = 64 << 20
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
	// since is the watchers' epoch this Sub began: it takes a commit's
	// writes to its collection when the first of them came at it or later
	// (see collChange.epoch).
	since uint64

	mu      sync.Mutex
	backlog []Change
	bytes   int
	lagged  bool
	lost    error // the listener for other processes' writes failed
	closed  bool
	// watching is the listener that watches coll for this Sub, on a
	// shared store: Close unwatches it there.
	watching kv.Listener
}

type watchers struct {
	any  atomic.Int32 // watchers of every collection
	mu   sync.RWMutex
	subs map[string]map[*Sub]struct{}
	// epoch counts Subscribes. A write transaction notes its writes for
	// the watchers there are when it writes, so one that wrote to a
	// collection before a Sub of it began may have written records the
	// Sub never saw noted: the Sub takes a transaction's writes to its
	// collection only when the first of them came in its epoch or later,
	// and then it takes them all.
	epoch atomic.Uint64

	// On a kv.Shared store: the listener for other processes' commits,
	// started by the first Subscribe, FollowFeed or WatchQueue, stopped by
	// Close or when it fails.
	// Each listener has a generation, so that a failing one can only
	// forget itself, never a successor.
	listenMu  sync.Mutex
	listener  kv.Listener
	listenGen int
}

// Subscribe starts a feed of the commits to collection name. Close it. On a
// shared store it fails if the listener cannot start.
func (db *DB) Subscribe(name string) (*Sub, error) {
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
	s.since = w.epoch.Add(1)
	w.mu.Unlock()
	// Another process's commit after this is announced to the listener;
	// one before it is in every snapshot taken after.
	l, err := db.listen()
	if err != nil {
		s.Close()
		return nil, err
	}
	if l != nil {
		// Writers announce a collection's writes only while someone
		// watches it: Watch waits for those that found nobody watching.
		if err := l.Watch(name); err != nil {
			s.Close()
			return nil, fmt.Errorf("%w: %w", errs.ErrWatchLost, mapStoreErr(err))
		}
		s.mu.Lock()
		s.watching = l
		s.mu.Unlock()
	}
	// A write transaction notes its changes when it writes, if someone
	// watches then. One that wrote to the collection before this
	// subscription is not delivered to it (the feed would hold part of
	// it), so it must be in the caller's catch-up: taking the writer lock
	// once (bbolt's, with a write transaction rolled back: nothing is
	// written; elsewhere the DB's own) waits for it to commit, before the
	// catch-up's first read. Every write transaction after this sees the
	// watcher from its start.
	switch {
	case db.opts.ReadOnly:
	case db.file.bolt != nil:
		btx, err := db.beginBolt(true)
		if err != nil {
			s.Close()
			return nil, mapStoreErr(err)
		}
		_ = btx.Rollback()
	default:
		db.group.writeMu.Lock()
		db.group.writeMu.Unlock()
	}
	return s, nil
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
	l := s.watching
	s.watching = nil
	s.mu.Unlock()
	if l != nil {
		l.Unwatch(s.coll)
	}
}

// Ready is signalled when changes may be waiting.
func (s *Sub) Ready() <-chan struct{} { return s.notify }

// Take returns the changes waiting, oldest first, or errs.ErrLagged once the
// backlog overflowed.
func (s *Sub) Take() ([]Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lagged {
		return nil, fmt.Errorf("%w: more than %d records (or %d MiB) waited for it", errs.ErrLagged, maxWatchBacklog, maxWatchBacklogBytes>>20)
	}
	if s.lost != nil {
		return nil, s.lost
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

// noteChange records a write for the watchers of c, when there are any,
// and announces it to other processes on a shared store.
func (t *Tx) noteChange(c *Coll, id uuidv7.UUID, payload []byte) {
	if t.shared != nil {
		c.key = id // a slice of the parameter would escape: an allocation per write
		t.shared.Announce(c.Name, c.key[:])
	}
	if t.db == nil {
		return
	}
	if !c.wrote {
		// Before the watched check: a watcher that subscribes after this
		// load is not told of this transaction's writes to c (publish).
		c.wrote, c.watchEpoch = true, t.db.watch.epoch.Load()
	}
	if !t.db.watched(c.Name) {
		return
	}
	t.changes = append(t.changes, collChange{c.Name, c.watchEpoch, Change{ID: id, Payload: append([]byte(nil), payload...)}})
}

type collChange struct {
	coll string
	// epoch is the watchers' epoch at the transaction's first write to
	// coll: the watchers subscribed by then were told of every one.
	epoch uint64
	Change
}

// publish hands a committed transaction's changes to the watchers of
// their collections that were told of all of them: those subscribed
// before the transaction's first write to the collection (another
// process's commit, read whole after it, goes to every watcher).
func (db *DB) publish(txid int, changes []collChange) {
	db.watch.mu.RLock()
	defer db.watch.mu.RUnlock()
	for _, ch := range changes {
		ch.Txid = txid
		for s := range db.watch.subs[ch.coll] {
			if s.since > ch.epoch {
				continue
			}
			s.mu.Lock()
			if !s.closed && !s.lagged {
				c := ch.Change
				s.backlog = append(s.backlog, c)
				s.bytes += len(c.Payload)
				if len(s.backlog) > maxWatchBacklog || s.bytes > maxWatchBacklogBytes {
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

// Snapshot is what a read transaction saw, for telling whether a Change's
// commit was in it.
type Snapshot struct {
	txid   int         // bbolt: the last commit it sees
	shared kv.SharedTx // a shared store's transaction, which knows
}

// Snapshot returns the transaction's snapshot.
func (t *Tx) Snapshot() Snapshot {
	if t.shared != nil {
		// Holds is asked after the transaction: have the store learn its
		// snapshot now.
		t.shared.Sees(0)
		return Snapshot{shared: t.shared}
	}
	return Snapshot{txid: t.btx.ID()}
}

// Holds reports whether the snapshot holds the commit of Change.Txid txid.
func (s Snapshot) Holds(txid int) bool {
	if s.shared != nil {
		return s.shared.Sees(uint64(txid))
	}
	return txid <= s.txid
}

// listen starts the listener for other processes' commits on a shared
// store, if it is not running, and returns it (nil on a store of one
// process). It is the DB's one listener, on one connection of the store:
// Watch's subscriptions, the readers of change feeds (FeedFollower) and
// the waiters of queues (WatchQueue) all watch their topics on it, and it
// wakes each of them on the notices of its topic.
func (db *DB) listen() (kv.Listener, error) {
	shared, ok := db.store.(kv.Shared)
	if !ok {
		return nil, nil
	}
	w := &db.watch
	w.listenMu.Lock()
	defer w.listenMu.Unlock()
	if w.listener != nil {
		return w.listener, nil
	}
	origin := shared.Origin()
	w.listenGen++
	gen := w.listenGen
	l, err := shared.Listen(func(n kv.Notice, err error) bool {
		if err == nil {
			db.heardFeed(n.Topic)
			db.signals.wake(n.Topic) // a queue's waiters (queueNotices)
		}
		if err == nil && n.Origin != origin && db.watched(n.Topic) {
			err = db.fetchForeign(n)
		}
		if err != nil {
			// Forgotten first: whoever the wakes below send to watch
			// again finds no listener and starts a new one.
			db.lose(gen, err)
			db.heardFeed("")
			db.signals.wakeAll()
			return false
		}
		return true
	})
	if err != nil {
		return nil, mapStoreErr(err)
	}
	w.listener = l
	return l, nil
}

// stopListening stops the listener (at Close).
func (db *DB) stopListening() {
	w := &db.watch
	w.listenMu.Lock()
	l := w.listener
	w.listener = nil
	w.listenMu.Unlock()
	if l != nil {
		l.Stop()
	}
}

// lose ends every current watch with errs.ErrWatchLost after listener gen
// failed; its goroutine is ending, and the next Subscribe starts a new
// listener.
func (db *DB) lose(gen int, cause error) {
	w := &db.watch
	w.listenMu.Lock()
	if w.listenGen == gen {
		w.listener = nil
	}
	w.mu.RLock()
	for _, subs := range w.subs {
		for s := range subs {
			s.mu.Lock()
			if s.lost == nil {
				s.lost = fmt.Errorf("%w: %w", errs.ErrWatchLost, cause)
			}
			s.mu.Unlock()
			select {
			case s.notify <- struct{}{}:
			default:
			}
		}
	}
	w.mu.RUnlock()
	w.listenMu.Unlock()
}

// fetchForeign reads the records another process's commit announced and
// hands them to the watchers of their collection. An error means the
// records could not be read: the watchers cannot be promised them.
func (db *DB) fetchForeign(n kv.Notice) error {
	if db.Enter() != nil {
		return nil // closing
	}
	defer db.Exit()
	var changes []collChange
	err := db.ViewSafe(func(tx *Tx) error {
		changes = changes[:0]
		c, err := tx.Coll(n.Topic, 0, false)
		if err != nil {
			return err
		}
		for _, k := range n.Keys {
			id, err := uuidv7.FromBytes(k)
			if err != nil {
				continue // not a record's id: nothing to deliver
			}
			v, err := tx.Get(c, id)
			if err != nil {
				if errors.Is(err, errs.ErrNotFound) {
					continue // deleted since
				}
				return err
			}
			changes = append(changes, collChange{n.Topic, math.MaxUint64, Change{ID: id, Payload: append([]byte(nil), v...)}})
		}
		return nil
	})
	if err != nil && !errors.Is(err, errs.ErrNotFound) {
		return fmt.Errorf("reading the records of commit %d: %w", n.Commit, err)
	}
	if len(changes) > 0 {
		db.publish(int(n.Commit), changes)
	}
	return nil
}

// Replaying reports whether the database reads a copy that replays
// another server's commits and hears of none (a PostgreSQL hot standby,
// kv.Replica): Subscribe cannot follow it, and a watcher polls Position.
func (db *DB) Replaying() bool {
	r, ok := db.store.(kv.Replica)
	return ok && r.Replaying()
}

// Position returns how far the copy Replaying reads has replayed: a number
// that grows with every commit a read may newly see. It fails with
// ErrUnsupported on a store that is not a replica.
func (db *DB) Position() (uint64, error) {
	r, ok := db.store.(kv.Replica)
	if !ok {
		return 0, fmt.Errorf("%w: the store does not replay another's commits", errs.ErrUnsupported)
	}
	pos, err := r.Position()
	return pos, mapStoreErr(err)
}
