package pgtest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy stands between a test's stores and the test server, on a Unix
// socket of its own, and forwards the protocol's messages one by one, so
// that it can lose a connection exactly where a test says: around a
// COMMIT. It reads the messages as PostgreSQL frames them (a type byte
// and a length), so it knows a COMMIT by its text (a simple query, or
// the Bind of a statement prepared from it) on the way to the server and
// by its CommandComplete on the way back. A store's transaction sent in
// one batch has no COMMIT: the server commits it at the batch's end (its
// Sync), answering ReadyForQuery, idle. Its commit marker's insert (into
// storh_commits) stands for the COMMIT on the way to the server, and that
// ReadyForQuery after it on the way back.
type Proxy struct {
	// URL is the server's URL with the proxy's socket for its host.
	URL string

	dir    string
	server string // the server's socket
	ln     net.Listener

	mu      sync.Mutex
	links   map[*link]struct{} // every link made, closed when the proxy stops
	armed   Cut
	refuse  bool // with the armed cut: refuse every connection after it
	refused bool
	cuts    int
	wg      sync.WaitGroup
}

// Cut says where a connection is lost.
type Cut int

const (
	// AfterCommit loses the connection once the server has carried out a
	// COMMIT, before its answer reaches the client: the transaction is
	// committed and the client cannot know.
	AfterCommit Cut = iota + 1
	// BeforeCommit loses the connection as the client sends a COMMIT,
	// which never reaches the server (the statements before it do): the
	// server sees its client go and rolls the transaction back.
	BeforeCommit
	// BeforeCommitServerWaits is BeforeCommit with the server's side of
	// the connection left open, as when the network between them fails:
	// the server's backend goes on waiting inside its transaction, whose
	// status stays "in progress", until it is ended.
	BeforeCommitServerWaits
)

// NewProxy starts a proxy in front of the server at serverURL (one of
// URL's or SchemaURL's), stopped when t ends.
func NewProxy(t testing.TB, serverURL string) *Proxy {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	q := u.Query()
	port := q.Get("port")
	if port == "" {
		port = "5432"
	}
	// Not t.TempDir: a socket's path must stay within about 100 bytes.
	dir, err := os.MkdirTemp("", "pgproxy-")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{dir: dir, server: filepath.Join(q.Get("host"), ".s.PGSQL."+port), links: map[*link]struct{}{}}
	if p.ln, err = net.Listen("unix", filepath.Join(dir, ".s.PGSQL."+port)); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("pgtest: proxy: %v", err)
	}
	q.Set("host", dir)
	u.RawQuery = q.Encode()
	p.URL = u.String()
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.stop)
	return p
}

// Arm makes the proxy lose the next connection that reaches cut; with
// refuse, every connection is closed then and new ones refused, as when
// the server becomes unreachable.
func (p *Proxy) Arm(cut Cut, refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.refuse = cut, refuse
}

// Cuts reports how many connections the proxy has lost as armed.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

func (p *Proxy) stop() {
	p.ln.Close()
	p.mu.Lock()
	p.refused = true
	for l := range p.links {
		l.close(true)
	}
	p.mu.Unlock()
	p.wg.Wait()
	os.RemoveAll(p.dir)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refused := p.refused
		p.mu.Unlock()
		if refused {
			c.Close()
			continue
		}
		s, err := net.Dial("unix", p.server)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{p: p, client: c, server: s, commits: map[string]bool{}}
		p.mu.Lock()
		if p.refused {
			p.mu.Unlock()
			l.close(true)
			continue
		}
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go l.fromClient()
	}
}

// take reports whether the armed cut is cut, disarming it, and refuses
// every connection from then if it was armed so.
func (p *Proxy) take(cut Cut) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed != cut {
		return false
	}
	p.armed = 0
	p.cuts++
	if p.refuse {
		p.refused = true
		for l := range p.links {
			l.close(true)
		}
	}
	return true
}

// link is one client connection and its connection to the server.
type link struct {
	p              *Proxy
	client, server net.Conn
	closeOnce      sync.Once
	// commits holds the names of the statements the client prepared from
	// a COMMIT or a commit marker's insert; only fromClient uses it.
	commits map[string]bool
	// marked: the client sent a commit marker's insert since the server
	// last said it was ready.
	marked atomic.Bool
}

