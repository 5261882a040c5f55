package web

import (
	"net/http"
	"time"
)

// WithHeartbeat shortens a tail's heartbeat, for tests.
func WithHeartbeat(d time.Duration) Option {
	return func(c *config) { c.heartbeat = d }
}

// Tails counts the tails h is serving.
func Tails(h http.Handler) int64 { return h.(*handler).tails.Load() }

// ImportBytes is the bytes of import bodies h holds in memory.
func ImportBytes(h http.Handler) int64 { return h.(*handler).importBytes.Load() }

// SetPurgeStep makes c's purges ask for steps of n jobs, so that a test
// crosses steps with few jobs.
func SetPurgeStep(c *Client, n int) { c.purgeStep = n }
