package postgres

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/kv"
)

// Notices travel as PostgreSQL notifications on one channel per schema,
// sent with the writer's COMMIT, so PostgreSQL delivers them after it and
// in commit order. A notification's payload is
//
//	<origin, 16 hex digits> <xid> <key>,<key>,… <topic>
//
// with each key in unpadded standard base64 (22 characters for an id),
//
// and xid the writer's pg_current_xact_id(): a reader's snapshot
// (pg_current_snapshot()) tells by it whether it holds that commit. A
// payload must stay under 8000 bytes, so a transaction that announces many
// keys sends several notifications.

var (
	_ kv.Shared   = (*Store)(nil)
	_ kv.SharedTx = (*tx)(nil)
)

// maxPayload keeps a notification's payload under PostgreSQL's limit of
// 8000 bytes, with room for the origin and the xid.
const maxPayload = 7900

// notifySQL sends one notification, its xid filled in by the server.
// notifyUnlessQuietSQL sends it only if watch key $4 cannot be taken: for
// a bucket whose lock goes in the same round trip as the notices (a
// writer's first, with its COMMIT), whose question whether anyone watches
// (see queueHold) is answered too late to drop them. The writer holds the
// key if it took it there, and trying again then succeeds.
const (
	notifySQL            = "SELECT pg_notify($1, $2 || pg_current_xact_id()::text || $3)"
	notifyUnlessQuietSQL = notifySQL + " WHERE NOT pg_try_advisory_xact_lock($4)"
)

// channel names the schema's notification channel: advisory-lock style,
// a hash, since a channel name is an identifier of at most 63 bytes and
// schemas of one database share the channels.
func channel(schema string) string {
	h := fnv.New64a()
	h.Write([]byte(schema))
	return fmt.Sprintf("storh_%016x", h.Sum64())
}

// notices are a writable transaction's announcements, topic by topic in
// the order first announced.
type notices struct {
	topics []string
	keys   map[string][][]byte // topic → keys, copied
}

// Announce queues a notice of key under topic, sent with the commit.
func (t *tx) Announce(topic string, key []byte) {
	if !t.writable || t.conn == nil {
		return
	}
	if _, quiet := t.quiet[topic]; quiet {
		return // nobody watches, and nobody can start to before it ends
	}
	n := &t.notices
	if n.keys == nil {
		n.keys = map[string][][]byte{}
	}
	if _, ok := n.keys[topic]; !ok {
		n.topics = append(n.topics, topic)
	}
	n.keys[topic] = append(n.keys[topic], t.arena.copy(key))
}

// queueNotices queues the notifications into the commit's batch.
func (t *tx) queueNotices(b *pgx.Batch) {
	n := &t.notices
	if len(n.topics) == 0 {
		return
	}
	ch := channel(t.s.schema)
	head := fmt.Sprintf("%016x ", t.s.origin)
	enc := base64.RawStdEncoding
	for _, topic := range n.topics {
		if _, quiet := t.quiet[topic]; quiet {
			continue // learnt after the announcement, from a hold taken later
		}
		keys := n.keys[topic]
		for len(keys) > 0 {
			room := maxPayload - len(topic) - len(head) - 24
			buf := make([]byte, 0, min(room, len(keys)*(enc.EncodedLen(16)+1))+len(topic)+2)
			buf = append(buf, ' ')
			i := 0
			for ; i < len(keys) && (i == 0 || len(buf)+enc.EncodedLen(len(keys[i]))+1 < room); i++ {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = enc.AppendEncode(buf, keys[i])
			}
			buf = append(buf, ' ')
			buf = append(buf, topic...)
			if watch, asking := t.asking[topic]; asking {
				b.Queue(notifyUnlessQuietSQL, ch, head, string(buf), watch)
			} else {
				b.Queue(notifySQL, ch, head, string(buf))
			}
			keys = keys[i:]
		}
	}
}

// CommitID is the transaction's xid, once it committed.
func (t *tx) CommitID() uint64 { return t.commitID }

// Origin identifies the store in its writers' notices.
func (s *Store) Origin() uint64 { return s.origin }

