package engine

import (
	"sync"
	"time"
)

// signals wakes the goroutines waiting for jobs of a queue (ClaimWait): a
// waiter takes the queue's current channel before it looks for a job, and
// a commit that made jobs pending closes that channel and starts a new one,
// so a wake between the look and the wait is never lost. Only this process
// is woken: another process's enqueues are found at the next lease end or
// when the waiter's context ends.
type signals struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

// Wait returns the channel that the next wake of queue name closes.
func (s *signals) wait(name string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = map[string]chan struct{}{}
	}
	c, ok := s.ch[name]
	if !ok {
		c = make(chan struct{})
		s.ch[name] = c
	}
	return c
}

func (s *signals) wake(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.ch[name]; ok {
		close(c)
		delete(s.ch, name)
	}
}

// wakeAll wakes every waiter.
func (s *signals) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, c := range s.ch {
		close(c)
		delete(s.ch, name)
	}
}

// JobSignal returns a channel closed by the next commit that makes jobs of
// queue name pending.
func (db *DB) JobSignal(name string) <-chan struct{} { return db.signals.wait(name) }

// Now is the database's clock.
func (db *DB) Now() time.Time {
	if db.opts.Clock != nil {
		return db.opts.Clock()
	}
	return time.Now()
}

// wake marks queue c for waking when this transaction commits.
func (t *Tx) wake(c *Coll) {
	if t.woken == nil {
		t.woken = map[string]struct{}{}
	}
	t.woken[c.Name] = struct{}{}
}

// Closing is closed when Close starts: a goroutine waiting for something
// the database would do (ClaimWait, Watch) stops waiting.
func (db *DB) Closing() <-chan struct{} { return db.lifecycle.closing }
