//go:build storh_invariants

package engine

import (
	"fmt"

	"github.com/storhdb/storh-go/storh/internal/api"
)

// Invariants reports whether the expensive internal checks are compiled in
// (build tag storh_invariants).
const Invariants = true

// checkInvariants runs before every commit under the storh_invariants tag:
// each collection the transaction touched must have counters that agree with
// its records, every key must be a valid UUIDv7 whose value passes its
// checksum, and every index must agree with the records both ways. A failure aborts the commit, so a bug cannot reach the file.
func checkInvariants(t *Tx) error {
	for _, c := range t.colls {
		if c.shared {
			// Held beside other writers, whose commits change it under
			// this check, and whose counter changes are in slots: Verify
			// checks it from a snapshot instead.
			continue
		}
		var n, size int64
		cur := c.records.Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			if len(k) != 16 {
				return fmt.Errorf("invariant: %q: key of %d bytes", c.Name, len(k))
			}
			if k[6]>>4 != 7 || k[8]&0xc0 != 0x80 {
				return fmt.Errorf("invariant: %q: key %x is not a UUIDv7", c.Name, k)
			}
			if _, err := Payload(k, v); err != nil {
				return fmt.Errorf("invariant: %q: key %x: %v", c.Name, k, err)
			}
			n++
			size += int64(len(v))
		}
		if n != c.Count() || size != c.Bytes() {
			return fmt.Errorf("invariant: %q: counters say %d records / %d bytes, records bucket has %d / %d",
				c.Name, c.Count(), c.Bytes(), n, size)
		}
		// Indexes agree with the records both ways (run after flush, so the
		// entry counters are written).
		var first *api.Problem
		checkIndexes(c, func(p api.Problem) {
			if first == nil {
				first = &p
			}
		})
		if first != nil {
			return fmt.Errorf("invariant: %v", first)
		}
		if err := checkJournaledViews(c); err != nil {
			return fmt.Errorf("invariant: %q: %v", c.Name, err)
		}
		if c.Kind == KindQueue {
			if _, err := checkQueue(c, func(p api.Problem) {
				if first == nil {
					first = &p
				}
			}, nil); err != nil {
				return err
			}
			if first != nil {
				return fmt.Errorf("invariant: %v", first)
			}
		}
	}
	return nil
}
