package order

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Compare returns -1, 0 or +1 as a sorts before, equal to or after b in the
// order of the package doc. It accepts the values Append accepts and panics
// on any other (mpack.Normalize's error in the message).
//
// Compare is the reference definition of the order, written without the key
// encoding: numbers are compared exactly with math/big, times with
// time.Time.Compare. The property tests check the keys against it. It is
// far slower than comparing keys, and allocates.
func Compare(a, b any) int {
	return compareNorm(normalize(a), normalize(b))
}

func normalize(v any) any {
	n, err := mpack.Normalize(v)
	if err != nil {
		panic(fmt.Sprintf("order.Compare: %v", err))
	}
	return n
}

// rank is the class of a normalised value, as an int.
func rank(v any) int {
	switch x := v.(type) {
	case nil:
		return 1
	case bool:
		if x {
			return 3
		}
		return 2
	case int64, uint64, float64:
		return 4
	case string:
		return 5
	case []byte:
		return 6
	case time.Time:
		return 7
	case []any:
		return 8
	case map[string]any:
		return 9
	case uuidv7.UUID:
		return 10
	case objectid.ObjectID:
		return 11
	}
	panic(fmt.Sprintf("order.Compare: %T is not normalised", v))
}

func compareNorm(a, b any) int {
	if c := cmp.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	switch x := a.(type) {
	case int64, uint64, float64:
		if c := compareNumbers(a, b); c != 0 {
			return c
		}
		_, af := a.(float64)
		_, bf := b.(float64)
		switch {
		case !af && bf:
			return -1 // an integer before a float of the same value
		case af && !bf:
			return 1
		}
		return 0
	case string:
		return strings.Compare(x, b.(string))
	case []byte:
		return bytes.Compare(x, b.([]byte))
	case time.Time:
		return x.Compare(b.(time.Time)) // Normalize dropped any monotonic reading
	case uuidv7.UUID:
		y := b.(uuidv7.UUID)
		return bytes.Compare(x[:], y[:])
	case objectid.ObjectID:
		y := b.(objectid.ObjectID)
		return bytes.Compare(x[:], y[:])
	case []any:
		y := b.([]any)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := compareNorm(x[i], y[i]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(x), len(y))
	case map[string]any:
		y := b.(map[string]any)
		xk, yk := sortedKeys(x), sortedKeys(y)
		for i := 0; i < len(xk) && i < len(yk); i++ {
			if c := strings.Compare(xk[i], yk[i]); c != 0 {
				return c
			}
			if c := compareNorm(x[xk[i]], y[yk[i]]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(xk), len(yk))
	}
	return 0 // nil and bools: the rank said it all
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// compareNumbers compares two normalised numbers by exact value, NaN below
// everything and equal to itself, ignoring whether they are integers or
// floats.
func compareNumbers(a, b any) int {
	an, bn := IsNaN(a), IsNaN(b)
	switch {
	case an || bn:
		return cmp.Compare(b2i(!an), b2i(!bn))
	}
	return exact(a).Cmp(exact(b)) // -0 and +0 are equal for big.Float
}

// IsNaN reports whether v is a float64 NaN: the value the order puts
// below every other number, and which equals nothing, itself included.
func IsNaN(v any) bool {
	f, ok := v.(float64)
	return ok && math.IsNaN(f)
}

// HasNaN reports whether v is a NaN or a list or map holding one at any
// depth: a value no condition can match by equality, and one that two
// decodings of the same bytes do not compare equal on.
func HasNaN(v any) bool {
	switch x := v.(type) {
	case []any:
		return slices.ContainsFunc(x, HasNaN)
	case map[string]any:
		for _, e := range x {
			if HasNaN(e) {
				return true
			}
		}
		return false
	}
	return IsNaN(v)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// exact returns the exact value of a normalised number. big.Float's
// default precision for SetInt64 and SetUint64 is 64 bits and for
// SetFloat64 53, enough to hold each exactly; ±Inf are represented.
func exact(v any) *big.Float {
	switch x := v.(type) {
	case int64:
		return new(big.Float).SetInt64(x)
	case uint64:
		return new(big.Float).SetUint64(x)
	}
	return new(big.Float).SetFloat64(v.(float64))
}
