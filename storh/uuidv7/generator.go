package uuidv7

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	mrand "math/rand/v2"
	"sync"
	"time"
)

const (
	randBMask = 1<<62 - 1 // rand_b: the low 62 bits of the last 8 bytes
	randAMask = 1<<12 - 1 // rand_a: the low 12 bits of bytes 6 and 7

	// freshAMask clears the top bit of rand_a when a millisecond starts.
	// The 74-bit counter then starts below 2^73 and a burst can take at
	// least 2^73 ids from one millisecond before it overflows, instead of
	// overflowing early when the draw lands near the top. The price is one
	// bit of the 74 random bits of the first id of each millisecond.
	freshAMask = randAMask >> 1

	// randBufSize is how much randomness is read at once: 409 fresh
	// milliseconds per read, so no id pays for a system call of its own.
	randBufSize = 4096
	randDraw    = 10 // bytes per fresh millisecond: 16 bits for rand_a, 64 for rand_b
)

// counter is the 74 bits rand_a ‖ rand_b, treated as one number.
type counter struct {
	a uint64 // rand_a, 12 bits
	b uint64 // rand_b, 62 bits
}

// inc adds one. On overflow it leaves c at its maximum and returns false.
func (c *counter) inc() bool {
	if c.b < randBMask {
		c.b++
		return true
	}
	if c.a < randAMask {
		c.a, c.b = c.a+1, 0
		return true
	}
	return false
}

func encode(ms int64, c counter) UUID {
	var u UUID
	binary.BigEndian.PutUint64(u[:8], uint64(ms)<<16|0x7000|c.a)
	binary.BigEndian.PutUint64(u[8:], 1<<63|c.b)
	return u
}

// Generator mints UUIDv7s that strictly increase in the order they are
// made. It is safe for concurrent use. Create one with [NewGenerator] or
// [NewDeterministic]; the zero Generator works too and behaves like
// NewGenerator() with no options. A Generator must not be copied after first
// use.
//
// Clock-driven ids ([Generator.New], [Generator.NewBatch]) follow RFC 9562
// section 6.2 method 2 ("monotonic random"): on a new millisecond the 74 bits
// rand_a ‖ rand_b are drawn fresh (with the top bit cleared as headroom);
// within the same millisecond, or when the clock goes backwards, the
// previous 74 bits are incremented by one and the previous, larger
// millisecond is kept. If the 74 bits overflow, the generator moves on to
// the next millisecond ahead of the clock.
//
// Explicit-time ids ([Generator.NewAt]) keep a separate state, so they never
// change the timestamp of later clock-driven ids.
type Generator struct {
	mu    sync.Mutex
	clock func(n int) int64 // nil: time.Now; n is the number of ids about to be made
	rand  io.Reader         // nil: crypto/rand

	// clock-driven state
	started bool
	lastMs  int64
	seq     counter

	// NewAt state
	atValid bool
	atMs    int64
	at      counter

	bufPos, bufEnd int
	buf            [randBufSize]byte
}

// GeneratorOption configures a [Generator] made by [NewGenerator].
type GeneratorOption func(*Generator)

// WithClock makes the generator read the time from now instead of
// time.Now. now is called with the generator's lock held: it need not be
// safe for concurrent use, and must not call back into the generator. Times
// before 1970 count as 0 ms, times after the year 10889 as [MaxTimestampMs].
// A nil now restores time.Now.
func WithClock(now func() time.Time) GeneratorOption {
	return func(g *Generator) {
		if now == nil {
			g.clock = nil
			return
		}
		g.clock = func(int) int64 { return now().UnixMilli() }
	}
}

// WithRandom makes the generator draw its random bits from r instead of
// crypto/rand, for example from a seeded math/rand/v2 ChaCha8 in tests. r is
// read in chunks of up to 4 KiB with the generator's lock held; short reads
// are fine. If r returns an error before delivering the 10 bytes a new
// millisecond needs, the generator panics: an id without its random bits
// could collide. A nil r restores crypto/rand.
//
// Ids are only as unguessable as r; with crypto/rand the first id of each
// millisecond carries 73 random bits, and the ids after it in the same
// millisecond are that value plus one, two, and so on.
func WithRandom(r io.Reader) GeneratorOption {
	return func(g *Generator) {
		g.rand = r
		g.bufPos, g.bufEnd = 0, 0
	}
}

