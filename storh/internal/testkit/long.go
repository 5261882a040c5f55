// Package testkit holds what the tests of several packages share: the
// switch between the default run and the long one, rapid generators of
// record values, and the helpers that damage or digest a bbolt file. It
// is imported by tests only (and by kvtest, the conformance suite).
package testkit

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// LongEnv is the switch of the long run: STORH_LONG=1 runs every test at
// full size (every crash and power-cut cycle, the soak, the long model
// runs, the storh suite again on PostgreSQL), as CI does. Without it, `go
// test ./...` runs every test at a size that keeps the whole run within a
// few minutes on two cores.
const LongEnv = "STORH_LONG"

// Long reports whether tests run at full size: STORH_LONG=1 and not
// -short. -short keeps its meaning under the switch (CI's -race and
// invariant passes run the whole tree again and stay small).
func Long() bool { return os.Getenv(LongEnv) == "1" && !testing.Short() }

// RequireLong skips t unless Long, saying how to run it.
func RequireLong(t testing.TB) {
	t.Helper()
	if !Long() {
		t.Skipf("a long test: run it with %s=1 (CI does), without -short", LongEnv)
	}
}

// Size is long in the long run and short otherwise: the rounds, writes or
// cycles of a test whose every feature runs at either size.
func Size(long, short int) int {
	if Long() {
		return long
	}
	return short
}

// ShortRapid gives rapid's property tests, outside the long run, the
// checks rapid itself runs under -short (a fifth of its 100), unless
// -rapid.checks or RAPID_CHECKS asks for a number. A TestMain calls it,
// after flag.Parse, before the tests run (the flag is global).
func ShortRapid() {
	if Long() || testing.Short() || os.Getenv("RAPID_CHECKS") != "" {
		return // -short: rapid divides by 5 on its own
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if f := flag.Lookup("rapid.checks"); f != nil && !set {
		n, _ := strconv.Atoi(f.Value.String())
		_ = f.Value.Set(strconv.Itoa(max(1, n/5)))
	}
}
