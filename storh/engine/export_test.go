package engine

import "github.com/storhdb/storh-go/storh/internal/plan"

// Internals the external tests of this package use.
var SealValue = sealValue

func ScanColl(c *Coll, cur *Cursor, match Matcher, max, budget int, dst []Item) []Item {
	var examined int
	return scanColl(c, cur, match, max, budget, dst, &examined)
}

func NewCursor(s *plan.Spec) Cursor {
	return Cursor{Lo: s.Lo, Hi: s.Hi, Reverse: s.Reverse, Done: s.Empty}
}
