package web

import (
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
)

func TestRequireToken(t *testing.T) {
	for _, tc := range []struct {
		addr     string
		loopback bool
	}{
		{"127.0.0.1:7070", true},
		{"127.0.0.1", true},
		{"127.1.2.3:80", true},
		{"[::1]:7070", true},
		{"::1", true},
		{"[::1]", true},
		{"localhost:7070", true},
		{"LOCALHOST", true},
		{"[::ffff:127.0.0.1]:7070", true},
		{":7070", false},
		{"", false},
		{"0.0.0.0:7070", false},
		{"[::]:7070", false},
		{"192.168.1.2:7070", false},
		{"example.com:7070", false},
		{"localhost.example.com:7070", false},
	} {
		err := RequireToken(tc.addr, "")
		if (err == nil) != tc.loopback {
			t.Errorf("RequireToken(%q, \"\") = %v; loopback %v", tc.addr, err, tc.loopback)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "web: ") {
			t.Errorf("error %q", err)
		}
		if err := RequireToken(tc.addr, "t"); err != nil {
			t.Errorf("RequireToken(%q, \"t\") = %v", tc.addr, err)
		}
	}
}

func TestOptionPanics(t *testing.T) {
	db, err := storh.Open(t.TempDir() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for name, opt := range map[string]Option{
		"WithToken":        WithToken(""),
		"WithMaxPage":      WithMaxPage(0),
		"WithMaxBody":      WithMaxBody(0),
		"WithTimeout":      WithTimeout(-time.Second),
		"WithTailLimit":    WithTailLimit(-time.Second),
		"WithMaxImport":    WithMaxImport(0),
		"WithAllowedHosts": WithAllowedHosts("app.example", ""),
	} {
		func() {
			defer func() {
				err, ok := recover().(error)
				if !ok || !strings.HasPrefix(err.Error(), "web: "+name+"(") {
					t.Errorf("%s: recovered %v", name, err)
				}
			}()
			Handler(db, opt)
		}()
	}
	c := newConfig(nil)
	if c.maxPage != DefaultMaxPage || c.maxBody != DefaultMaxBody || c.timeout != DefaultTimeout || c.writes || c.token != "" ||
		c.tailLimit != time.Hour || c.maxImport != 256<<20 || c.heartbeat != 15*time.Second {
		t.Errorf("defaults: %+v", c)
	}
	// 0 is no limit for a tail, not a mistake.
	if c := newConfig([]Option{WithTailLimit(0)}); c.bad != nil || c.tailLimit != 0 {
		t.Errorf("WithTailLimit(0): %+v", c)
	}
}
