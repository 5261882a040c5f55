package main

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// notifyWriter collects what is written and signals when a line containing
// want appears.
type notifyWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
	once sync.Once
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestTailFollow follows a log while other "processes" (in-process runs
// that open and close the file, as storh put does) append to it, through a
// poll that finds the file locked; then it is interrupted and exits 0.
func TestTailFollow(t *testing.T) {
	db := filepath.Join(t.TempDir(), "follow.db")
	put := func(stdin string, args ...string) {
		t.Helper()
		if _, stderr, code := runStorh(context.Background(), stdin, append([]string{"--db", db, "-q", "put", "events"}, args...)...); code != 0 {
			t.Fatalf("put: %s", stderr)
		}
	}
	put("", "--log", `{"n":1}`)
	put("", `{"n":2}`)

	stderr := &notifyWriter{want: "locked by a writer", seen: make(chan struct{})}
	expect, stop := followTail(t, stderr, "--db", db, "tail", "events", "-f", "-n", "1", "--interval", "2ms")
	expect(`"data":{"n":2}`) // the last record, then only new ones
	put("", `{"n":3}`)
	expect(`"data":{"n":3}`)
	put("{\"n\":4}\n{\"n\":5}\n")
	expect(`"data":{"n":4}`)
	expect(`"data":{"n":5}`)

	// A writer holds the file: polls wait, and go on once it closes.
	holder, err := bolt.Open(db, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-stderr.seen
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	put("", `{"n":6}`)
	expect(`"data":{"n":6}`)

	if code := stop(); code != exitOK { // Ctrl-C
		t.Errorf("interrupted tail -f exit code %d, want 0; stderr:\n%s", code, stderr.buf.String())
	}
}

// TestTailFollowStartsLocked: tail -f started while another process has
// the file open for writing (a storh serve --write) does not fail: it says
// once that it waits, and prints the last records once the file is free
// (following on from there is TestTailFollow's).
func TestTailFollowStartsLocked(t *testing.T) {
	db := filepath.Join(t.TempDir(), "follow.db")
	if _, stderr, code := runStorh(context.Background(), "", "--db", db, "-q", "put", "events", "--log", `{"n":1}`); code != 0 {
		t.Fatalf("put: %s", stderr)
	}
	serve, url, _ := serveProcess(t, db, "--write")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, outW := io.Pipe()
	stderr := &notifyWriter{want: "locked by a writer", seen: make(chan struct{})}
	a := newApp(ctx, strings.NewReader(""), outW, stderr, func(string) string { return "" })
	done := make(chan int, 1)
	go func() {
		root := a.rootCmd()
		root.SetArgs([]string{"--db", db, "--timeout", "20ms", "tail", "events", "-f", "-n", "1", "--interval", "10ms"})
		cmd, err := root.ExecuteC()
		code := exitOK
		if err != nil {
			code = a.report(cmd, err)
		}
		outW.Close()
		done <- code
	}()
	select {
	case <-stderr.seen:
	case code := <-done:
		t.Fatalf("tail -f beside serve --write exited %d before waiting:\n%s", code, stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("tail -f did not say it waits within 20s:\n%s", stderr)
	}
	// Written while tail -f waits: the last record once it can open.
	expectStatus(t, 200, "PUT", url+"api/collections/events/records/"+uuidv7.New().String(), "", `{"n":2}`)
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := serve.Wait(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("tail -f ended before %s: %v\n%s", want, lines.Err(), stderr)
		}
		if !strings.Contains(lines.Text(), want) {
			t.Fatalf("tail -f printed %s, want a record with %s", lines.Text(), want)
		}
	}
	expect(`"data":{"n":2}`)

	cancel()
	go io.Copy(io.Discard, out)
	if code := <-done; code != exitOK {
		t.Errorf("interrupted tail -f exit code %d, want 0; stderr:\n%s", code, stderr)
	}
	if got, want := stderr.String(), "storh: "+db+" is locked by a writer; waiting for it to close the file\n"; got != want {
		t.Errorf("tail -f said:\n%s\nwant once:\n%s", got, want)
	}
}

// followTail runs a tail -f command line in-process, its stderr to stderr.
// expect reads its next line and wants it to hold a text; stop interrupts
// it as Ctrl-C does and returns its exit code.
func followTail(t *testing.T, stderr io.Writer, args ...string) (expect func(want string), stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out, outW := io.Pipe()
	a := newApp(ctx, strings.NewReader(""), outW, stderr, func(string) string { return "" })
	done := make(chan int)
	go func() {
		root := a.rootCmd()
		root.SetArgs(args)
		cmd, err := root.ExecuteC()
		code := exitOK
		if err != nil {
			code = a.report(cmd, err)
		}
		outW.Close()
		done <- code
	}()
	lines := bufio.NewScanner(out)
	expect = func(want string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("tail -f ended before %s: %v; stderr: %s", want, lines.Err(), stderr)
		}
		if !strings.Contains(lines.Text(), want) {
			t.Fatalf("tail -f printed %s, want a record with %s", lines.Text(), want)
		}
	}
	stop = func() int {
		cancel()
		go io.Copy(io.Discard, out)
		return <-done
	}
	return expect, stop
}
