package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// selfCommand is how the user can run this same storh again from the
// current directory, for the command lines the demo prints: "storh" when
// that is this binary on the PATH, "go run ./cmd/storh" after go run, else
// the path it was started by. Its note, when not "", tells how to install
// storh.
func (a *app) selfCommand() (cmd, note string) {
	exe, err := os.Executable()
	if err != nil {
		return "storh", ""
	}
	cwd, _ := os.Getwd()
	return invocation(exe, os.Args[0], cwd, exec.LookPath, sameFile)
}

// invocation decides selfCommand's answer from the running executable, the
// name it was started by (os.Args[0]) and the working directory.
func invocation(exe, arg0, cwd string, lookPath func(string) (string, error), same func(a, b string) bool) (cmd, note string) {
	if isGoRun(exe) {
		note = "storh is not installed, so these lines use go run; 'go install ./cmd/storh' in the clone puts it in $(go env GOPATH)/bin, see README.md"
		if _, err := os.Stat(filepath.Join(cwd, "cmd", "storh", "main.go")); err == nil {
			return "go run ./cmd/storh", note
		}
		pkg := "github.com/storhdb/storh-go/cmd/storh"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" && !strings.HasSuffix(bi.Path, ".test") {
			pkg = bi.Path
		}
		return "go run " + pkg, note
	}
	if p, err := lookPath("storh"); err == nil && same(p, exe) {
		return "storh", ""
	}
	if strings.ContainsRune(arg0, filepath.Separator) || strings.ContainsRune(arg0, '/') {
		return shellQuote(arg0), "" // ./storh, bin/storh: as typed
	}
	return shellQuote(exe), ""
}

// isGoRun reports an executable built by go run: it lives in a temporary
// go-build directory, as .../go-build123/b001/exe/NAME.
func isGoRun(exe string) bool {
	dir := filepath.ToSlash(filepath.Dir(exe))
	return filepath.Base(dir) == "exe" && strings.Contains(dir, "/go-build")
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
