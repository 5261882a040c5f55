package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/web"
)

const (
	defaultServeAddr = "127.0.0.1:7070"
	envToken         = "STORH_TOKEN"
)

// Defaults of serve's timeouts (see serveConfig).
const (
	defaultHeaderTimeout = 10 * time.Second
	defaultIdleTimeout   = 2 * time.Minute
	// serveShutdownWait is how long requests running at SIGINT or SIGTERM
	// get to finish; the ones still running then are cancelled and cut.
	serveShutdownWait = 5 * time.Second
)

// serveConfig is what serve's flags ask for.
type serveConfig struct {
	addr, token string
	tokenFrom   string // where the token came from, for messages
	allowHosts  []string
	write       bool
	// headerTimeout bounds the time a client takes to send a request's
	// headers; requestTimeout a request's own time, its body included
	// (web.WithTimeout; a live tail has the handler's tail limit instead);
	// idleTimeout how long a kept-alive connection may wait for its next
	// request.
	headerTimeout, requestTimeout, idleTimeout time.Duration
}

func (a *app) serveCmd() *cobra.Command {
	var c serveConfig
	cmd := &cobra.Command{
		Use:   "serve [DB]",
		Short: "Serve a database's JSON API over HTTP, read-only unless --write",
		Long: `Serve opens DB (a database file or a postgres:// URL; --db and $STORH_DB
when DB is not given) and serves its JSON API (docs/web.md) at the root
of an HTTP server on --addr, until interrupted (Ctrl-C or SIGTERM: running
requests get 5s to finish, then the database is closed; exit code 0).
When it listens it prints the address and a curl command on stderr (with
--json, {"addr":…,"url":…} on stdout instead).

Security: the API is read-only unless --write, which enables its writes:
PUT, PATCH and DELETE of records, imports, schemas, and a queue's enqueues,
claims and job actions (a collection is created only by an import that
asks for it, or by a queue's first enqueue). A token (--token, or
$STORH_TOKEN when --token is not given) makes every request send
Authorization: Bearer TOKEN, compared in constant time; without it, 401.
An --addr that is not loopback (127.0.0.1, ::1, localhost) needs a token:
serve refuses to start without one. Prefer $STORH_TOKEN to --token, which
other users can see in the process list. The token is never printed.
On a loopback --addr serve answers only requests for localhost or a
loopback address (any port), and for the hosts given with --allow-host;
others get 421, so that a web page cannot reach it by making its own name
resolve to 127.0.0.1 (DNS rebinding). Elsewhere --allow-host limits the
hosts served the same way.

Limits: a client has --header-timeout to send a request's headers, and a
request (its body included) --request-timeout to end: a body that has not
arrived by then is 408, and the connection is closed. An idle connection
is closed after --idle-timeout. A live tail is bounded by the handler (one
hour), not by --request-timeout.

A file is opened read-only unless --write, with bbolt's shared lock: other
processes can still read it (storh count, query…), but none can write it
while serve runs. With --write serve takes the exclusive lock, which keeps
every other process out. For the same reason serve cannot open a file that
a running program holds for writing (it waits --timeout, then fails): mount
the handler of package storh/web in that program instead. DB must exist; serve never creates one.`,
		Example: `  storh serve app.db
  STORH_TOKEN="$(cat ~/.storh-token)" storh serve --addr :7070 app.db
  storh serve --write --addr 127.0.0.1:0 app.db
  storh serve 'postgres://app@db.internal/app?search_path=storh'`,
		Args: args(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if a.dbGiven {
					return usagef("serve takes its database as DB or as --db, not both")
				}
				a.dbPath = args[0]
			}
			c.tokenFrom = "--token"
			if !cmd.Flags().Changed("token") {
				c.token, c.tokenFrom = a.getenv(envToken), envToken
			}
			return a.serve(c)
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.addr, "addr", defaultServeAddr, "listen on `HOST:PORT` (port 0: any free port, printed)")
	f.StringVar(&c.token, "token", "", "require this bearer token (default $"+envToken+"); needed off loopback")
	f.StringArrayVar(&c.allowHosts, "allow-host", nil, "also serve requests for host `NAME` (repeatable); on loopback only localhost and loopback addresses are served without it")
	f.BoolVar(&c.write, "write", false, "open the database for writing and allow the API's writes: records, imports, schemas, queue jobs")
	f.DurationVar(&c.headerTimeout, "header-timeout", defaultHeaderTimeout, "a client must send a request's headers within `D`")
	f.DurationVar(&c.requestTimeout, "request-timeout", web.DefaultTimeout, "a request, its body included, must end within `D` (not a live tail)")
	f.DurationVar(&c.idleTimeout, "idle-timeout", defaultIdleTimeout, "close a connection idle for `D`")
	return cmd
}

// serveInfo is what serve prints with --json when it listens.
type serveInfo struct {
	Addr     string `json:"addr"`
	URL      string `json:"url"`
	Database string `json:"database"`
	Write    bool   `json:"write"`
	Token    bool   `json:"token"`
}

