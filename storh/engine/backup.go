package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/storhdb/storh-go/storh/internal/errs"
)

// Backup writes a consistent copy of the whole file to w from one read
// transaction, while writers go on. The caller must hold Enter.
//
// Before it starts and before every write to w (bbolt copies in writes of
// 32 KiB) it checks ctx: a done ctx stops the copy there and ends the
// transaction, with an error wrapping ctx.Err(); w then holds an
// incomplete copy.
func (db *DB) Backup(ctx context.Context, w io.Writer) (int64, error) {
	n, cancel, err := db.writeTo(ctx, w)
	if cancel != nil {
		return n, fmt.Errorf("cancelled after %d bytes: the copy is incomplete: %w", n, cancel)
	}
	return n, err
}

// writeTo is Backup, returning the context's error apart: bbolt formats
// some write errors with %s, so the error WriteTo returns may not wrap it.
func (db *DB) writeTo(ctx context.Context, w io.Writer) (n int64, cancel, err error) {
	if db.file.bolt == nil {
		return 0, nil, fmt.Errorf("%w: a backup copies a database file; %s is not one", errs.ErrUnsupported, db.path)
	}
	cw := &ctxWriter{ctx: ctx, w: w}
	if cw.check() != nil {
		return 0, cw.err, nil
	}
	err = db.ViewSafe(func(tx *Tx) error {
		var err error
		n, err = tx.btx.WriteTo(cw)
		return err
	})
	if err != nil && cw.err == nil {
		// bbolt copies the pages through the file: one cut short under
		// the open database ends the copy early, with io.EOF.
		if failed := db.checkFile(); failed != nil {
			err = failed
		}
	}
	return n, cw.err, err
}

// ctxWriter is a writer that checks its context before each write. It has
// only Write, so io.Copy cannot bypass it through a ReadFrom of w's.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
	err error // the context's error, once seen
}

func (cw *ctxWriter) check() error {
	if cw.err == nil {
		cw.err = cw.ctx.Err()
	}
	return cw.err
}

func (cw *ctxWriter) Write(p []byte) (int, error) {
	if err := cw.check(); err != nil {
		return 0, err
	}
	return cw.w.Write(p)
}

// BackupFile writes a consistent copy to path atomically: into a temporary
// file in the same directory, synced, then renamed, so path never holds a
// partial copy. path must not be the database itself. A done ctx stops the
// copy as in Backup; the temporary file is removed and path is left as it
// was.
func (db *DB) BackupFile(ctx context.Context, path string) (int64, error) {
	if db.file.bolt == nil {
		return 0, fmt.Errorf("%w: a backup copies a database file; %s is not one", errs.ErrUnsupported, db.path)
	}
	if same, _ := db.isFile(path); same {
		return 0, fmt.Errorf("storh: backup target %s is the database file itself; choose another path", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	n, cancel, err := db.writeTo(ctx, tmp)
	if cancel != nil {
		tmp.Close()
		return 0, fmt.Errorf("cancelled after %d bytes: %s is as it was: %w", n, path, cancel)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return 0, err
	}
	return n, syncDir(filepath.Dir(path))
}

// isFile reports whether path names the database's open file.
func (db *DB) isFile(path string) (bool, error) {
	fa, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	fb, err := db.file.fd.Stat()
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
