package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestInvocation checks how the demo's lines to try next start, so that
// they run as printed.
func TestInvocation(t *testing.T) {
	clone := t.TempDir()
	if err := os.MkdirAll(filepath.Join(clone, "cmd", "storh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "cmd", "storh", "main.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	goRun := "/tmp/go-build1234567/b001/exe/storh"
	installed := "/home/u/go/bin/storh"
	onPath := func(p string) func(string) (string, error) {
		return func(string) (string, error) {
			if p == "" {
				return "", errors.New("not found")
			}
			return p, nil
		}
	}
	same := func(a, b string) bool { return a == b }
	tests := []struct {
		name, exe, arg0, cwd string
		path                 string // what the PATH finds for "storh"
		want                 string
		note                 bool
	}{
		{"go run in the clone", goRun, goRun, clone, "", "go run ./cmd/storh", true},
		{"go run elsewhere in the module", goRun, goRun, t.TempDir(), "", "go run github.com/storhdb/storh-go/cmd/storh", true},
		{"go run, another storh installed", goRun, goRun, clone, installed, "go run ./cmd/storh", true},
		{"installed and on the PATH", installed, "storh", clone, installed, "storh", false},
		{"started by a path", "/work/bin/storh", "./bin/storh", clone, installed, "./bin/storh", false},
		{"not on the PATH", installed, "storh", clone, "", "/home/u/go/bin/storh", false},
		{"a path with a space", "/opt/my tools/storh", "/opt/my tools/storh", clone, "", "'/opt/my tools/storh'", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, note := invocation(tt.exe, tt.arg0, tt.cwd, onPath(tt.path), same)
			if got != tt.want || (note != "") != tt.note {
				t.Errorf("invocation = %q, note %q; want %q, note %v", got, note, tt.want, tt.note)
			}
		})
	}
}
