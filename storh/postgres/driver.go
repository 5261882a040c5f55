package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/storhdb/storh-go/storh/internal/backend"
	"github.com/storhdb/storh-go/storh/internal/connstr"
	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/kv"
)

// Importing the package registers its URL schemes with storh.Open, as a
// database/sql driver registers its name.
func init() {
	backend.Register("postgres", Driver{})
	backend.Register("postgresql", Driver{})
}

// Driver opens PostgreSQL stores for storh.Open, which reaches it through
// the schemes postgres:// and postgresql:// this package registers.
type Driver struct{}

var (
	_ kv.Driver     = Driver{}
	_ kv.SameStorer = Driver{}
)

// OpenURL opens the store at rawURL. It refuses the options that set up a
// database file: the server has its own settings for locks, size and
// durability. NoSync sets synchronous_commit=off for the connections;
// ReadOnly and ReadURL are WithReadOnly and WithReadURL. Errors are storh
// errors naming the server without its passwords.
func (Driver) OpenURL(ctx context.Context, rawURL string, opts kv.OpenOptions) (kv.Store, error) {
	name := connstr.Redact(rawURL)
	if len(opts.FileOptions) > 0 {
		return nil, &errs.Error{Op: "open", Path: name, Index: -1, Err: fmt.Errorf("%w: %s sets up a database file", errs.ErrUnsupported, opts.FileOptions[0]),
			Hint: "drop the option for a PostgreSQL store: the server has its own settings for locks, size and durability"}
	}
	if opts.NoSync {
		rawURL = withoutSync(rawURL)
	}
	var with []Option
	if opts.ReadOnly {
		with = append(with, WithReadOnly())
	}
	if opts.ReadURL != "" {
		with = append(with, WithReadURL(opts.ReadURL))
	}
	store, err := Open(ctx, rawURL, with...)
	if err != nil {
		return nil, &errs.Error{Op: "open", Path: name, Index: -1, Err: err, Hint: openHint(err, opts.ReadOnly)}
	}
	return store, nil
}

// openHint says what to do about a failed Open.
func openHint(err error, readOnly bool) string {
	switch {
	case errors.Is(err, errs.ErrReadOnly):
		return "open a hot standby with storh.WithReadOnly, or open the primary with storh.WithReadURL(standby)"
	case errors.Is(err, errs.ErrInvalidOption):
		return "give storh.WithReadURL the URL of a hot standby of the primary, in the same database"
	case readOnly && errors.Is(err, errs.ErrNotFound):
		return "a read-only open needs an existing store: open it once without storh.WithReadOnly, on the primary, to create it"
	}
	return "check that the server runs and the URL's user, database and search_path are right"
}

// withoutSync adds synchronous_commit=off to the connection's settings:
// a commit returns before the server's WAL is flushed, so a crash of the
// server may lose the last commits (never part of one), which is what
// WithoutSync promises on a file.
func withoutSync(rawURL string) string {
	sep := "?"
	if strings.Contains(rawURL, "?") {
		sep = "&"
	}
	return rawURL + sep + "synchronous_commit=off"
}

// SameStore reports whether two URLs name one store: the same server,
// database and first schema of the search path. It can miss two spellings
// of one server (a host name and its address); storh.Migrate's check that
// the destination is empty catches those.
func (Driver) SameStore(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return target(ua) == target(ub)
}

// target is what names a store in a URL: server, database, and the first
// schema of the search path.
func target(u *url.URL) string {
	q := u.Query()
	host := u.Host
	if h := q.Get("host"); h != "" {
		host = h
	}
	db := strings.TrimPrefix(u.Path, "/")
	if d := q.Get("dbname"); d != "" {
		db = d
	}
	schema, _, _ := strings.Cut(q.Get("search_path"), ",")
	return host + "\x00" + q.Get("port") + "\x00" + db + "\x00" + strings.TrimSpace(schema)
}
