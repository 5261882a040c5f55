//go:build !storh_invariants

package engine

// Invariants reports whether the expensive internal checks are compiled in
// (build tag storh_invariants).
const Invariants = false

func checkInvariants(*Tx) error { return nil }
