package engine

import (
	"math"
	"testing"
)

// BackoffDelay: min·2^(attempts-1), capped at max, scaled by 0.8+0.4·jitter.
func TestBackoffDelay(t *testing.T) {
	r := QueueRule{MaxAttempts: 10, BackoffMin: 100, BackoffMax: 1000}
	for _, tc := range []struct {
		name     string
		rule     QueueRule
		attempts int
		jitter   float64
		want     int64
	}{
		{"no backoff", QueueRule{MaxAttempts: 3}, 1, 0.5, 0},
		{"attempt 1, middle", r, 1, 0.5, 100},
		{"attempt 2, middle", r, 2, 0.5, 200},
		{"attempt 3, middle", r, 3, 0.5, 400},
		{"attempt 4, middle", r, 4, 0.5, 800},
		{"attempt 5 capped", r, 5, 0.5, 1000},
		{"attempt 60 capped", r, 60, 0.5, 1000},
		{"attempt 64 capped, no overflow", r, 64, 0.5, 1000},
		{"attempt 1000 capped", r, 1000, 0.5, 1000},
		{"attempt 0 as 1", r, 0, 0.5, 100},
		{"lowest jitter", r, 1, 0, 80},
		{"highest jitter", r, 1, math.Nextafter(1, 0), 120},
		{"lowest jitter at the cap", r, 9, 0, 800},
		{"highest jitter at the cap", r, 9, math.Nextafter(1, 0), 1200},
		{"min = max", QueueRule{MaxAttempts: 3, BackoffMin: 50, BackoffMax: 50}, 3, 0.5, 50},
		{"huge max", QueueRule{MaxAttempts: 3, BackoffMin: 1, BackoffMax: math.MaxInt64 / 2}, 40, 0.5, 1 << 39},
	} {
		if got := BackoffDelay(tc.rule, tc.attempts, tc.jitter); got != tc.want {
			t.Errorf("%s: BackoffDelay(%+v, %d, %v) = %d; want %d", tc.name, tc.rule, tc.attempts, tc.jitter, got, tc.want)
		}
	}
}

// Every jitter in [0, 1) lands within ±20% of the capped delay.
func TestBackoffDelayJitterBounds(t *testing.T) {
	r := QueueRule{MaxAttempts: 10, BackoffMin: 1000, BackoffMax: 30_000}
	for attempts := 1; attempts <= 8; attempts++ {
		base := min(int64(1000)<<(attempts-1), 30_000)
		for i := 0; i < 100; i++ {
			d := BackoffDelay(r, attempts, float64(i)/100)
			if lo, hi := base*8/10, base*12/10; d < lo || d > hi {
				t.Fatalf("attempt %d, jitter %v: %d outside [%d, %d]", attempts, float64(i)/100, d, lo, hi)
			}
		}
	}
}
