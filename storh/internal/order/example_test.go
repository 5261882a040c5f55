package order_test

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/storhdb/storh-go/storh/internal/order"
)

// An index on one field holds the field's key followed by the record id.
// Gte(5) reads from Bound(5, false) to the end of the numbers: it finds
// the integer 5, the float 5.0 and everything above, whatever the ids.
func ExampleBound() {
	values := []any{"five", 4.5, int64(5), 5.0, uint64(1 << 63), nil, true}
	type entry struct {
		key []byte
		v   any
	}
	var index []entry
	for i, v := range values {
		k, _ := order.Append(nil, v)
		id := bytes.Repeat([]byte{byte(i) * 0x25}, 16) // stands for a UUIDv7
		index = append(index, entry{append(k, id...), v})
	}
	slices.SortFunc(index, func(a, b entry) int { return bytes.Compare(a.key, b.key) })

	lo, _ := order.Bound(nil, int64(5), false)
	hi := order.ClassStart(nil, order.TagNumber+1)
	for _, e := range index {
		if bytes.Compare(e.key, lo) >= 0 && bytes.Compare(e.key, hi) < 0 {
			fmt.Printf("%T %v\n", e.v, e.v)
		}
	}
	// Output:
	// int64 5
	// float64 5
	// uint64 9223372036854775808
}

// Prefix("ab") is the range of keys that start with StringPrefix("ab").
func ExampleStringPrefix() {
	lo := order.StringPrefix(nil, "ab")
	hi := order.PrefixEnd(lo)
	for _, s := range []string{"a", "ab", "ab\x00", "abc", "ac", "b"} {
		k, _ := order.Append(nil, s)
		fmt.Printf("%q %v\n", s, bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0)
	}
	// Output:
	// "a" false
	// "ab" true
	// "ab\x00" true
	// "abc" true
	// "ac" false
	// "b" false
}

// Compare defines the order the keys follow.
func ExampleCompare() {
	fmt.Println(order.Compare(int64(1), 1.0), order.Compare(int64(1<<53+1), float64(1<<53)), order.Compare([]any{}, []any{nil}))
	// Output: -1 1 -1
}
