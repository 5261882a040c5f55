package uuidv7

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// fakeClock is a settable clock for WithClock. The generator calls it with
// its lock held; tests only change ms between calls from one goroutine.
type fakeClock struct {
	ms    int64
	reads int
}

func (c *fakeClock) now() time.Time {
	c.reads++
	return time.UnixMilli(c.ms)
}

// fillReader returns an endless stream of one byte value.
type fillReader byte

func (r fillReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

const t0 = 1_700_000_000_000 // 2023-11-14T22:13:20Z

func randA(u UUID) uint64 { return uint64(u[6]&0x0f)<<8 | uint64(u[7]) }

// heavy returns n, scaled down under -race or outside the long run.
func heavy(n int) int {
	if raceEnabled || !testkit.Long() {
		return n / 10
	}
	return n
}

func assertIncreasing(t *testing.T, ids []UUID) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i-1].Compare(ids[i]) >= 0 {
			t.Fatalf("id %d not greater than id %d:\n%s\n%s", i, i-1, ids[i], ids[i-1])
		}
	}
}

func TestNewStrictlyIncreasing(t *testing.T) {
	n := heavy(1_000_000)
	prev := New()
	for i := range n {
		u := New()
		if prev.Compare(u) >= 0 {
			t.Fatalf("call %d: %s not greater than %s", i, u, prev)
		}
		if !u.IsV7() {
			t.Fatalf("call %d: %s is not a UUIDv7", i, u)
		}
		prev = u
	}
}

func TestNewConcurrent(t *testing.T) {
	const goroutines = 8
	n := heavy(100_000)
	g := NewGenerator()
	results := make([][]UUID, goroutines)
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			ids := make([]UUID, n)
			for i := range ids {
				if i%100 == 99 {
					// Mix in batches: they share the lock and state.
					g.NewBatch(ids[i : i+1])
					continue
				}
				ids[i] = g.New()
			}
			results[w] = ids
		})
	}
	wg.Wait()

	var all []UUID
	for w, ids := range results {
		t.Run(fmt.Sprint("goroutine", w), func(t *testing.T) { assertIncreasing(t, ids) })
		all = append(all, ids...)
	}
	slices.SortFunc(all, UUID.Compare)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("duplicate id %s", all[i])
		}
	}
	if len(all) != goroutines*n {
		t.Fatalf("got %d ids, want %d", len(all), goroutines*n)
	}
}

func TestClockRegressionKeepsLastMs(t *testing.T) {
	c := &fakeClock{ms: t0}
	g := NewGenerator(WithClock(c.now))
	var ids []UUID
	for range 10 {
		ids = append(ids, g.New())
	}
	c.ms = t0 - 5000 // NTP steps the clock back 5 s
	for range 10 {
		u := g.New()
		if got := u.TimestampMs(); got != t0 {
			t.Fatalf("after regression: timestamp %d, want the old %d", got, t0)
		}
		ids = append(ids, u)
	}
	c.ms = t0 - 1 // still behind
	ids = append(ids, g.New())
	c.ms = t0 + 1 // caught up: a fresh millisecond
	u := g.New()
	if got := u.TimestampMs(); got != t0+1 {
		t.Fatalf("after catching up: timestamp %d, want %d", got, t0+1)
	}
	ids = append(ids, u)
	assertIncreasing(t, ids)
}

func TestSameMillisecondIncrementsByOne(t *testing.T) {
	g := NewGenerator(WithClock((&fakeClock{ms: t0}).now), WithRandom(fillReader(0)))
	a, b := g.New(), g.New()
	if a != MinForTimestampMs(t0) {
		t.Fatalf("zero randomness: got %s, want the minimum %s", a, MinForTimestampMs(t0))
	}
	want := a
	want[15]++
	if b != want {
		t.Fatalf("second id in the millisecond: got %s, want %s", b, want)
	}
}

func TestHeadroomOnFreshMillisecond(t *testing.T) {
	g := NewGenerator(WithClock((&fakeClock{ms: t0}).now), WithRandom(fillReader(0xff)))
	u := g.New()
	if got := randA(u); got != 0x7ff {
		t.Fatalf("all-ones randomness: rand_a = %#x, want %#x (top bit cleared)", got, 0x7ff)
	}
	if u.TimestampMs() != t0 || !u.IsV7() {
		t.Fatalf("got %s", u)
	}
}

