package postgres

import (
	"context"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

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
const notifySQL = "SELECT pg_notify($1, $2 || pg_current_xact_id()::text || $3)"

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
	n := &t.notices
	if n.keys == nil {
		n.keys = map[string][][]byte{}
	}
	if _, ok := n.keys[topic]; !ok {
		n.topics = append(n.topics, topic)
	}
	n.keys[topic] = append(n.keys[topic], t.arena.copy(key))
}

// queueNotices queues the notifications and the query of the
// transaction's xid into the commit's batch.
func (t *tx) queueNotices(b *pgx.Batch) {
	n := &t.notices
	if len(n.topics) == 0 {
		return
	}
	b.Queue("SELECT pg_current_xact_id()::text").QueryRow(func(row pgx.Row) error {
		var s string
		if err := row.Scan(&s); err != nil {
			return err
		}
		id, err := strconv.ParseUint(s, 10, 64)
		t.commitID = id
		return err
	})
	ch := channel(t.s.schema)
	head := fmt.Sprintf("%016x ", t.s.origin)
	enc := base64.RawStdEncoding
	for _, topic := range n.topics {
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
			b.Queue(notifySQL, ch, head, string(buf))
			keys = keys[i:]
		}
	}
}

// CommitID is the xid of the last commit that announced something.
func (t *tx) CommitID() uint64 { return t.commitID }

// Origin identifies the store in its writers' notices.
func (s *Store) Origin() uint64 { return s.origin }

// Sees reports whether the snapshot of a read-only transaction, taken by
// its first read, holds commit; one that never read holds nothing. A
// writable one answers true: each of its statements sees every commit
// before it.
func (t *tx) Sees(commit uint64) bool {
	switch {
	case t.writable:
		return true
	case t.snap == nil:
		return false
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

// Listen calls fn with the notices of the transactions that commit after
// it returns. It holds a connection of its own, out of the pool, until
// stop.
func (s *Store) Listen(fn func(kv.Notice, error) bool) (stop func(), err error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("postgres: listen: %w", kv.ErrTxClosed)
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
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer conn.Close(context.Background())
		for {
			nt, err := conn.WaitForNotification(ctx)
			if err != nil {
				if ctx.Err() == nil {
					fn(kv.Notice{}, dbErr("listen", err))
				}
				return
			}
			if nt.Channel != ch {
				continue
			}
			n, err := parseNotice(nt.Payload)
			if err != nil {
				// Damaged, or from another version: promising every
				// notice is over.
				fn(kv.Notice{}, err)
				return
			}
			if !fn(n, nil) {
				return
			}
		}
	}()
	return func() { cancel(); <-done }, nil
}