// NewGenerator returns a Generator with its own monotonic state. By default
// it reads time.Now and crypto/rand; see [WithClock] and [WithRandom].
func NewGenerator(opts ...GeneratorOption) *Generator {
	g := &Generator{}
	for _, opt := range opts {
		opt(g)
	}
	return g
}

// NewDeterministic returns a Generator for tests that need the same ids on
// every run: its clock starts at startMs and moves by stepMs each time an id
// is made (0 keeps it still, a negative step runs it backwards), and its
// randomness is a ChaCha8 stream seeded with seed. The same arguments give the
// same sequence of ids, in this process or any other, as long as the same
// calls are made in the same order.
//
// [Generator.NewBatch] reads the clock once and then moves it by
// len(dst)*stepMs, so a batch shares one millisecond. [Generator.NewAt] does
// not move the clock. Clock values outside [0, MaxTimestampMs] are clamped.
// [Generator.Reset] forgets the monotonic state but neither rewinds the clock
// nor reseeds: call NewDeterministic again to replay a sequence.
//
// The ids are predictable by design; never use them where ids must be
// unguessable.
func NewDeterministic(seed uint64, startMs int64, stepMs int64) *Generator {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	t := clampTick(startMs)
	return &Generator{
		rand: mrand.NewChaCha8(s),
		clock: func(n int) int64 {
			ms := t
			t = clampTick(t + scaleStep(stepMs, n))
			return ms
		},
	}
}

// tickLimit bounds the deterministic clock well outside the valid range, so
// that adding a step can never overflow an int64.
const tickLimit = 1 << 52

func clampTick(t int64) int64 { return min(max(t, -tickLimit), tickLimit) }

// scaleStep returns step*n, saturated at ±tickLimit.
func scaleStep(step int64, n int) int64 {
	abs := uint64(step)
	if step < 0 {
		abs = -abs
	}
	hi, lo := bits.Mul64(abs, uint64(n))
	if hi != 0 || lo > tickLimit {
		lo = tickLimit
	}
	if step < 0 {
		return -int64(lo)
	}
	return int64(lo)
}

