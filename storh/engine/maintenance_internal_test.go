package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// doneAfterN is a context whose Err reports context.Canceled from its
// (n+1)th call on.
type doneAfterN struct {
	context.Context
	n, calls int
}

func (c *doneAfterN) Err() error {
	c.calls++
	if c.calls > c.n {
		return context.Canceled
	}
	return nil
}

// TestPageCheckDrainsOnCancel: when the context is done while bbolt's page
// check is reporting (a badly damaged file reports many findings), pageCheck
// stops reporting at the next check but reads the channel to its end, so
// the sending goroutine finishes (bbolt's would otherwise block forever,
// holding the transaction's pages), and returns the context's error.
func TestPageCheckDrainsOnCancel(t *testing.T) {
	const findings = 3*paceKeys + 10
	ch := make(chan error) // unbuffered, as bbolt's
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer close(ch)
		for i := range findings {
			ch <- fmt.Errorf("page %d: unreachable unfreed", i)
		}
	}()
	ctx := &doneAfterN{Context: context.Background(), n: 1}
	emitted := 0
	err := pageCheck(ch, func(Problem) { emitted++ }, newPace(ctx))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("pageCheck = %v; want context.Canceled", err)
	}
	if emitted != 2*paceKeys-1 || ctx.calls != 2 {
		t.Errorf("emitted %d findings asking %d times; want %d (up to the second check), asking twice", emitted, ctx.calls, 2*paceKeys-1)
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the checking goroutine is still blocked: pageCheck stopped reading")
	}
	// A live context reports everything; a nil pace too.
	for _, p := range []*pace{newPace(context.Background()), nil} {
		ch := make(chan error, 3)
		for i := range 3 {
			ch <- fmt.Errorf("finding %d", i)
		}
		close(ch)
		emitted = 0
		if err := pageCheck(ch, func(Problem) { emitted++ }, p); err != nil || emitted != 3 {
			t.Errorf("pageCheck with a live context = %v, %d findings; want nil, 3", err, emitted)
		}
	}
}