// close closes the client's side, and the server's with server.
func (l *link) close(server bool) {
	l.closeOnce.Do(func() { l.client.Close() })
	if server {
		l.server.Close()
	}
}

// Codes of the untyped messages that open a connection.
const (
	sslRequest    = 80877103
	gssEncRequest = 80877104
)

// fromClient forwards the client's messages until either side goes. It
// starts the other direction once the client has sent its startup
// message.
func (l *link) fromClient() {
	defer l.p.wg.Done()
	defer l.close(false)
	for {
		msg, err := readUntyped(l.client)
		if err != nil {
			l.close(true)
			return
		}
		if _, err := l.server.Write(msg); err != nil {
			l.close(true)
			return
		}
		if code := binary.BigEndian.Uint32(msg[4:]); code == sslRequest || code == gssEncRequest {
			// The server answers with one byte; 'N' (refused) and the
			// client goes on in the clear.
			var answer [1]byte
			if _, err := io.ReadFull(l.server, answer[:]); err != nil || answer[0] != 'N' {
				l.close(true)
				return
			}
			if _, err := l.client.Write(answer[:]); err != nil {
				l.close(true)
				return
			}
			continue
		}
		break
	}
	l.p.wg.Add(1)
	go l.fromServer()
	for {
		msg, err := readTyped(l.client)
		if err != nil {
			l.close(true)
			return
		}
		if l.commitFrom(msg) {
			for _, cut := range []Cut{BeforeCommit, BeforeCommitServerWaits} {
				if l.p.take(cut) {
					l.close(cut == BeforeCommit)
					return
				}
			}
		}
		if _, err := l.server.Write(msg); err != nil {
			l.close(true)
			return
		}
	}
}

// commitFrom reports whether the client's message msg makes the server
// carry out a COMMIT: a simple query of one, or the Bind of a statement
// prepared from one.
func (l *link) commitFrom(msg []byte) bool {
	body := msg[5:]
	switch msg[0] {
	case 'Q':
		return isCommit(cstring(body))
	case 'P':
		name := cstring(body)
		query := cstring(body[len(name)+1:])
		l.commits[name] = isCommit(query) || isMarker(query)
	case 'B':
		portal := cstring(body)
		if l.commits[cstring(body[len(portal)+1:])] {
			l.marked.Store(true)
			return true
		}
	}
	return false
}

// fromServer forwards the server's messages until either side goes.
func (l *link) fromServer() {
	defer l.p.wg.Done()
	for {
		msg, err := readTyped(l.server)
		if err != nil {
			l.close(false)
			return
		}
		committed := msg[0] == 'C' && cstring(msg[5:]) == "COMMIT"
		if msg[0] == 'Z' && l.marked.Swap(false) && len(msg) > 5 && msg[5] == 'I' {
			committed = true // the end of a batch that was its own transaction
		}
		if committed && l.p.take(AfterCommit) {
			l.close(true)
			return
		}
		if _, err := l.client.Write(msg); err != nil {
			return
		}
	}
}

// isMarker reports whether query inserts a store's commit marker.
func isMarker(query string) bool {
	return strings.HasPrefix(query, "INSERT INTO ") && strings.Contains(query, `"storh_commits" (token, xid)`)
}

func isCommit(query string) bool {
	return strings.EqualFold(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(query), ";")), "COMMIT")
}

// cstring is b up to its first NUL.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// maxMessage bounds a message the proxy reads: the tests' are far
// smaller, and a bad length must not allocate gigabytes.
const maxMessage = 1 << 30

// readUntyped reads a message without a type byte (the ones that open a
// connection): its length, then the rest.
func readUntyped(r io.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n < 8 || n > maxMessage {
		return nil, fmt.Errorf("pgtest: proxy: a startup message of %d bytes", n)
	}
	msg := make([]byte, n)
	copy(msg, head[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

// readTyped reads a message: its type byte, its length, then the rest.
func readTyped(r io.Reader) ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > maxMessage {
		return nil, errors.New("pgtest: proxy: a message of a bad length")
	}
	msg := make([]byte, 1+n)
	copy(msg, head[:])
	_, err := io.ReadFull(r, msg[5:])
	return msg, err
}
