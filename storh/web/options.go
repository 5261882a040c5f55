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
)

// Option configures Handler.
type Option func(*config)

type config struct {
	token   string
	writes  bool
	maxPage int
	maxBody int64
	timeout time.Duration
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

// WithWrites enables the endpoints that change data (PUT and DELETE of a
// record). Without it they answer 403: a handler mounted to look at a
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
// answers 503.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail(fmt.Errorf("web: WithTimeout(%v): the timeout must be positive", d))
		}
		c.timeout = d
	}
}

func newConfig(opts []Option) config {
	c := config{maxPage: DefaultMaxPage, maxBody: DefaultMaxBody, timeout: DefaultTimeout}
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

func loopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