func TestCounterOverflowAdvancesMs(t *testing.T) {
	c := &fakeClock{ms: t0}
	g := NewGenerator(WithClock(c.now), WithRandom(fillReader(0xff)))
	first := g.New()
	// The headroom keeps even all-ones randomness 2^73 ids away from
	// overflow, so move the counter to two below the top by hand.
	g.seq = counter{a: randAMask, b: randBMask - 1}
	last := g.New()
	if last != MaxForTimestampMs(t0) {
		t.Fatalf("top of the counter: got %s, want %s", last, MaxForTimestampMs(t0))
	}
	next := g.New()
	if got := next.TimestampMs(); got != t0+1 {
		t.Fatalf("after overflow: timestamp %d, want %d", got, t0+1)
	}
	if randA(next) != 0x7ff {
		t.Fatalf("after overflow: want freshly drawn bits, got %s", next)
	}
	after := g.New() // clock still at t0: stays on the borrowed millisecond
	if after.TimestampMs() != t0+1 {
		t.Fatalf("clock behind borrowed ms: timestamp %d, want %d", after.TimestampMs(), t0+1)
	}
	assertIncreasing(t, []UUID{first, last, next, after})
}

func TestCounterOverflowInBatch(t *testing.T) {
	g := NewGenerator(WithClock((&fakeClock{ms: t0}).now), WithRandom(fillReader(0x55)))
	g.New()
	g.seq = counter{a: randAMask, b: randBMask - 2}
	ids := make([]UUID, 6)
	g.NewBatch(ids)
	assertIncreasing(t, ids)
	if ids[1].TimestampMs() != t0 || ids[2].TimestampMs() != t0+1 {
		t.Fatalf("overflow should move the batch to %d at index 2: %v", t0+1, ids)
	}
}

func TestOverflowAtMaxTimestampPanics(t *testing.T) {
	g := NewGenerator(WithClock((&fakeClock{ms: MaxTimestampMs}).now))
	g.New()
	g.seq = counter{a: randAMask, b: randBMask}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "uuidv7: generator exhausted") {
			t.Fatalf("recovered %v, want an exhaustion panic", r)
		}
	}()
	g.New()
}

func TestClockClamped(t *testing.T) {
	c := &fakeClock{ms: -12345}
	g := NewGenerator(WithClock(c.now))
	if got := g.New().TimestampMs(); got != 0 {
		t.Fatalf("clock before 1970: timestamp %d, want 0", got)
	}
	c.ms = MaxTimestampMs + 99
	if got := g.New().TimestampMs(); got != MaxTimestampMs {
		t.Fatalf("clock after 10889: timestamp %d, want %d", got, int64(MaxTimestampMs))
	}
}

func TestNewAtFixturesSortInCreationOrder(t *testing.T) {
	g := NewGenerator()
	var ids []UUID
	for _, ms := range []int64{t0, t0, t0, t0 + 1, t0 + 1, t0 + 2} {
		u, err := g.NewAt(ms)
		if err != nil {
			t.Fatal(err)
		}
		if u.TimestampMs() != ms || !u.IsV7() {
			t.Fatalf("NewAt(%d) = %s", ms, u)
		}
		ids = append(ids, u)
	}
	assertIncreasing(t, ids)

	// Package level, many in one millisecond.
	prev, _ := NewAt(t0)
	for range 1000 {
		u, err := NewAt(t0)
		if err != nil {
			t.Fatal(err)
		}
		if prev.Compare(u) >= 0 {
			t.Fatalf("NewAt(t0) twice: %s then %s", prev, u)
		}
		prev = u
	}
}