// Sees reports whether the snapshot of a read-only transaction, taken by
// its first statement, holds commit. A writable one answers true: each of
// its statements sees every commit before it. The first call asks the
// server for the snapshot's bounds, taking the snapshot if no statement
// has yet (most reads never call it, so their first round trip does not
// carry the question): at REPEATABLE READ, pg_current_snapshot() is the
// transaction's snapshot, whenever it is asked. If the question fails,
// Err reports it, and the commit counts as not held.
func (t *tx) Sees(commit uint64) bool {
	switch {
	case t.writable:
		return true
	case t.snap == nil:
		if !t.readable() {
			return false
		}
		err := t.trip("snapshot", func(b *pgx.Batch) {
			b.Queue("SELECT pg_current_snapshot()::text").QueryRow(func(row pgx.Row) error {
				var text string
				err := row.Scan(&text)
				if err == nil {
					t.snap, err = parseSnapshot(text)
				}
				return err
			})
		})
		if err != nil {
			return false
		}
	}
	return t.snap.holds(commit)
}

// snapshot is a pg_current_snapshot(): transactions below xmin are
// finished, those from xmax on had not begun, and xip lists those in
// between that were still running.
type snapshot struct {
	xmin, xmax uint64
	xip        map[uint64]struct{}
}

func (s *snapshot) holds(xid uint64) bool {
	if xid < s.xmin {
		return true
	}
	if xid >= s.xmax {
		return false
	}
	_, running := s.xip[xid]
	return !running
}

// parseSnapshot reads pg_snapshot's text form, xmin:xmax:xip,xip,...
func parseSnapshot(text string) (*snapshot, error) {
	parts := strings.Split(text, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("postgres: snapshot %q is not xmin:xmax:xip", text)
	}
	var s snapshot
	var err error
	if s.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return nil, fmt.Errorf("postgres: snapshot %q: %w", text, err)
	}
	if s.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return nil, fmt.Errorf("postgres: snapshot %q: %w", text, err)
	}
	if parts[2] != "" {
		s.xip = map[uint64]struct{}{}
		for _, f := range strings.Split(parts[2], ",") {
			x, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("postgres: snapshot %q: %w", text, err)
			}
			s.xip[x] = struct{}{}
		}
	}
	return &s, nil
}

// parseNotice reads a notification's payload.
func parseNotice(payload string) (kv.Notice, error) {
	bad := func(why string) (kv.Notice, error) {
		return kv.Notice{}, fmt.Errorf("postgres: notification %.60q: %s", payload, why)
	}
	f := strings.SplitN(payload, " ", 4)
	if len(f) != 4 {
		return bad("not <origin> <xid> <keys> <topic>")
	}
	var n kv.Notice
	var err error
	if n.Origin, err = strconv.ParseUint(f[0], 16, 64); err != nil {
		return bad("bad origin")
	}
	if n.Commit, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return bad("bad xid")
	}
	for _, k := range strings.Split(f[2], ",") {
		key, err := base64.RawStdEncoding.DecodeString(k)
		if err != nil || len(key) == 0 {
			return bad("bad key")
		}
		n.Keys = append(n.Keys, key)
	}
	n.Topic = f[3]
	return n, nil
}

// watchKeys are the advisory lock keys that tell writers of top-level
// bucket name whether anyone watches it: listeners hold them all shared
// for as long as they watch, and a writer that takes one of them
// (exclusively, without waiting, with its lock on the bucket) knows that
// nobody does, and keeps it until it ends, so that a new watcher waits for
// it. There are watchStripes of them so that writers holding the bucket
// shared, who run at once, rarely try the same one: a writer that finds
// its key taken by another writer only announces what it need not.
func (s *Store) watchKeys(name string) []int64 {
	keys := make([]int64, watchStripes)
	for i := range keys {
		keys[i] = s.watchKey(name, i)
	}
	return keys
}

// watchKey is stripe i of name's watch keys.
func (s *Store) watchKey(name string, i int) int64 {
	h := fnv.New64a()
	h.Write([]byte(s.schema))
	h.Write([]byte{1})
	h.Write([]byte(name))
	if i > 0 {
		h.Write([]byte{0, byte(i)})
	}
	return int64(h.Sum64())
}

// watchStripes is how many watch keys a top-level bucket has: a listener
// holds them all per watched bucket (lock table entries), a writer tries
// one at random.
const watchStripes = 16

const (
	watchSQL   = "SELECT pg_advisory_lock_shared(k) FROM unnest($1::bigint[]) AS k"
	unwatchSQL = "SELECT pg_advisory_unlock_shared(k) FROM unnest($1::bigint[]) AS k"
)

// listener is a kv.Listener: a connection of its own, out of the pool,
// LISTENing on the schema's channel and holding the watch locks of the
// topics watched. Its goroutine waits for notifications; a Watch or an
// Unwatch interrupts the wait (which leaves the connection usable) so that
// the goroutine runs the lock statement between two waits.
type listener struct {
	s    *Store
	conn *pgx.Conn
	fn   func(kv.Notice, error) bool
	stop context.CancelFunc
	done chan struct{}

	mu   sync.Mutex
	wake context.CancelFunc // interrupts the current wait
	reqs []*lockRequest
	err  error // why the listener ended
}

