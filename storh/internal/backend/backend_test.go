package backend_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/connstr"
	"github.com/storhdb/storh-go/storh/kv"
)

// This test binary imports no backend: a URL must fail with a typed error
// that names the import to add, and never show the URL's password.
func TestOpenURLWithoutBackend(t *testing.T) {
	for _, tc := range []struct {
		url, wantHint string
	}{
		{"postgres://app:s3cret@localhost/app", `import _ "github.com/storhdb/storh-go/storh/postgres"`},
		{"postgresql://app:s3cret@localhost/app", `import _ "github.com/storhdb/storh-go/storh/postgres"`},
		{"mystore://app:s3cret@localhost/app", "import the package of the backend"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			db, err := storh.Open(tc.url)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded without a backend")
			}
			if !errors.Is(err, storh.ErrUnsupported) {
				t.Errorf("error %v, want ErrUnsupported", err)
			}
			var e *storh.Error
			if !errors.As(err, &e) || e.Op != "open" {
				t.Fatalf("error %#v, want an *Error of Op open", err)
			}
			if !strings.Contains(e.Hint, tc.wantHint) {
				t.Errorf("hint %q, want it to contain %q", e.Hint, tc.wantHint)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

func TestSchemeOfPath(t *testing.T) {
	for _, tc := range []struct {
		path, scheme string
		isURL        bool
	}{
		{"postgres://u@h/db", "postgres", true},
		{"a+b.c-9://x", "a+b.c-9", true},
		{"/tmp/x.db", "", false},
		{"x.db", "", false},
		{"./a://b", "", false},
		{"dir/a://b", "", false},
		{"9p://x", "", false},
		{"://x", "", false},
		{`C:\data\x.db`, "", false},
	} {
		scheme, ok := connstr.Scheme(tc.path)
		if scheme != tc.scheme || ok != tc.isURL {
			t.Errorf("Scheme(%q) = %q, %v; want %q, %v", tc.path, scheme, ok, tc.scheme, tc.isURL)
		}
	}
}

type nopDriver struct{}

// The registry is the process's: the tests register their schemes once,
// so that -count=2 does not meet its own earlier registrations.
func init() {
	storh.Register("storhtest-dup", nopDriver{})
	storh.Register("storhtest-nop", nopDriver{})
}

func (nopDriver) OpenURL(context.Context, string, kv.OpenOptions) (kv.Store, error) {
	return nil, errors.New("nop")
}

// Register panics on what is a mistake in a program's imports, as
// database/sql.Register does.
func TestRegisterPanics(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scheme string
		driver kv.Driver
	}{
		{"duplicate", "storhtest-dup", nopDriver{}},
		{"nil driver", "storhtest-nil", nil},
		{"empty scheme", "", nopDriver{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q, %v) did not panic", tc.scheme, tc.driver)
				}
			}()
			storh.Register(tc.scheme, tc.driver)
		})
	}
}

// A driver's error that is not a storh error comes back as one, with the
// operation and the URL (its password masked), wrapping the driver's.
func TestOpenURLDriverError(t *testing.T) {
	_, err := storh.Open("storhtest-nop://u:s3cret@h/x")
	var e *storh.Error
	if !errors.As(err, &e) || e.Op != "open" || e.Path != "storhtest-nop://u:xxxxx@h/x" {
		t.Fatalf("error %#v, want an *Error of Op open naming the URL without its password", err)
	}
	if e.Err == nil || e.Err.Error() != "nop" {
		t.Errorf("error %v, want it to wrap the driver's", err)
	}
}
