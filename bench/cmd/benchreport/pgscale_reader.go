package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The feed reader of a storh+reader cell is one more worker process
// (contender "reader"): it follows the putfeed collection's Changes from
// the feed's last change before the cell while the writers write, as a
// consumer of the feed would, so that the cell measures what following
// costs the writers. On PostgreSQL a reader that meets a gap in the
// numbers (a writer that drew a smaller one still committing) takes the
// collection's lock alone for one statement, which makes the writers that
// arrive meanwhile wait.
//
// Its protocol extends the writers': "ready" once it is following, "go"
// starts its window (the writers'), and after the writers have ended the
// run sends "end N", N being the feed's last Seq then; the reader stops
// once it has received N and prints its account. The run checks the
// account against the records the cell added (readerResult).

// readerEnd starts the line that tells the reader where the feed ends.
const readerEnd = "end"

// readerAccount is what the reader reports.
type readerAccount struct {
	// Digest covers the ids of every change received; N is their count.
	Digest idDigest `json:"digest"`
	// InWindow counts the changes received between "go" and the end of
	// the writers' duration.
	InWindow int64 `json:"in_window"`
	// CatchUp is how long after the window's end the last change came.
	CatchUp time.Duration `json:"catch_up_ns"`
}

// idDigest sums a mix of each id's bits: two sets of ids of the same
// count have the same digest only if they are the same set (but for a
// collision of 64-bit sums, which a benchmark's check can live with). A
// sum, unlike a hash of a sequence, does not depend on order and can be
// subtracted: the records a cell added are the collection after it minus
// the collection before.
type idDigest struct {
	N   int64  `json:"n"`
	Sum uint64 `json:"sum"`
}

func (d *idDigest) add(id uuidv7.UUID) {
	d.N++
	d.Sum += mix64(binary.BigEndian.Uint64(id[:8]) ^ mix64(binary.BigEndian.Uint64(id[8:])))
}

func (d idDigest) minus(o idDigest) idDigest {
	return idDigest{N: d.N - o.N, Sum: d.Sum - o.Sum}
}

// mix64 is splitmix64's finalizer: every input bit moves about half the
// output bits, so that nearby ids (UUIDv7s of one millisecond differ in
// a few bits) do not sum to the same total in two different sets.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// feedFollower is the reader's state, shared by the goroutine that
// ranges over Changes and the one that talks to the run.
type feedFollower struct {
	mu       sync.Mutex
	acct     readerAccount
	last     uint64 // the Seq of the last change received
	lastAt   time.Time
	deadline time.Time // the window's end; zero before "go"
	target   uint64    // the feed's last Seq, once the run has said it
	reached  chan struct{}
	closed   bool
	seen     map[uuidv7.UUID]struct{}
}

// receive takes one change: it must come after the last in Seq order, be
// a put (the writers only insert), and carry an id not seen before.
func (f *feedFollower) receive(ev storh.ChangeEvent, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case ev.Seq <= f.last:
		return fmt.Errorf("change %d came after change %d", ev.Seq, f.last)
	case ev.Op != storh.OpPut:
		return fmt.Errorf("change %d is a %s; the writers only insert", ev.Seq, ev.Op)
	case ev.Record.ID != ev.ID:
		return fmt.Errorf("change %d is of id %s but holds the record of %s", ev.Seq, ev.ID, ev.Record.ID)
	}
	if _, dup := f.seen[ev.ID]; dup {
		return fmt.Errorf("change %d puts %s a second time", ev.Seq, ev.ID)
	}
	f.seen[ev.ID] = struct{}{}
	f.acct.Digest.add(ev.ID)
	f.last, f.lastAt = ev.Seq, now
	if !f.deadline.IsZero() && now.Before(f.deadline) {
		f.acct.InWindow++
	}
	f.reach()
	return nil
}

// reach closes reached once the target is received; f.mu is held.
func (f *feedFollower) reach() {
	if f.target > 0 && f.last >= f.target && !f.closed {
		f.closed = true
		close(f.reached)
	}
}

// follow is the reader's life: it returns its account, or the error that
// stopped it.
func (w *worker) follow(stdin *bufio.Reader, stdout io.Writer, after uint64) workerResult {
	var res workerResult
	err := w.followErr(stdin, stdout, after, &res)
	if err != nil {
		res.Err = err.Error()
	}
	return res
}

func (w *worker) followErr(stdin *bufio.Reader, stdout io.Writer, after uint64, res *workerResult) error {
	var err error
	if w.db, err = storh.Open(w.url); err != nil {
		return err
	}
	defer w.db.Close()
	docs, err := w.db.Docs(w.name, storh.WithoutCreate())
	if err != nil {
		return err
	}
	// Warm up as the writers do: a first read opens the connections.
	if _, err := docs.LastSeq(); err != nil {
		return err
	}
	f := &feedFollower{last: after, reached: make(chan struct{}), seen: map[uuidv7.UUID]struct{}{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var loopErr error
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for ev, err := range docs.Changes(ctx, after) {
			if err == nil {
				err = f.receive(ev, time.Now())
			}
			if err != nil {
				if ctx.Err() == nil {
					loopErr = err
				}
				return
			}
		}
	}()
	if _, err := fmt.Fprintln(stdout, workerReady); err != nil {
		return err
	}
	line, err := stdin.ReadString('\n')
	if err == nil && line != workerGo+"\n" {
		err = fmt.Errorf("expected %q from the run, got %q", workerGo, line)
	}
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.deadline = time.Now().Add(w.duration)
	f.mu.Unlock()

	line, err = stdin.ReadString('\n')
	if err != nil {
		return fmt.Errorf("waiting for %q: %w", readerEnd, err)
	}
	word, n, _ := strings.Cut(strings.TrimSpace(line), " ")
	target, err := strconv.ParseUint(n, 10, 64)
	if word != readerEnd || err != nil || target == 0 || target == math.MaxUint64 {
		return fmt.Errorf("expected %q and the feed's last Seq from the run, got %q", readerEnd, line)
	}
	f.mu.Lock()
	f.target = target
	f.reach()
	f.mu.Unlock()
	select {
	case <-f.reached:
	case <-loopDone:
		if loopErr == nil {
			loopErr = errors.New("Changes ended before the feed's last change")
		}
	}
	cancel()
	<-loopDone
	if loopErr != nil {
		return fmt.Errorf("following Changes after %d: %w", after, loopErr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	acct := f.acct
	if f.lastAt.After(f.deadline) {
		acct.CatchUp = f.lastAt.Sub(f.deadline)
	}
	res.Reader = &acct
	return nil
}
