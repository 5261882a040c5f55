package main

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress counts records (and bytes read) for a bulk transfer, and draws
// a bar on stderr when it is a terminal. The counters are atomics so the
// transfer's hot loop never waits for drawing, which a ticker does.
type progress struct {
	records atomic.Int64
	bytes   atomic.Int64

	verb   string
	unit   func(int64) string // how records reads ("1,200 records" unless set)
	total  int64
	bytesT bool // total is in bytes (a file), not records
	start  time.Time
	bar    *progressbar.ProgressBar
	stopCh chan struct{}
	done   chan struct{}
}

// startProgress returns counters, with a bar when stderr is a terminal and
// --quiet is off. total < 0 means unknown: a spinner with counts.
func (a *app) startProgress(verb string, total int64, totalIsBytes bool) *progress {
	p := &progress{verb: verb, total: total, bytesT: totalIsBytes, start: time.Now()}
	if !a.quiet && a.stderrIsTerminal() {
		p.draw(a.stderr)
	}
	return p
}

// startCounter is startProgress for a count of something other than
// records, with no known total: a spinner with the count.
func (a *app) startCounter(verb string, unit func(int64) string) *progress {
	p := &progress{verb: verb, unit: unit, total: -1, start: time.Now()}
	if !a.quiet && a.stderrIsTerminal() {
		p.draw(a.stderr)
	}
	return p
}

// draw starts the bar on w.
func (p *progress) draw(w io.Writer) {
	max := p.total
	if max <= 0 {
		max = -1
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(20),
		progressbar.OptionSetPredictTime(max > 0), // the ETA
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionShowBytes(p.bytesT && max > 0),
		progressbar.OptionSetDescription(p.describe()),
	}
	p.bar = progressbar.NewOptions64(max, opts...)
	p.stopCh, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stopCh:
				return
			case <-t.C:
				p.update()
			}
		}
	}()
}

func (p *progress) describe() string {
	n := p.records.Load()
	secs := time.Since(p.start).Seconds()
	rate := ""
	if secs > 0.2 {
		rate = ", " + shortCount(float64(n)/secs) + "/s"
	}
	what := plural(n, "record")
	if p.unit != nil {
		what = p.unit(n)
	}
	return fmt.Sprintf("%s %s%s", p.verb, what, rate)
}

func (p *progress) update() {
	switch {
	case p.total <= 0:
		p.bar.Add64(1) // turn the spinner
	case p.bytesT:
		p.bar.Set64(min(p.bytes.Load(), p.total))
	default:
		p.bar.Set64(min(p.records.Load(), p.total))
	}
	p.bar.Describe(p.describe())
}

// stop removes the bar, so the summary line takes its place.
func (p *progress) stop() {
	if p.bar == nil {
		return
	}
	close(p.stopCh)
	<-p.done
	p.bar.Finish()
	p.bar = nil
}

// shortCount formats a rate like 12.3k or 1.2M.
func shortCount(f float64) string {
	switch {
	case f >= 1e6:
		return fmt.Sprintf("%.1fM", f/1e6)
	case f >= 1e3:
		return fmt.Sprintf("%.1fk", f/1e3)
	}
	return fmt.Sprintf("%.0f", f)
}
