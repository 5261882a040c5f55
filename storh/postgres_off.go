//go:build storh_nopostgres

package storh

import (
	"fmt"
	"strings"

	"github.com/storhdb/storh-go/storh/engine"
)

// Built with the storh_nopostgres tag: the PostgreSQL driver (about 8 MB of
// a binary) is left out, and a postgres:// URL says so.

func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

func openPostgres(rawURL string, _ engine.Options) (*DB, error) {
	return nil, &Error{Op: "open", Index: -1, Err: fmt.Errorf("%w: built with the storh_nopostgres tag", ErrUnsupported),
		Hint: "build without -tags storh_nopostgres to open PostgreSQL stores"}
}