// New returns an id greater than every id this generator has returned from
// New or NewBatch before. It does not allocate and makes no system call
// except to refill its 4 KiB randomness buffer.
//
// New panics only if the randomness source fails (see [WithRandom]) or if
// the generator runs out of milliseconds after [MaxTimestampMs].
func (g *Generator) New() UUID {
	if g.clock == nil {
		// time.Now outside the lock: a goroutine that reads an older time
		// but takes the lock later still gets a larger id, by the
		// clock-regression rule.
		ms := clampMs(time.Now().UnixMilli())
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.nextLocked(ms)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nextLocked(clampMs(g.clock(1)))
}

// NewBatch fills dst with len(dst) ids under one lock and one clock read.
// The ids strictly increase, are greater than every id the generator made
// before and smaller than every id it makes after. It does not allocate.
func (g *Generator) NewBatch(dst []UUID) {
	if len(dst) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var ms int64
	if g.clock == nil {
		ms = time.Now().UnixMilli()
	} else {
		ms = g.clock(len(dst))
	}
	dst[0] = g.nextLocked(clampMs(ms))
	// The rest only count up. Work on copies so the compiler can keep them
	// in registers while writing dst, and leave the rare overflow to
	// nextLocked.
	lastMs, seq := g.lastMs, g.seq
	for i := 1; i < len(dst); i++ {
		if !seq.inc() {
			g.seq = seq
			dst[i] = g.nextLocked(lastMs)
			lastMs, seq = g.lastMs, g.seq
			continue
		}
		dst[i] = encode(lastMs, seq)
	}
	g.seq = seq
}

func (g *Generator) nextLocked(ms int64) UUID {
	switch {
	case !g.started || ms > g.lastMs:
		// Draw before touching the state: if the source panics, the
		// next call must not count up from bits that were never drawn.
		g.seq = g.fresh()
		g.started, g.lastMs = true, ms
	case !g.seq.inc():
		// All 74 bits used in this millisecond: borrow the next one.
		if g.lastMs >= MaxTimestampMs {
			panic("uuidv7: generator exhausted: no millisecond after MaxTimestampMs")
		}
		g.seq = g.fresh()
		g.lastMs++
	}
	return encode(g.lastMs, g.seq)
}

// NewAt returns an id whose timestamp is exactly ms. It fails with
// [ErrTimestampRange] if ms is outside [0, MaxTimestampMs].
//
// Consecutive NewAt calls with the same ms return increasing ids, so fixtures
// made with NewAt(t), NewAt(t), NewAt(t+1) sort in the order they were made;
// a call with a different ms starts that millisecond afresh, so after
// NewAt(t), NewAt(u), NewAt(t) the last id is ordered randomly against the
// first. If one millisecond's 74-bit counter runs out, NewAt fails with
// [ErrExhausted] rather than change ms.
//
// NewAt has its own state: it never affects ids from New or NewBatch, so an
// id made far in the future does not drag later clock-driven ids with it.
func (g *Generator) NewAt(ms int64) (UUID, error) {
	if ms < 0 || ms > MaxTimestampMs {
		return Nil, fmt.Errorf("%w: %d ms, want 0..%d", ErrTimestampRange, ms, int64(MaxTimestampMs))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.atValid && g.atMs == ms {
		if !g.at.inc() {
			return Nil, fmt.Errorf("%w: %d ms", ErrExhausted, ms)
		}
	} else {
		g.at = g.fresh()
		g.atValid, g.atMs = true, ms
	}
	return encode(ms, g.at), nil
}

// Reset forgets the monotonic state of both New and NewAt: the next id
// starts its millisecond afresh, even if the clock is behind the last id.
// The clock and the randomness source are kept. Meant for tests.
func (g *Generator) Reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.started, g.lastMs, g.seq = false, 0, counter{}
	g.atValid, g.atMs, g.at = false, 0, counter{}
}

// fresh draws a new starting counter for a millisecond.
func (g *Generator) fresh() counter {
	if g.bufEnd-g.bufPos < randDraw {
		g.refill()
	}
	b := g.buf[g.bufPos : g.bufPos+randDraw]
	g.bufPos += randDraw
	return counter{
		a: uint64(binary.BigEndian.Uint16(b[:2])) & freshAMask,
		b: binary.BigEndian.Uint64(b[2:]) & randBMask,
	}
}

// refill tops the buffer up, keeping unread bytes so that an injected
// source is consumed byte for byte whatever its read sizes.
func (g *Generator) refill() {
	n := copy(g.buf[:], g.buf[g.bufPos:g.bufEnd])
	if g.rand == nil {
		// crypto/rand.Read never returns an error (since Go 1.24 it
		// crashes the program if the kernel cannot deliver).
		_, _ = crand.Read(g.buf[n:])
		g.bufPos, g.bufEnd = 0, len(g.buf)
		return
	}
	m, err := io.ReadAtLeast(g.rand, g.buf[n:], randDraw-n)
	if err != nil {
		panic(fmt.Sprintf("uuidv7: reading randomness: %v", err))
	}
	g.bufPos, g.bufEnd = 0, n+m
}

// defaultGen backs the package-level functions.
var defaultGen Generator

// New returns a new UUIDv7 from the process-wide generator: greater than
// every id New or NewBatch returned before in this process, safe for
// concurrent use, and free of allocations. See [Generator] for how
// monotonicity works and where it ends (it is per process).
func New() UUID { return defaultGen.New() }

// NewAt returns a UUIDv7 with timestamp exactly ms from the process-wide
// generator; see [Generator.NewAt].
func NewAt(ms int64) (UUID, error) { return defaultGen.NewAt(ms) }

// NewBatch fills dst with consecutive ids from the process-wide generator
// under one lock and one clock read; see [Generator.NewBatch].
func NewBatch(dst []UUID) { defaultGen.NewBatch(dst) }

// ResetForTests resets the monotonic state of the process-wide generator
// (see [Generator.Reset]). Only tests should call it: after a reset, New may
// return ids smaller than ones it returned before.
func ResetForTests() { defaultGen.Reset() }
