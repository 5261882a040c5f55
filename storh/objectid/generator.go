package objectid

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Generator makes ObjectIDs from one random value and one counter. It is
// safe for concurrent use: the counter is a single atomic, so New and
// NewBatch take no lock.
//
// The zero value is ready to use; it reads time.Now and draws its random
// value and counter start from crypto/rand on first use. A Generator must
// not be copied after first use.
//
// Each Generator stands for one "process" in the MongoDB sense. Two
// generators in one program draw their own random values (unless told
// otherwise), so their ids collide only if those 40-bit values happen to
// be equal.
type Generator struct {
	once sync.Once
	// counter holds the last counter value handed out; only its low 24
	// bits are used. Because 2^32 is a multiple of 2^24, letting the
	// uint32 overflow and masking gives exactly the 24-bit wrap.
	counter atomic.Uint32
	// tail is the process random value shifted into the top 40 bits of the
	// id's last 8 bytes, so an id is two stores: seconds, then tail|counter.
	tail uint64

	now          func() time.Time
	rand         io.Reader
	random       uint64
	counterStart uint32
	fixedRandom  bool
	fixedCounter bool
}

// GeneratorOption configures a Generator made by NewGenerator.
type GeneratorOption func(*Generator)

// WithClock makes the generator take its seconds from now instead of
// time.Now. Only the whole seconds of the result are used (uint32 of
// Unix(), see the package documentation for times outside 1970..2106).
// A nil now means time.Now.
func WithClock(now func() time.Time) GeneratorOption {
	return func(g *Generator) { g.now = now }
}

// WithRandom makes the generator draw its random value (5 bytes, read
// first) and its counter start (3 bytes, read second) from r instead of
// crypto/rand, for reproducible tests. A value fixed by WithProcessRandom or
// WithCounterStart is not read. NewGenerator panics if r fails to deliver
// the bytes, since there is no sensible id to make without them. A nil r
// means crypto/rand.
func WithRandom(r io.Reader) GeneratorOption {
	return func(g *Generator) { g.rand = r }
}

// WithProcessRandom fixes the 40-bit random value. It panics with an error
// wrapping ErrRange if random > MaxRandom: the option is meant for constant
// arguments, and a silently truncated value would make unexpected ids.
//
// Two generators with the same random value produce colliding ids when
// their counters meet in the same second; use this only in tests or when a
// random value is assigned to each writer by some outside authority.
func WithProcessRandom(random uint64) GeneratorOption {
	if random > MaxRandom {
		panic(fmt.Errorf("%w: WithProcessRandom(%#x) does not fit in 40 bits", ErrRange, random))
	}
	return func(g *Generator) { g.random, g.fixedRandom = random, true }
}

// WithCounterStart fixes the counter value of the first id. It panics with
// an error wrapping ErrRange if c > MaxCounter.
func WithCounterStart(c uint32) GeneratorOption {
	if c > MaxCounter {
		panic(fmt.Errorf("%w: WithCounterStart(%#x) does not fit in 24 bits", ErrRange, c))
	}
	return func(g *Generator) { g.counterStart, g.fixedCounter = c, true }
}

// NewGenerator returns a Generator configured by opts. The random value and
// counter start are drawn here, not on first use, so a failing WithRandom
// reader panics at construction rather than inside some later New.
func NewGenerator(opts ...GeneratorOption) *Generator {
	g := new(Generator)
	for _, opt := range opts {
		opt(g)
	}
	g.once.Do(g.init)
	return g
}

func (g *Generator) init() {
	r := g.rand
	if r == nil {
		r = rand.Reader
	}
	var b [8]byte
	if !g.fixedRandom {
		if _, err := io.ReadFull(r, b[:5]); err != nil {
			panic(fmt.Errorf("objectid: reading the process random value: %w", err))
		}
		g.random = binary.BigEndian.Uint64(b[:]) >> 24
	}
	if !g.fixedCounter {
		b = [8]byte{}
		if _, err := io.ReadFull(r, b[5:8]); err != nil {
			panic(fmt.Errorf("objectid: reading the counter start: %w", err))
		}
		g.counterStart = uint32(binary.BigEndian.Uint64(b[:]))
	}
	g.tail = g.random << 24
	// counter holds the last value handed out; the first Add(1) yields
	// counterStart (for 0 this relies on the uint32 wrap to 0xFFFFFFFF).
	g.counter.Store(g.counterStart - 1)
}

func (g *Generator) seconds() uint32 {
	if g.now == nil {
		return uint32(time.Now().Unix())
	}
	return uint32(g.now().Unix())
}

// New returns the next ObjectID: the current second, the generator's random
// value and the next counter value.
func (g *Generator) New() ObjectID {
	g.once.Do(g.init)
	secs := g.seconds()
	c := g.counter.Add(1) & MaxCounter
	var id ObjectID
	binary.BigEndian.PutUint32(id[0:4], secs)
	binary.BigEndian.PutUint64(id[4:12], g.tail|uint64(c))
	return id
}

// NewBatch returns n ObjectIDs, 1 <= n <= MaxBatch, made with one clock
// read and one atomic reservation of n consecutive counter values: the ids
// share the second and the random value, their counters go up by one (with
// the 24-bit wrap), and no concurrent New can interleave with them. Other n
// return an error wrapping ErrBatchSize.
func (g *Generator) NewBatch(n int) ([]ObjectID, error) {
	if err := checkBatch(n); err != nil {
		return nil, err
	}
	return g.AppendBatch(make([]ObjectID, 0, n), n)
}

// AppendBatch is NewBatch appending to dst; it does not allocate when dst
// has room for n more ids. On error dst is returned unchanged.
func (g *Generator) AppendBatch(dst []ObjectID, n int) ([]ObjectID, error) {
	if err := checkBatch(n); err != nil {
		return dst, err
	}
	g.once.Do(g.init)
	secs := g.seconds()
	c := g.counter.Add(uint32(n)) - uint32(n) + 1
	dst = slices.Grow(dst, n)
	start := len(dst)
	dst = dst[:start+n]
	for i := range dst[start:] {
		id := &dst[start+i]
		binary.BigEndian.PutUint32(id[0:4], secs)
		binary.BigEndian.PutUint64(id[4:12], g.tail|uint64((c+uint32(i))&MaxCounter))
	}
	return dst, nil
}

func checkBatch(n int) error {
	if n < 1 || n > MaxBatch {
		return fmt.Errorf("%w: n=%d, want 1..%d", ErrBatchSize, n, MaxBatch)
	}
	return nil
}

// std is the process-wide generator behind the package-level functions. As
// a zero Generator it draws from crypto/rand lazily, so importing the
// package costs nothing until the first id is made.
var std Generator

// New returns an ObjectID from the process-wide generator. It is safe for
// concurrent use and does not allocate.
func New() ObjectID { return std.New() }

// NewBatch returns n ObjectIDs from the process-wide generator; see
// Generator.NewBatch. n outside 1..MaxBatch returns an error wrapping
// ErrBatchSize.
func NewBatch(n int) ([]ObjectID, error) { return std.NewBatch(n) }

// AppendBatch appends n ObjectIDs from the process-wide generator to dst;
// see Generator.AppendBatch.
func AppendBatch(dst []ObjectID, n int) ([]ObjectID, error) { return std.AppendBatch(dst, n) }