func TestNewAtRange(t *testing.T) {
	for _, ms := range []int64{-1, MaxTimestampMs + 1, -1 << 62, 1 << 62} {
		if _, err := NewAt(ms); !errors.Is(err, ErrTimestampRange) {
			t.Errorf("NewAt(%d): err = %v, want ErrTimestampRange", ms, err)
		}
	}
	for _, ms := range []int64{0, 1, t0, MaxTimestampMs} {
		u, err := NewAt(ms)
		if err != nil || u.TimestampMs() != ms {
			t.Errorf("NewAt(%d) = %s, %v", ms, u, err)
		}
	}
	_, err := NewAt(-1)
	if want := "uuidv7: timestamp out of range: -1 ms, want 0..281474976710655"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestNewAtExhausted(t *testing.T) {
	g := NewGenerator(WithRandom(fillReader(0xff)))
	if _, err := g.NewAt(t0); err != nil {
		t.Fatal(err)
	}
	g.at = counter{a: randAMask, b: randBMask - 1}
	u, err := g.NewAt(t0)
	if err != nil || u != MaxForTimestampMs(t0) {
		t.Fatalf("last id of the ms: %s, %v", u, err)
	}
	for range 2 { // stays exhausted
		if _, err := g.NewAt(t0); !errors.Is(err, ErrExhausted) {
			t.Fatalf("err = %v, want ErrExhausted", err)
		}
	}
	if u, err := g.NewAt(t0 + 1); err != nil || u.TimestampMs() != t0+1 {
		t.Fatalf("next ms: %s, %v", u, err)
	}
}

func TestNewAtDoesNotDisturbNew(t *testing.T) {
	c := &fakeClock{ms: t0}
	g := NewGenerator(WithClock(c.now))
	before := g.New()
	for _, ms := range []int64{MaxTimestampMs, t0 + 1_000_000, 0, t0} {
		if _, err := g.NewAt(ms); err != nil {
			t.Fatal(err)
		}
	}
	after := g.New()
	if after.TimestampMs() != t0 {
		t.Fatalf("New after NewAt(far future): timestamp %d, want the clock's %d", after.TimestampMs(), t0)
	}
	if before.Compare(after) >= 0 {
		t.Fatalf("New not increasing across NewAt: %s then %s", before, after)
	}

	// Package level: a far-future NewAt must not drag New along.
	if _, err := NewAt(MaxTimestampMs); err != nil {
		t.Fatal(err)
	}
	if got := New().TimestampMs(); got == MaxTimestampMs {
		t.Fatal("New returned an id at MaxTimestampMs after NewAt(MaxTimestampMs)")
	}
}

func TestNewBatch(t *testing.T) {
	c := &fakeClock{ms: t0}
	g := NewGenerator(WithClock(c.now))
	before := g.New()
	reads := c.reads
	ids := make([]UUID, 1000)
	g.NewBatch(ids)
	if c.reads-reads != 1 {
		t.Fatalf("NewBatch read the clock %d times, want 1", c.reads-reads)
	}
	c.ms = t0 - 10 // a regression right after the batch
	after := g.New()
	assertIncreasing(t, slices.Concat([]UUID{before}, ids, []UUID{after}))

	g.NewBatch(nil) // no-op
	reads = c.reads
	g.NewBatch(ids[:0])
	if c.reads != reads {
		t.Fatal("empty NewBatch read the clock")
	}

	// Package level.
	prev := New()
	NewBatch(ids)
	next := New()
	assertIncreasing(t, slices.Concat([]UUID{prev}, ids, []UUID{next}))
}

func TestResetForgetsState(t *testing.T) {
	c := &fakeClock{ms: t0}
	g := NewGenerator(WithClock(c.now), WithRandom(fillReader(0)))
	g.New()
	c.ms = t0 - 1000
	if got := g.New().TimestampMs(); got != t0 {
		t.Fatalf("before Reset: %d", got)
	}
	g.Reset()
	if got := g.New().TimestampMs(); got != t0-1000 {
		t.Fatalf("after Reset: timestamp %d, want the clock's %d", got, t0-1000)
	}
	a, _ := g.NewAt(5)
	g.Reset()
	b, _ := g.NewAt(5)
	if a != b { // zero randomness: a fresh start gives the same id
		t.Fatalf("NewAt after Reset: %s, want %s", b, a)
	}

	ResetForTests()
	if !New().IsV7() {
		t.Fatal("New after ResetForTests")
	}
}

func TestZeroGenerator(t *testing.T) {
	var g Generator
	a, b := g.New(), g.New()
	if !a.IsV7() || a.Compare(b) >= 0 {
		t.Fatalf("zero Generator: %s, %s", a, b)
	}
}

func TestNewDeterministicRepeatable(t *testing.T) {
	run := func(seed uint64) []UUID {
		g := NewDeterministic(seed, t0, 1)
		var ids []UUID
		for i := range 500 {
			switch i % 5 {
			case 3:
				batch := make([]UUID, 3)
				g.NewBatch(batch)
				ids = append(ids, batch...)
			case 4:
				u, err := g.NewAt(int64(i))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, u)
			default:
				ids = append(ids, g.New())
			}
		}
		return ids
	}
	a, b := run(42), run(42)
	if !slices.Equal(a, b) {
		t.Fatal("same seed gave different ids")
	}
	if c := run(43); slices.Equal(a, c) {
		t.Fatal("different seeds gave the same ids")
	}

	// Golden value: the sequence must not change between runs or Go
	// releases (ChaCha8 output is specified by C2SP chacha8rand).
	g := NewDeterministic(1, t0, 1)
	if got, want := g.New().String(), "018bcfe5-6800-72e6-b83f-4fbde91b6eb8"; got != want {
		t.Fatalf("first id of seed 1: %s, want %s", got, want)
	}
}

