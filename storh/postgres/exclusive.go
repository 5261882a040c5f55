package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/storhdb/storh-go/storh/kv"
)

var _ kv.Exclusive = (*Store)(nil)

// TryExclusive takes the session-level advisory lock of name
// (pg_try_advisory_lock) on a connection it keeps out of the pool until
// release: every Store on the schema, in this process or another, is
// refused it meanwhile, and a process that dies loses it with its
// connection. release unlocks and returns the connection; when the unlock
// fails (the connection broke), it closes the connection, which ends the
// session and so the lock.
func (s *Store) TryExclusive(name string) (release func(), ok bool, err error) {
	if s.closed.Load() {
		return nil, false, fmt.Errorf("postgres: exclusive: %w", kv.ErrTxClosed)
	}
	if s.readOnly {
		return nil, false, fmt.Errorf("postgres: exclusive: %w: the store was opened read-only", kv.ErrTxNotWritable)
	}
	conn, err := s.pool.Acquire(s.ctx)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: exclusive: %w", err)
	}
	key := s.exclusiveKey(name)
	if err := conn.QueryRow(s.ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		conn.Release()
		return nil, false, dbErr("exclusive", err)
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	return func() {
		// A bounded wait: a stuck unlock must not hold up Close.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			conn.Hijack().Close(ctx)
			return
		}
		conn.Release()
	}, true, nil
}

// exclusiveKey is the advisory lock key of TryExclusive's name, apart from
// the bucket keys (lockKey) and the watch keys (watchKey) by its tag byte.
func (s *Store) exclusiveKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(s.schema))
	h.Write([]byte{2})
	h.Write([]byte(name))
	return int64(h.Sum64())
}
