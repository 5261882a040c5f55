package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

var errBadTime = errors.New("use RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01, UTC), Unix milliseconds (1714564800000), now, or a time relative to now (-15m, -2h, -7d, +1h)")

// parseTime reads a time argument: RFC 3339, a date, Unix milliseconds,
// "now", or a signed duration relative to now (Go syntax plus d for days).
func parseTime(s string, now time.Time) (time.Time, error) {
	switch {
	case s == "":
		return time.Time{}, fmt.Errorf("empty time: %w", errBadTime)
	case s == "now":
		return now, nil
	case s[0] == '-' || s[0] == '+':
		d, err := parseDuration(s[1:])
		if err != nil {
			return time.Time{}, fmt.Errorf("time %q: %v; %w", s, err, errBadTime)
		}
		if s[0] == '-' {
			d = -d
		}
		return now.Add(d), nil
	case isDigits(s):
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms > maxTimeMs {
			return time.Time{}, fmt.Errorf("time %q: Unix milliseconds out of range", s)
		}
		return time.UnixMilli(ms), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if _, err := time.Parse("2006-01-02T15:04:05.999999999", s); err == nil {
		return time.Time{}, fmt.Errorf("time %q has no time zone: add Z for UTC or an offset like +02:00", s)
	}
	return time.Time{}, fmt.Errorf("invalid time %q: %w", s, errBadTime)
}

// maxTimeMs is the last millisecond a UUIDv7 can carry.
const maxTimeMs = 1<<48 - 1

func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok && isDigits(n) {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days > math.MaxInt64/int64(24*time.Hour) {
			return 0, fmt.Errorf("%sd is too long", n)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("put the sign first, once")
	}
	return d, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
