//go:build storh_nopostgres

package storh

import (
	"fmt"

	"github.com/storhdb/storh-go/storh/engine"
)

// Built with the storh_nopostgres tag: the PostgreSQL driver (about 8 MB of
// a binary) is left out, and a postgres:// URL says so.

func openPostgres(rawURL string, _ engine.Options) (*DB, error) {
	return nil, &Error{Op: "open", Index: -1, Err: fmt.Errorf("%w: built with the storh_nopostgres tag", ErrUnsupported),
		Hint: "build without -tags storh_nopostgres to open PostgreSQL stores"}
}
