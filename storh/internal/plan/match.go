package plan

import (
	"bytes"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
)

// Matcher evaluates a condition on stored record payloads, reading only the
// bytes of the fields it compares. It keeps scratch space between calls, so
// it is not safe for concurrent use: make one per reader.
type Matcher struct {
	cond *Cond
	key  []byte
}

// NewMatcher returns a Matcher for c; a nil c matches everything.
func NewMatcher(c *Cond) *Matcher { return &Matcher{cond: c} }

// Match reports whether the payload (one msgpack map) satisfies the
// condition. An error means the payload is not well-formed msgpack.
func (m *Matcher) Match(payload []byte) (bool, error) {
	if m.cond == nil {
		return true, nil
	}
	return m.eval(m.cond, payload)
}

func (m *Matcher) eval(c *Cond, payload []byte) (bool, error) {
	switch c.Op {
	case OpTrue:
		return true, nil
	case OpFalse:
		return false, nil
	case OpAnd:
		for _, k := range c.Kids {
			if ok, err := m.eval(k, payload); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	case OpOr:
		for _, k := range c.Kids {
			if ok, err := m.eval(k, payload); ok || err != nil {
				return ok, err
			}
		}
		return false, nil
	case OpNot:
		ok, err := m.eval(c.Kids[0], payload)
		return !ok && err == nil, err
	}
	// A path may reach several values (through lists): a leaf holds when
	// some value satisfies its positive test; Neq, NotIn and Missing are
	// the negations of Eq, In and Exists over all of them.
	positive := c.Op
	switch c.Op {
	case OpNeq:
		positive = OpEq
	case OpNotIn:
		positive = OpIn
	case OpMissing:
		positive = OpExists
	case OpLive:
		positive = OpExpired
	}
	some := false
	var testErr error
	_, err := mpack.PathValues(payload, c.Path, func(raw []byte) bool {
		some, testErr = m.test(positive, c, raw)
		return !some && testErr == nil
	})
	if err == nil {
		err = testErr
	}
	if err != nil {
		return false, err
	}
	return some == (positive == c.Op), nil
}

// test reports whether one value the leaf c's path reached satisfies the
// positive operator op.
func (m *Matcher) test(op Op, c *Cond, raw []byte) (bool, error) {
	switch op {
	case OpExists:
		return true, nil
	case OpEq:
		return mpack.EqualRaw(raw, c.Values[0])
	case OpIn:
		for _, v := range c.Values {
			if eq, err := mpack.EqualRaw(raw, v); eq || err != nil {
				return eq, err
			}
		}
		return false, nil
	case OpContains:
		found := false
		var eqErr error
		_, err := mpack.Elements(raw, func(elem []byte) bool {
			found, eqErr = mpack.EqualRaw(elem, c.Values[0])
			return !found && eqErr == nil
		})
		if err == nil {
			err = eqErr
		}
		return found && err == nil, err
	case OpRange:
		var err error
		if m.key, err = order.AppendRaw(m.key[:0], raw); err != nil {
			return false, err
		}
		return InRange(m.key, c.Lo, c.Hi), nil
	case OpExpired:
		return expiredRaw(raw, c.Values[0].(time.Time)), nil
	case OpElemMatch:
		found := false
		var evalErr error
		_, err := mpack.Elements(raw, func(elem []byte) bool {
			if !mpack.IsMap(elem) {
				elem = emptyMap // an element that is not a map has no fields
			}
			found, evalErr = m.eval(c.Kids[0], elem)
			return !found && evalErr == nil
		})
		if err == nil {
			err = evalErr
		}
		return found && err == nil, err
	}
	return false, nil
}

var emptyMap = []byte{0x80}

// InRange reports whether lo <= k < hi; a nil hi has no upper end.
func InRange(k, lo, hi []byte) bool {
	return bytes.Compare(k, lo) >= 0 && (hi == nil || bytes.Compare(k, hi) < 0)
}

// expiredRaw reports whether the msgpack value raw is a time at or before
// now: a timestamp, or a string that parses as RFC 3339 (with or without
// a fraction of a second, any offset). Anything else is no time, so never
// expired.
func expiredRaw(raw []byte, now time.Time) bool {
	h, err := mpack.ReadHead(raw, 0)
	if err != nil {
		return false
	}
	switch {
	case h.Kind == mpack.KindExt && h.Ext == -1:
	case h.Kind == mpack.KindStr && h.N >= len("2006-01-02T15:04:05Z") && h.N <= 64:
	default:
		return false
	}
	v, _, err := mpack.Decode(raw)
	if err != nil {
		return false
	}
	var t time.Time
	switch v := v.(type) {
	case time.Time:
		t = v
	case string:
		if t, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return false
		}
	default:
		return false
	}
	return !t.After(now)
}
