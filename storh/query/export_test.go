package query

import (
	"bytes"
	"slices"

	"github.com/storhdb/storh-go/storh/internal/order"
)

// Equal reports whether two conditions are the same as written: the same
// operators over the same paths and values, values compared by type and
// value through their order keys (so 5 and 5.0 differ and NaN equals
// NaN), the same tree. Invalid conditions are equal when their errors
// say the same.
func Equal(a, b Cond) bool {
	switch {
	case a.err != nil || b.err != nil:
		return a.err != nil && b.err != nil && a.err.Error() == b.err.Error()
	case a.src == nil || b.src == nil:
		return a.src == b.src
	}
	return equalExpr(a.src, b.src)
}

func equalExpr(a, b *expr) bool {
	if a.op != b.op || !slices.Equal(a.path, b.path) || len(a.vals) != len(b.vals) || len(a.kids) != len(b.kids) {
		return false
	}
	for i := range a.vals {
		ka, errA := order.Append(nil, a.vals[i])
		kb, errB := order.Append(nil, b.vals[i])
		if errA != nil || errB != nil || !bytes.Equal(ka, kb) {
			return false
		}
	}
	for i := range a.kids {
		if !equalExpr(a.kids[i], b.kids[i]) {
			return false
		}
	}
	return true
}
