package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the progress ticker and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProgressDraws checks the three bars: bytes of a file (with ETA),
// records of an export, and the spinner for stdin.
func TestProgressDraws(t *testing.T) {
	for _, tt := range []struct {
		name   string
		total  int64
		bytes  bool
		expect string
	}{
		{"file", 1000, true, "%"},
		{"export", 5000, false, "%"},
		{"stdin", -1, true, "records"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var w syncBuffer
			p := &progress{verb: "importing", total: tt.total, bytesT: tt.bytes, start: time.Now()}
			p.draw(&w)
			p.records.Store(2500)
			p.bytes.Store(500)
			p.update()
			out := w.String()
			p.stop()
			if !strings.Contains(out, "importing 2,500 records") || !strings.Contains(out, tt.expect) {
				t.Errorf("bar: %q", out)
			}
		})
	}
}

// TestNoProgressWithoutTerminal: a bar never goes to a pipe or file.
func TestNoProgressWithoutTerminal(t *testing.T) {
	a := newApp(context.Background(), strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, func(string) string { return "" })
	if p := a.startProgress("importing", 100, true); p.bar != nil {
		t.Error("a bar on a non-terminal stderr")
	}
}
