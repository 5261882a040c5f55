package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"now", now},
		{"2024-05-01T12:00:00Z", now},
		{"2024-05-01T14:00:00+02:00", now},
		{"2024-05-01T12:00:00.123456789Z", now.Add(123456789)},
		{"2024-05-01", time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)},
		{"1714564800000", now},
		{"0", time.UnixMilli(0)},
		{"-15m", now.Add(-15 * time.Minute)},
		{"+1h30m", now.Add(90 * time.Minute)},
		{"-2h", now.Add(-2 * time.Hour)},
		{"-7d", now.Add(-7 * 24 * time.Hour)},
		{"-1.5h", now.Add(-90 * time.Minute)},
		{"-500ms", now.Add(-500 * time.Millisecond)},
	}
	for _, tt := range tests {
		got, err := parseTime(tt.in, now)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if !got.Equal(tt.want) {
			t.Errorf("%s = %v, want %v", tt.in, got, tt.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"", "empty time"},
		{"yesterday", `invalid time "yesterday": use RFC 3339`},
		{"15m", "invalid time"},
		{"-15", `"15" is not a duration`},
		{"--15m", "put the sign first, once"},
		{"-15x", `"15x" is not a duration`},
		{"2024-05-01T12:00:00", "has no time zone: add Z for UTC"},
		{"2024-13-01", "invalid time"},
		{"99999999999999999999", "Unix milliseconds out of range"},
		{"281474976710656", "Unix milliseconds out of range"},
		{"-99999999999d", "too long"},
	}
	for _, tt := range bad {
		_, err := parseTime(tt.in, now)
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q: error %v, want one containing %q", tt.in, err, tt.msg)
		}
	}
}

func TestFormatting(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567", 200000: "200,000"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 16 << 20: "16.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
	if plural(1, "record") != "1 record" || plural(2000, "record") != "2,000 records" {
		t.Error("plural")
	}
	for f, want := range map[float64]string{12: "12", 1234: "1.2k", 2_500_000: "2.5M"} {
		if got := shortCount(f); got != want {
			t.Errorf("shortCount(%v) = %q, want %q", f, got, want)
		}
	}
}
