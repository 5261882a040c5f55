package storh

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/backend"
	"github.com/storhdb/storh-go/storh/internal/connstr"
	"github.com/storhdb/storh-go/storh/kv"
)

// MigrateReport is what Migrate did and found: the source and destination
// (a URL without its password), where an earlier run had stopped
// (ResumedAt, empty when this run started the migration), what this run
// copied (Copied), and the store as verified on both sides: buckets, keys
// and bytes of keys and values, collections, records, and the SHA-256 of
// the ordered stream of every entry. The fields: Source, Destination,
// ResumedAt, Copied (a MigrateProgress), Buckets, Keys, Bytes,
// Collections, Records and Checksum.
type MigrateReport = api.CopyReport

// MigrateProgress counts a migration's work for WithMigrateProgress: in
// Phase "copy" what this run has copied, in Phase "verify" what the
// verification has compared. TotalRecords is the source's records;
// ResumedRecords those an earlier run copied, as far as whole collections
// tell. The counts: Batches, Buckets (nested ones), Keys (holding values),
// Bytes (of keys and values) and Records (the records among Keys).
type MigrateProgress = api.CopyProgress

// MigrateMismatch is the first difference the verification at the end of a
// migration found: the entry (its keys from the top level down), the
// collection it belongs to, and how it differs. It wraps ErrMismatch; get it
// with errors.As.
type MigrateMismatch = errs.MismatchError

// ErrMismatch is returned by Migrate when the destination differs from the
// source at the end (the source was written while it was migrated, or the
// destination was: see MigrateMismatch). A source that is itself an
// unfinished migration's destination fails to open, with
// ErrUnfinishedMigration.
var ErrMismatch = errs.ErrMismatch

// MigrateOption configures Migrate.
type MigrateOption func(*migrateConfig) error

type migrateConfig struct {
	copy        engine.CopyOptions
	lockTimeout time.Duration
}

// WithMigrateProgress calls fn with the counts so far: once before the
// copy, after every batch, and every few thousand entries of the
// verification. fn runs on Migrate's goroutine, so a slow fn slows the
// migration.
func WithMigrateProgress(fn func(MigrateProgress)) MigrateOption {
	return func(c *migrateConfig) error {
		if fn == nil {
			return fmt.Errorf("%w: WithMigrateProgress(nil)", ErrInvalidOption)
		}
		c.copy.Progress = fn
		return nil
	}
}

// WithMigrateBatch bounds one transaction of the destination to keys keys
// or bytes bytes of keys and values, whichever comes first (default 1000
// keys, 4 MiB). Larger batches are fewer round trips to a server and hold
// more in memory; a batch is also what an interrupted migration may have to
// copy again.
func WithMigrateBatch(keys, bytes int) MigrateOption {
	return func(c *migrateConfig) error {
		if keys <= 0 || bytes <= 0 {
			return fmt.Errorf("%w: WithMigrateBatch(%d, %d): both limits must be positive", ErrInvalidOption, keys, bytes)
		}
		c.copy.BatchKeys, c.copy.BatchBytes = keys, bytes
		return nil
	}
}

// WithMigrateLockTimeout is WithLockTimeout for the database files of a
// migration (it does not apply to a PostgreSQL side).
func WithMigrateLockTimeout(d time.Duration) MigrateOption {
	return func(c *migrateConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithMigrateLockTimeout(%v): the timeout must be positive", ErrInvalidOption, d)
		}
		c.lockTimeout = d
		return nil
	}
}

