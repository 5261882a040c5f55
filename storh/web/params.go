package web

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The parameters of the records and explain endpoints. Any other is
// refused, so a misspelt one (newset=1) does not quietly return another
// page than the one asked for.
var queryParams = []string{"after", "before", "from", "until", "limit", "newest", "q", "order", "require_index"}

// page is a records request: the query to run, the page size, and the
// direction, which says which cursor continues it.
type page struct {
	q      query.Query
	limit  int
	newest bool
}

// parsePage reads the parameters into a query, without its limit (the
// caller adds it). An empty parameter is as if absent.
func (h *handler) parsePage(vals url.Values) (page, error) {
	return h.parseQuery(vals, false)
}

// parseWhole reads the parameters of a page for an endpoint that reads
// every record they select (count, export): no limit is no limit (0), and
// a limit is taken as it is, not lowered to the page size, since no page
// is held in memory.
func (h *handler) parseWhole(vals url.Values) (page, error) {
	return h.parseQuery(vals, true)
}

func (h *handler) parseQuery(vals url.Values, whole bool) (page, error) {
	p := page{q: query.All(), limit: h.cfg.maxPage}
	if whole {
		p.limit = 0
	}
	for k, vs := range vals {
		if !slices.Contains(queryParams, k) {
			return p, badRequest(fmt.Sprintf("web: unknown parameter %q; the parameters are %s", k, strings.Join(queryParams, ", ")))
		}
		if len(vs) > 1 {
			return p, badRequest(fmt.Sprintf("web: parameter %q is given %d times; give it once", k, len(vs)))
		}
		if vs[0] == "" {
			// An empty field of a form means "not given".
			delete(vals, k)
		}
	}
	for _, name := range []string{"after", "before"} {
		s := vals.Get(name)
		if s == "" {
			continue
		}
		id, err := uuidv7.Parse(s)
		if err != nil {
			return p, badRequest(fmt.Sprintf("web: parameter %s: %v", name, err))
		}
		if name == "after" {
			p.q = p.q.After(id)
		} else {
			p.q = p.q.Before(id)
		}
	}
	if vals.Has("from") || vals.Has("until") {
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		var err error
		if vals.Has("from") {
			if lo, err = parseTimeMs("from", vals.Get("from")); err != nil {
				return p, err
			}
		}
		if vals.Has("until") {
			if hi, err = parseTimeMs("until", vals.Get("until")); err != nil {
				return p, err
			}
		}
		if lo > hi {
			return p, badRequest(fmt.Sprintf("web: from %s is after until %s: the window is empty", vals.Get("from"), vals.Get("until")))
		}
		p.q = p.q.TimeRangeMs(lo, hi)
	}
	if vals.Has("q") {
		c, err := parseCond(vals.Get("q"))
		if err != nil {
			return p, err
		}
		p.q = p.q.Where(c)
	}
	if vals.Has("order") {
		f, dir, err := parseOrder(vals.Get("order"))
		if err != nil {
			return p, err
		}
		p.q = p.q.OrderByField(f, dir)
	}
	var err error
	if p.newest, err = flag(vals, "newest"); err != nil {
		return p, err
	}
	if p.newest {
		p.q = p.q.Reverse()
	}
	requireIndex, err := flag(vals, "require_index")
	if err != nil {
		return p, err
	}
	if requireIndex {
		p.q = p.q.RequireIndex()
	}
	if vals.Has("limit") {
		most := h.cfg.maxPage
		if whole {
			most = math.MaxInt
		}
		if p.limit, err = parseLimit(vals.Get("limit"), most); err != nil {
			return p, err
		}
	}
	if err := p.q.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

// parseCond reads the condition q: its JSON form when it starts with {,
// else the text syntax of query.Parse (which no condition starts with {).
// The *query.ParseError names the node or column at fault; q is the only
// parameter that holds a condition, so it needs no other name.
func parseCond(s string) (query.Cond, error) {
	if strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "{") {
		var c query.Cond
		err := c.UnmarshalJSON([]byte(s))
		return c, err
	}
	return query.Parse(s)
}

// parseLimit reads limit: at least 1, and above most lowered to it.
func parseLimit(s string, most int) (int, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	var ne *strconv.NumError
	switch {
	case errors.As(err, &ne) && ne.Err == strconv.ErrRange && !strings.HasPrefix(s, "-"):
		return most, nil
	case err != nil:
		return 0, badRequest(fmt.Sprintf("web: parameter limit=%q: not an integer", s))
	case n < 1:
		return 0, badRequest(fmt.Sprintf("web: parameter limit=%d: the limit is at least 1", n))
	}
	return int(min(n, int64(most))), nil
}

// flag reads a boolean parameter: absent is false; 1, true, 0 and false
// say what they mean.
func flag(vals url.Values, name string) (bool, error) {
	if !vals.Has(name) {
		return false, nil
	}
	b, err := strconv.ParseBool(vals.Get(name))
	if err != nil {
		return false, badRequest(fmt.Sprintf("web: parameter %s=%q: use 1 or 0 (true or false)", name, vals.Get(name)))
	}
	return b, nil
}

// parseTimeMs reads from or until: RFC 3339, or Unix milliseconds.
func parseTimeMs(name, s string) (int64, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits != "" && strings.Trim(digits, "0123456789") == "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, badRequest(fmt.Sprintf("web: parameter %s=%q: milliseconds out of range", name, s))
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err == nil {
		return t.UnixMilli(), nil
	}
	hint := ""
	if strings.Contains(s, " ") {
		// A + in a query string reads as a space.
		hint = " (a + in a URL is a space: send the offset's + as %2B)"
	}
	return 0, badRequest(fmt.Sprintf("web: parameter %s=%q: use RFC 3339 (2024-05-01T12:00:00.000Z) or Unix milliseconds%s", name, s, hint))
}

// parseOrder reads order: a dotted path, or a JSON list of literal path
// segments for keys that hold a dot, after - for descending (+ or nothing
// for ascending).
func parseOrder(s string) (query.FieldRef, query.Direction, error) {
	dir, rest := query.Asc, s
	switch {
	case strings.HasPrefix(s, "-"):
		dir, rest = query.Desc, s[1:]
	case strings.HasPrefix(s, "+"):
		rest = s[1:]
	}
	f := query.Field(rest)
	if strings.HasPrefix(rest, "[") {
		v, err := jsonl.DecodeValue([]byte(rest))
		list, ok := v.([]any)
		if err != nil || !ok {
			return f, dir, badRequest(fmt.Sprintf("web: parameter order=%q: a path in brackets is a JSON list of strings", s))
		}
		segs := make([]string, len(list))
		for i, seg := range list {
			if segs[i], ok = seg.(string); !ok {
				return f, dir, badRequest(fmt.Sprintf("web: parameter order=%q: a path in brackets is a JSON list of strings", s))
			}
		}
		f = query.FieldPath(segs...)
	}
	if err := query.All().OrderByField(f, dir).Validate(); err != nil {
		return f, dir, fmt.Errorf("web: parameter order=%q: %w", s, err)
	}
	return f, dir, nil
}
