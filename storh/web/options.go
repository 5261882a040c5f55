package web

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Defaults of the options.
const (
	// DefaultMaxPage is the most records one page returns, unless
	// WithMaxPage says otherwise.
	DefaultMaxPage = 1000
	// DefaultMaxBody is the largest request body accepted (1 MiB), unless
	// WithMaxBody says otherwise.
	DefaultMaxBody = 1 << 20
	// DefaultTimeout bounds the time of one request, unless WithTimeout
	// says otherwise.
	DefaultTimeout = 30 * time.Second
	// DefaultTailLimit bounds the time of one live tail, unless
	// WithTailLimit says otherwise.
	DefaultTailLimit = time.Hour
	// DefaultMaxImport is the largest body an import accepts (256 MiB),
	// unless WithMaxImport says otherwise.
	DefaultMaxImport = 256 << 20
	// defaultHeartbeat is how often a quiet tail sends a comment, so that
	// proxies and load balancers that close idle connections keep it, and
	// so that a client that went away is noticed by a failed write.
	defaultHeartbeat = 15 * time.Second
)

// Option configures Handler.
type Option func(*config)

type config struct {
	token   string
	writes  bool
	maxPage int
	maxBody int64
	timeout time.Duration
	// tailLimit bounds a tail instead of timeout; 0 is no bound.
	tailLimit time.Duration
	maxImport int64
	// heartbeat is a field, not an exported option, so that tests can
	// shorten it (export_test.go) without giving applications a knob
	// that only matters to tests.
	heartbeat time.Duration
	// hosts holds the names of WithAllowedHosts (hostOf's form), nil when
	// the option is not given: then every Host is served.
	hosts map[string]bool
	// bad is the first unusable option value, which Handler panics with.
	bad error
}

func (c *config) fail(err error) {
	if c.bad == nil {
		c.bad = err
	}
}

// WithToken makes every request show token as a bearer token
// (Authorization: Bearer <token>); a request without it, or with another,
// gets 401. An empty token is refused: it would read as "protected" while
// letting everyone in; leave the option out for no token.
func WithToken(token string) Option {
	return func(c *config) {
		if token == "" {
			c.fail(errors.New(`web: WithToken(""): an empty token would let everyone in; leave the option out for no token`))
		}
		c.token = token
	}
}

// WithWrites enables the endpoints that change data (PUT, PATCH and DELETE
// of a record, import, PUT and DELETE of a collection's schema, and the
// queue's enqueue, claims, job actions, cancel, purge and options). Without it they answer 403: a handler mounted to look at a
// store cannot change it by accident.
func WithWrites() Option {
	return func(c *config) { c.writes = true }
}

// WithMaxPage sets the most records one page returns (default
// DefaultMaxPage). A larger limit parameter is lowered to it, not refused,
// so a client that asks for much gets a full page and a cursor.
func WithMaxPage(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail(fmt.Errorf("web: WithMaxPage(%d): a page holds at least one record", n))
		}
		c.maxPage = n
	}
}

// WithMaxBody sets the largest request body accepted, in bytes (default
// DefaultMaxBody). A larger body gets 413 before it is decoded.
func WithMaxBody(bytes int64) Option {
	return func(c *config) {
		if bytes < 1 {
			c.fail(fmt.Errorf("web: WithMaxBody(%d): the limit must be positive", bytes))
		}
		c.maxBody = bytes
	}
}

// WithTimeout bounds the time of one request (default DefaultTimeout): its
// context gets that deadline, and a read still running then stops and
// answers 503. It covers exports, imports and verify too (raise it for
// large stores), but not a live tail, which WithTailLimit bounds.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail(fmt.Errorf("web: WithTimeout(%v): the timeout must be positive", d))
		}
		c.timeout = d
	}
}

// WithTailLimit bounds the time of one live tail (default
// DefaultTailLimit; 0 is no bound). A tail is meant to stay open, so
// WithTimeout does not apply to it; at the limit the stream ends with an
// error event, and an EventSource reconnects and resumes from the last id
// it received. The bound keeps a forgotten browser tab from holding a
// watch for ever.
func WithTailLimit(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail(fmt.Errorf("web: WithTailLimit(%v): the limit must be positive, or 0 for none", d))
		}
		c.tailLimit = d
	}
}

// WithMaxImport sets the largest body an import (or a queue's enqueue)
// accepts, in bytes (default DefaultMaxImport). It is apart from
// WithMaxBody, whose limit is for one record: an import is a whole
// collection. The body is held in
// memory while it is imported (see docs/web.md), so this is also the
// memory one import may take.
func WithMaxImport(bytes int64) Option {
	return func(c *config) {
		if bytes < 1 {
			c.fail(fmt.Errorf("web: WithMaxImport(%d): the limit must be positive", bytes))
		}
		c.maxImport = bytes
	}
}

// WithAllowedHosts makes the handler serve only requests for one of hosts
// or for this machine's loopback: the request's Host, its port aside, must
// be one of hosts, localhost, or a loopback address (127.0.0.0/8, ::1).
// Any other gets 421 Misdirected Request before anything else is done, the
// page included. Without the option every Host is served.
//
// This is the defence against DNS rebinding: a web page of another site
// can make its own name resolve to 127.0.0.1 and then send requests to a
// server on loopback as if they were same-origin, and only the Host, which
// still names that site, tells them apart. A server on loopback without a
// token needs it (storh serve sets it there); a token also stops such
// pages, which do not know it.
//
// A host is a name or an address, compared without regard to case; a port
// given with it is ignored, as are the brackets of an IPv6 address.
// WithAllowedHosts() with no hosts serves loopback only. An empty host is
// refused (Handler panics).
func WithAllowedHosts(hosts ...string) Option {
	return func(c *config) {
		if c.hosts == nil {
			c.hosts = make(map[string]bool)
		}
		for _, h := range hosts {
			if h == "" {
				c.fail(errors.New(`web: WithAllowedHosts(""): an empty host; give names such as app.example, or addresses`))
				continue
			}
			c.hosts[hostOf(h)] = true
		}
	}
}

func newConfig(opts []Option) config {
	c := config{maxPage: DefaultMaxPage, maxBody: DefaultMaxBody, timeout: DefaultTimeout,
		tailLimit: DefaultTailLimit, maxImport: DefaultMaxImport, heartbeat: defaultHeartbeat}
	for _, opt := range opts {
		opt(&c)
	}
	return c
}

// RequireToken returns an error when a server listening on addr (host:port,
// or a bare host) would be reachable from other machines and token is
// empty. Only loopback addresses (127.0.0.0/8, ::1, and the name
// localhost) may go without a token. An empty host (":7070") listens on
// every interface, as do 0.0.0.0 and ::, so it needs one; so does any
// other host name, because what it resolves to is not known here (and may
// change).
func RequireToken(addr, token string) error {
	if token != "" || loopback(addr) {
		return nil
	}
	return fmt.Errorf("web: listening on %q reaches beyond this machine: give a token, or listen on a loopback address such as 127.0.0.1:7070", addr)
}

// loopback reports whether addr (host:port, or a bare host) names this
// machine's loopback: localhost, or a loopback address.
func loopback(addr string) bool {
	host := hostOf(addr)
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// hostOf is the host of a host:port or of a bare host, without the
// brackets of an IPv6 address, in lower case: the form in which hosts are
// compared.
func hostOf(addr string) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}