// serve checks the address and token, opens the database, and serves its
// API until the context ends.
func (a *app) serve(c serveConfig) error {
	addr, token, write := c.addr, c.token, c.write
	for _, t := range []struct {
		flag string
		d    time.Duration
	}{{"--header-timeout", c.headerTimeout}, {"--request-timeout", c.requestTimeout}, {"--idle-timeout", c.idleTimeout}} {
		if t.d <= 0 {
			return usagef("%s %v: must be positive", t.flag, t.d)
		}
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usagef("--addr %q: %s: give HOST:PORT, such as %s", addr, strings.TrimPrefix(err.Error(), "address "+addr+": "), defaultServeAddr)
	}
	if token != strings.TrimSpace(token) {
		// The handler trims what a request sends, so it could never match.
		return usagef("the token of %s starts or ends with white space, which a bearer token cannot carry", c.tokenFrom)
	}
	if web.RequireToken(addr, token) != nil {
		return usagef("--addr %s reaches beyond this machine, so serve needs a token: set %s (or pass --token), or listen on a loopback address such as %s",
			addr, envToken, defaultServeAddr)
	}
	for _, h := range c.allowHosts {
		if strings.TrimSpace(h) == "" {
			return usagef("--allow-host %q: give a host name or address, such as storh.internal", h)
		}
	}
	db, _, err := a.openExisting(write)
	if err != nil {
		return err
	}
	opts := []web.Option{web.WithTimeout(c.requestTimeout)}
	if token != "" {
		opts = append(opts, web.WithToken(token))
	}
	// On loopback, any web page the user opens could rebind its own name
	// to 127.0.0.1 and reach the server: only the Host tells its requests
	// apart. Elsewhere a token is required, which such pages do not know,
	// so the Host is checked only when hosts are given.
	if onLoopback := web.RequireToken(addr, "") == nil; onLoopback || len(c.allowHosts) > 0 {
		opts = append(opts, web.WithAllowedHosts(c.allowHosts...))
	}
	if write {
		opts = append(opts, web.WithWrites())
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(a.ctx, "tcp", addr)
	if err != nil {
		db.Close()
		return fmt.Errorf("serve: %w", err)
	}
	// Requests run under their own base context, not a.ctx: a signal lets
	// them finish (Shutdown), and only the ones still running after
	// serveShutdownWait are cancelled.
	base, cancelRequests := context.WithCancel(context.Background())
	defer cancelRequests()
	// ReadTimeout bounds the reading of every request from its first byte,
	// even one whose body no route reads; it is the headers' time and the
	// request's, so it never runs out before the handler's own deadline,
	// which bounds the body of a request the handler reads (408) and its
	// work (503). A tail clears it. There is no WriteTimeout: it would cut
	// the long responses the handler allows (an export, a tail).
	srv := &http.Server{
		Handler:           web.Handler(db, opts...),
		ReadHeaderTimeout: c.headerTimeout,
		ReadTimeout:       c.headerTimeout + c.requestTimeout,
		IdleTimeout:       c.idleTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          log.New(a.stderr, errorPrefix+"http: ", 0),
	}
	if err := a.announce(boundAddr(addr, ln.Addr()), token != "", write); err != nil {
		ln.Close()
		db.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var serveErr error
	select {
	case <-a.ctx.Done():
	case serveErr = <-served:
	}
	ctx, cancel := context.WithTimeout(context.Background(), serveShutdownWait)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		cancelRequests()
		srv.Close()
	}
	if serveErr == nil {
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	}
	closeErr := db.Close()
	switch {
	case serveErr != nil:
		return fmt.Errorf("serve: %w", serveErr)
	case closeErr != nil:
		return fmt.Errorf("serve: closing the database %s: %s", storh.Redact(a.dbPath), libMsg(closeErr))
	}
	return nil
}

// boundAddr is the address asked for with the port bound in place of 0:
// the host as given (Go reports 0.0.0.0 as [::], a name as its address),
// or the bound one when none was given.
func boundAddr(asked string, bound net.Addr) string {
	host, _, _ := net.SplitHostPort(asked)
	bhost, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return bound.String()
	}
	if host == "" {
		host = bhost
	}
	return net.JoinHostPort(host, port)
}

// announce says where the API listens and how to reach it: a note on
// stderr, or a JSON line on stdout with --json. The token is never shown.
func (a *app) announce(addr string, token, write bool) error {
	url := "http://" + addr + "/"
	if a.jsonOut {
		return a.printJSON(serveInfo{Addr: addr, URL: url, Database: storh.Redact(a.dbPath), Write: write, Token: token})
	}
	mode := "read-only"
	if write {
		mode = "read-write"
	}
	auth := ""
	if token {
		auth = `-H "Authorization: Bearer $` + envToken + `" `
	}
	a.diag("storh: serving %s %s at %s (Ctrl-C stops); try: curl %s%sapi/collections", storh.Redact(a.dbPath), mode, url, auth, url)
	return nil
}