func TestNewDeterministicClock(t *testing.T) {
	g := NewDeterministic(7, 1000, 10)
	if got := g.New().TimestampMs(); got != 1000 {
		t.Fatalf("first id at %d, want 1000", got)
	}
	batch := make([]UUID, 5)
	g.NewBatch(batch)
	for _, u := range batch {
		if u.TimestampMs() != 1010 {
			t.Fatalf("batch id at %d, want 1010", u.TimestampMs())
		}
	}
	if _, err := g.NewAt(99); err != nil { // does not move the clock
		t.Fatal(err)
	}
	if got := g.New().TimestampMs(); got != 1060 {
		t.Fatalf("after a batch of 5: %d, want 1060", got)
	}

	still := NewDeterministic(7, 1000, 0)
	ids := []UUID{still.New(), still.New(), still.New()}
	for _, u := range ids {
		if u.TimestampMs() != 1000 {
			t.Fatalf("step 0: %d", u.TimestampMs())
		}
	}
	assertIncreasing(t, ids)

	back := NewDeterministic(7, 1000, -400)
	ids = []UUID{back.New(), back.New(), back.New(), back.New()}
	assertIncreasing(t, ids)
	if ids[3].TimestampMs() != 1000 {
		t.Fatalf("backwards clock: %d, want 1000 kept", ids[3].TimestampMs())
	}

	huge := NewDeterministic(7, MaxTimestampMs-1, 1<<62)
	ids = []UUID{huge.New(), huge.New(), huge.New()}
	assertIncreasing(t, ids)
	if ids[2].TimestampMs() != MaxTimestampMs {
		t.Fatalf("huge step: %d, want clamped to MaxTimestampMs", ids[2].TimestampMs())
	}
	neg := NewDeterministic(7, -5, -1<<62)
	if got := neg.New().TimestampMs(); got != 0 {
		t.Fatalf("negative start: %d, want 0", got)
	}
}

func TestRandomnessConsumedByteForByte(t *testing.T) {
	// A source that delivers one byte per Read must give the same ids as
	// one that fills the buffer: the buffering must not drop bytes.
	src := make([]byte, 10*randBufSize)
	for i := range src {
		src[i] = byte(i*7 + i/256)
	}
	mk := func(r io.Reader) []UUID {
		c := &fakeClock{ms: t0}
		g := NewGenerator(WithClock(c.now), WithRandom(r))
		ids := make([]UUID, 3000)
		for i := range ids {
			c.ms++
			ids[i] = g.New()
		}
		return ids
	}
	a := mk(strings.NewReader(string(src)))
	b := mk(iotest.OneByteReader(strings.NewReader(string(src))))
	if !slices.Equal(a, b) {
		t.Fatal("ids depend on how the randomness source chunks its reads")
	}
}

func TestRandomnessFailurePanics(t *testing.T) {
	g := NewGenerator(WithRandom(iotest.ErrReader(errors.New("entropy gone"))))
	for range 2 { // the lock must be released by the first panic
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "uuidv7: reading randomness: entropy gone") {
					t.Fatalf("recovered %v", r)
				}
			}()
			g.New()
		}()
	}
}

func TestGeneratorAllocs(t *testing.T) {
	g := NewGenerator()
	d := NewDeterministic(1, 0, 1)
	ids := make([]UUID, 64)
	var sink UUID
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"New", func() { sink = New() }},
		{"Generator.New", func() { sink = g.New() }},
		{"NewBatch/64", func() { NewBatch(ids) }},
		{"Generator.NewAt", func() { sink, _ = g.NewAt(t0) }},
		{"deterministic New", func() { sink = d.New() }},
	} {
		if got := testing.AllocsPerRun(5000, tc.f); got != 0 {
			t.Errorf("%s: %v allocs per call, want 0", tc.name, got)
		}
	}

	// AllocsPerRun rounds down, which would hide one allocation per
	// refill. Count all allocations of 5000 calls that each start a new
	// millisecond, crossing a dozen 4 KiB refills, from crypto/rand and
	// from ChaCha8.
	// The runtime may allocate once for a thread the goroutine first runs
	// on (its getrandom state): a refill that allocates does so in every
	// run, so one clean run out of three is the proof.
	c := &fakeClock{ms: t0}
	crypto := NewGenerator(WithClock(c.now))
	var got float64
	for range 3 {
		if got = testing.AllocsPerRun(1, func() {
			for range 5000 {
				c.ms++
				sink = crypto.New()
			}
		}); got == 0 {
			break
		}
	}
	if got != 0 {
		t.Errorf("crypto/rand refills: %v allocs in 5000 calls, want 0", got)
	}
	if got := testing.AllocsPerRun(1, func() {
		for range 5000 {
			sink = d.New()
		}
	}); got != 0 {
		t.Errorf("ChaCha8 refills: %v allocs in 5000 calls, want 0", got)
	}
	_ = sink
}
