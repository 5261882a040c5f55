package plan

import (
	"bytes"

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
	raw, present, err := mpack.FieldPath(payload, c.Path)
	if err != nil {
		return false, err
	}
	switch c.Op {
	case OpExists:
		return present, nil
	case OpMissing:
		return !present, nil
	case OpEq:
		if !present {
			return false, nil
		}
		return mpack.EqualRaw(raw, c.Values[0])
	case OpNeq:
		if !present {
			return true, nil
		}
		eq, err := mpack.EqualRaw(raw, c.Values[0])
		return !eq && err == nil, err
	case OpIn, OpNotIn:
		in := false
		if present {
			for _, v := range c.Values {
				eq, err := mpack.EqualRaw(raw, v)
				if err != nil {
					return false, err
				}
				if eq {
					in = true
					break
				}
			}
		}
		return in == (c.Op == OpIn), nil
	case OpContains:
		if !present {
			return false, nil
		}
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
		if !present {
			return false, nil
		}
		if m.key, err = order.AppendRaw(m.key[:0], raw); err != nil {
			return false, err
		}
		return InRange(m.key, c.Lo, c.Hi), nil
	}
	return false, nil
}

// InRange reports whether lo <= k < hi; a nil hi has no upper end.
func InRange(k, lo, hi []byte) bool {
	return bytes.Compare(k, lo) >= 0 && (hi == nil || bytes.Compare(k, hi) < 0)
}
