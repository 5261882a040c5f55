//go:build !storh_nopostgres

package storh

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/postgres"
)

// openPostgres opens the PostgreSQL backend. Errors and Path name the
// server by its URL without its passwords.
func openPostgres(rawURL string, o engine.Options) (*DB, error) {
	name := Redact(rawURL)
	if opt := fileOption(o); opt != "" {
		return nil, &Error{Op: "open", Path: name, Index: -1, Err: fmt.Errorf("%w: %s sets up a database file", ErrUnsupported, opt),
			Hint: "drop the option for a PostgreSQL store: the server has its own settings for locks, size and durability"}
	}
	if o.UnsafeNoSync {
		rawURL = withoutSync(rawURL)
	}
	store, err := postgres.Open(context.Background(), rawURL)
	if err != nil {
		return nil, &Error{Op: "open", Path: name, Index: -1, Err: err,
			Hint: "check that the server runs and the URL's user, database and search_path are right"}
	}
	eng, err := engine.OpenStore(store, name, o)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, &Error{Op: "open", Path: name, Index: -1, Err: err}
	}
	return &DB{eng: eng}, nil
}

// fileOption names the first option in o that only a database file has.
func fileOption(o engine.Options) string {
	switch {
	case o.LockTimeout != 0:
		return "WithLockTimeout"
	case o.InitialMmapSize != 0:
		return "WithInitialMmapSize"
	case o.MaxSize != 0:
		return "WithMaxSize"
	case o.FileMode != 0:
		return "WithFileMode"
	}
	return ""
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
