//go:build storh_nopostgres

package storh_test

import (
	"errors"
	"testing"

	"github.com/storhdb/storh-go/storh"
)

func TestOpenPostgresWithoutDriver(t *testing.T) {
	_, err := storh.Open("postgres://app@/app")
	if !errors.Is(err, storh.ErrUnsupported) {
		t.Fatalf("Open of a postgres:// URL built with storh_nopostgres: %v, want ErrUnsupported", err)
	}
}