type lockRequest struct {
	sql  string
	keys []int64
	done chan error // nil: nobody waits (Unwatch)
}

var _ kv.Listener = (*listener)(nil)

// Listen starts a listener: fn hears the notices of the transactions that
// commit after it returns.
func (s *Store) Listen(fn func(kv.Notice, error) bool) (kv.Listener, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("postgres: listen: %w", kv.ErrTxClosed)
	}
	if s.replaying {
		return nil, fmt.Errorf("postgres: listen: %w: the server is a hot standby, which notifications do not reach (a watcher polls Position)", errs.ErrUnsupported)
	}
	pc, err := s.pool.Acquire(s.ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: listen: %w", err)
	}
	conn := pc.Hijack()
	ch := channel(s.schema)
	if _, err := conn.Exec(s.ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
		conn.Close(s.ctx)
		return nil, dbErr("listen", err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	l := &listener{s: s, conn: conn, fn: fn, stop: cancel, done: make(chan struct{})}
	go l.run(ctx, ch)
	return l, nil
}

func (l *listener) run(ctx context.Context, ch string) {
	defer close(l.done)
	defer l.conn.Close(context.Background())
	fail := func(err error) {
		l.end(err)
		if ctx.Err() == nil {
			l.fn(kv.Notice{}, err)
		}
	}
	for {
		l.mu.Lock()
		reqs := l.reqs
		l.reqs = nil
		l.mu.Unlock()
		for _, r := range reqs {
			_, err := l.conn.Exec(ctx, r.sql, r.keys)
			if err == nil && r.sql == watchSQL {
				// The commits that found nobody watching have ended:
				// reads from a standby must wait for them (see readConn).
				err = l.s.raiseFloorOn(ctx, l.conn)
			}
			if r.done != nil {
				r.done <- err
			}
			if err != nil {
				// A lock the listener may or may not hold: the promise
				// to writers is broken.
				fail(dbErr("watch", err))
				return
			}
		}
		wait, wake := context.WithCancel(ctx)
		l.mu.Lock()
		l.wake = wake
		if len(l.reqs) > 0 {
			wake()
		}
		l.mu.Unlock()
		nt, err := l.conn.WaitForNotification(wait)
		interrupted := wait.Err() != nil
		l.mu.Lock()
		l.wake = nil
		l.mu.Unlock()
		wake()
		if nt != nil && nt.Channel == ch {
			n, perr := parseNotice(nt.Payload)
			if perr != nil {
				// Damaged, or from another version: promising every
				// notice is over.
				fail(perr)
				return
			}
			// The notice comes after its commit: a read of what it
			// announces, from a standby, must wait for the commit.
			if err := l.s.raiseFloorOn(ctx, l.conn); err != nil {
				fail(dbErr("listen", err))
				return
			}
			if !l.fn(n, nil) {
				l.end(errors.New("postgres: the listener was stopped"))
				return
			}
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			l.end(fmt.Errorf("postgres: listen: %w", kv.ErrTxClosed))
			return
		case interrupted && !l.conn.IsClosed():
			// Interrupted for a lock request; the connection is intact.
		default:
			fail(dbErr("listen", err))
			return
		}
	}
}

// end records why the listener ended and fails the requests waiting.
func (l *listener) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
	for _, r := range l.reqs {
		if r.done != nil {
			r.done <- l.err
		}
	}
	l.reqs = nil
}

// request hands a lock statement to the listener's goroutine.
func (l *listener) request(r *lockRequest) error {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return l.err
	}
	l.reqs = append(l.reqs, r)
	if l.wake != nil {
		l.wake()
	}
	l.mu.Unlock()
	return nil
}

// Watch takes the topic's watch lock, shared, on the listener's
// connection: it waits for the writers that took it to find nobody
// watching, and makes every later writer announce.
func (l *listener) Watch(topic string) error {
	r := &lockRequest{sql: watchSQL, keys: l.s.watchKeys(topic), done: make(chan error, 1)}
	if err := l.request(r); err != nil {
		return err
	}
	return <-r.done
}

// Unwatch releases one hold of the topic's watch lock, without waiting.
func (l *listener) Unwatch(topic string) {
	_ = l.request(&lockRequest{sql: unwatchSQL, keys: l.s.watchKeys(topic)})
}

// Stop ends the listener; its connection closes, and its locks with it.
func (l *listener) Stop() {
	l.stop()
	<-l.done
}