// Migrate copies the whole store at src into the store at dst, each a file
// path or a postgres:// URL (as for Open), and verifies the copy: file to
// PostgreSQL, back, or between two of either. Everything comes across as
// it is stored (collections of every kind, indexes, queue states and
// counters, ids and the bytes of every record), streaming, in transactions
// of a bounded size.
//
// The destination must be empty (a new file, an empty schema) or hold an
// unfinished migration from the same src, which Migrate then resumes where
// it stopped, whether it was cancelled, failed or killed. Anything else
// fails with ErrNotEmpty and leaves the destination as it was. src and dst
// naming the same store fails with ErrInvalidOption.
//
// At the end every entry of both stores is compared, and the collections'
// statistics; a difference fails with a MigrateMismatch (ErrMismatch), and
// the destination stays marked as unfinished: empty it and migrate again.
// The source must not be written while it is migrated. A file source is
// opened read-only, so other processes cannot write it meanwhile; a
// PostgreSQL source cannot be protected so, and its writers must be stopped.
//
// A done ctx stops Migrate between two batches; running it again resumes.
// Errors other than Open's are *Error values with Op "migrate".
func Migrate(ctx context.Context, src, dst string, opts ...MigrateOption) (MigrateReport, error) {
	var cfg migrateConfig
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return MigrateReport{}, &Error{Op: "migrate", Index: -1, Err: err}
		}
	}
	src, dst, err := migratePaths(src, dst)
	if err != nil {
		return MigrateReport{}, &Error{Op: "migrate", Index: -1, Err: err}
	}
	if sameStore(src, dst) {
		return MigrateReport{}, &Error{Op: "migrate", Index: -1,
			Err:  fmt.Errorf("%w: the source and the destination are the same store", ErrInvalidOption),
			Hint: "the destination is another file or another PostgreSQL database or schema"}
	}
	from, err := Open(src, cfg.openOptions(src, true)...)
	if err != nil {
		return MigrateReport{}, err
	}
	defer from.Close()
	to, err := Open(dst, cfg.openOptions(dst, false)...)
	if err != nil {
		return MigrateReport{}, err
	}
	rep, err := from.eng.CopyTo(ctx, to.eng, cfg.copy)
	if cerr := to.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return rep, migrateErr(err)
	}
	return rep, nil
}

// openOptions are the options Open gets for one side of a migration.
func (c migrateConfig) openOptions(path string, source bool) []Option {
	var opts []Option
	if source {
		opts = append(opts, WithReadOnly())
	} else {
		opts = append(opts, Option{func(o *engine.Options) error { o.CopyTarget = true; return nil }})
	}
	if c.lockTimeout > 0 && !isURL(path) {
		opts = append(opts, WithLockTimeout(c.lockTimeout))
	}
	return opts
}

// migratePaths makes file paths absolute: the destination records the
// source's path, and a run from another directory must still resume.
func migratePaths(src, dst string) (string, string, error) {
	abs := func(p string) (string, error) {
		if p == "" {
			return "", fmt.Errorf("%w: an empty path", ErrInvalidOption)
		}
		if isURL(p) {
			return p, nil
		}
		return filepath.Abs(p)
	}
	s, err := abs(src)
	if err != nil {
		return "", "", err
	}
	d, err := abs(dst)
	return s, d, err
}

// sameStore reports whether two paths or URLs name one store: the same
// file (through links too), or URLs that the backend of their scheme says
// name one store (kv.SameStorer), or equal URLs. The check of the
// destination, which must be empty, catches what this misses.
func sameStore(a, b string) bool {
	schemeA, urlA := connstr.Scheme(a)
	schemeB, urlB := connstr.Scheme(b)
	switch {
	case urlA != urlB || schemeA != schemeB:
		return false
	case urlA:
		if driver, ok := backend.Lookup(schemeA); ok {
			if s, ok := driver.(kv.SameStorer); ok {
				return s.SameStore(a, b)
			}
		}
		return a == b
	case a == b:
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// migrateErr wraps a failed copy as an *Error with a hint for what to do.
func migrateErr(err error) error {
	e := &Error{Op: "migrate", Index: -1, Err: err}
	var mm *MigrateMismatch
	switch {
	case errors.As(err, &mm):
		e.Collection = mm.Collection
		e.Hint = "the source was written while it was migrated, or the destination was: empty the destination and migrate again with the source's writers stopped"
	case errors.Is(err, ErrNotEmpty):
		e.Hint = "a migration copies into an empty store, or resumes its own unfinished migration from the same source"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		e.Hint = "run the same migration again to resume it"
	}
	return e
}
