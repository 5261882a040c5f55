package objectid_test

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/objectid"
)

func fixedClock(secs int64) objectid.GeneratorOption {
	return objectid.WithClock(func() time.Time { return time.Unix(secs, 0) })
}

func TestGeneratorSourceExample(t *testing.T) {
	g := objectid.NewGenerator(fixedClock(1700000000),
		objectid.WithProcessRandom(0x3f2a91c8d4), objectid.WithCounterStart(12345))
	for _, want := range []string{"6553f1003f2a91c8d4003039", "6553f1003f2a91c8d400303a", "6553f1003f2a91c8d400303b"} {
		if got := g.New().Hex(); got != want {
			t.Fatalf("New = %s, want %s", got, want)
		}
	}
}

func TestGeneratorWithRandom(t *testing.T) {
	// 5 bytes of random value first, then 3 bytes of counter start.
	src := []byte{0x3f, 0x2a, 0x91, 0xc8, 0xd4, 0x00, 0x30, 0x39, 0xee}
	r := bytes.NewReader(src)
	g := objectid.NewGenerator(fixedClock(1700000000), objectid.WithRandom(r))
	if got := g.New().Hex(); got != "6553f1003f2a91c8d4003039" {
		t.Fatalf("New = %s", got)
	}
	if r.Len() != 1 {
		t.Errorf("generator read %d bytes, want 8", len(src)-r.Len())
	}

	// Fixed parts are not read from the reader.
	r = bytes.NewReader([]byte{0xab, 0xcd, 0xef})
	g = objectid.NewGenerator(objectid.WithRandom(r), objectid.WithProcessRandom(7))
	if id := g.New(); id.Random() != 7 || id.Counter() != 0xabcdef || r.Len() != 0 {
		t.Errorf("random=%#x counter=%#x left=%d", id.Random(), id.Counter(), r.Len())
	}
	r = bytes.NewReader([]byte{1, 2, 3, 4, 5})
	g = objectid.NewGenerator(objectid.WithRandom(r), objectid.WithCounterStart(9))
	if id := g.New(); id.Random() != 0x0102030405 || id.Counter() != 9 || r.Len() != 0 {
		t.Errorf("random=%#x counter=%#x left=%d", id.Random(), id.Counter(), r.Len())
	}
	// Nothing is read when both are fixed, not even from a broken reader.
	g = objectid.NewGenerator(objectid.WithRandom(errReader{}), objectid.WithProcessRandom(1), objectid.WithCounterStart(2))
	if id := g.New(); id.Random() != 1 || id.Counter() != 2 {
		t.Errorf("random=%#x counter=%#x", id.Random(), id.Counter())
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("entropy exhausted") }

func TestGeneratorOptionPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
		is   error
		msg  string
	}{
		{"short reader", func() { objectid.NewGenerator(objectid.WithRandom(bytes.NewReader([]byte{1, 2}))) }, io.ErrUnexpectedEOF, "objectid: reading the process random value"},
		{"short reader for counter", func() {
			objectid.NewGenerator(objectid.WithRandom(bytes.NewReader([]byte{1, 2, 3, 4, 5, 6})))
		}, io.ErrUnexpectedEOF, "objectid: reading the counter start"},
		{"failing reader", func() { objectid.NewGenerator(objectid.WithRandom(errReader{})) }, nil, "entropy exhausted"},
		{"random too big", func() { objectid.WithProcessRandom(objectid.MaxRandom + 1) }, objectid.ErrRange, "WithProcessRandom(0x10000000000)"},
		{"counter too big", func() { objectid.WithCounterStart(objectid.MaxCounter + 1) }, objectid.ErrRange, "WithCounterStart(0x1000000)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				err, ok := recover().(error)
				if !ok {
					t.Fatalf("no panic with an error")
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Errorf("panic %v does not wrap %v", err, tt.is)
				}
				if !strings.HasPrefix(err.Error(), "objectid: ") || !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("panic message %q, want it to contain %q", err, tt.msg)
				}
			}()
			tt.f()
		})
	}
}

func TestNilOptionsMeanDefaults(t *testing.T) {
	g := objectid.NewGenerator(objectid.WithClock(nil), objectid.WithRandom(nil))
	before := time.Now().Unix()
	id := g.New()
	after := time.Now().Unix()
	if s := int64(id.Seconds()); s < before || s > after {
		t.Errorf("Seconds %d not in [%d, %d]", s, before, after)
	}
}

func TestCounterWrap(t *testing.T) {
	g := objectid.NewGenerator(fixedClock(1), objectid.WithProcessRandom(5), objectid.WithCounterStart(0xFFFFFF))
	var got []uint32
	for range 3 {
		got = append(got, g.New().Counter())
	}
	if want := []uint32{0xFFFFFF, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("counters %x, want %x", got, want)
	}

	g = objectid.NewGenerator(fixedClock(1), objectid.WithProcessRandom(5), objectid.WithCounterStart(0xFFFFFE))
	ids, err := g.NewBatch(4)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := counters(ids), []uint32{0xFFFFFE, 0xFFFFFF, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("batch counters %x, want %x", got, want)
	}
	for _, id := range ids {
		if id.Random() != 5 || id.Seconds() != 1 {
			t.Errorf("%s: wrap leaked into the other fields", id)
		}
	}
	if c := g.New().Counter(); c != 2 {
		t.Errorf("after the batch: counter %d, want 2", c)
	}

	// Start 0 relies on the uint32 wrap of the internal "last value" too.
	g = objectid.NewGenerator(objectid.WithCounterStart(0))
	if c := g.New().Counter(); c != 0 {
		t.Errorf("start 0: first counter %d", c)
	}
}

func TestCounterWrapsAfter2To24(t *testing.T) {
	// A full lap of the counter: 2^24 ids later the counter is back where it
	// started, and in between it visited every value exactly once.
	if testing.Short() {
		t.Skip("16M ids")
	}
	g := objectid.NewGenerator(fixedClock(1), objectid.WithCounterStart(123))
	seen := make([]bool, 1<<24)
	buf := make([]objectid.ObjectID, 0, objectid.MaxBatch)
	for n := 0; n < 1<<24; {
		k := min(objectid.MaxBatch, 1<<24-n)
		buf, _ = g.AppendBatch(buf[:0], k)
		for _, id := range buf {
			if seen[id.Counter()] {
				t.Fatalf("counter %d repeated within one lap", id.Counter())
			}
			seen[id.Counter()] = true
		}
		n += k
	}
	if c := g.New().Counter(); c != 123 {
		t.Errorf("after a lap: counter %d, want 123", c)
	}
}

func TestNewBatchSize(t *testing.T) {
	g := objectid.NewGenerator()
	for _, n := range []int{0, -1, 101, -1 << 62, 1 << 40} {
		ids, err := g.NewBatch(n)
		if !errors.Is(err, objectid.ErrBatchSize) || ids != nil {
			t.Errorf("NewBatch(%d) = %d ids, %v; want ErrBatchSize", n, len(ids), err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "objectid: batch size out of range: ") {
			t.Errorf("NewBatch(%d): message %q", n, err)
		}
		if _, err := objectid.NewBatch(n); !errors.Is(err, objectid.ErrBatchSize) {
			t.Errorf("package NewBatch(%d): %v", n, err)
		}
		dst := []objectid.ObjectID{objectid.Nil}
		out, err := g.AppendBatch(dst, n)
		if !errors.Is(err, objectid.ErrBatchSize) || len(out) != 1 {
			t.Errorf("AppendBatch(%d) = %d ids, %v", n, len(out), err)
		}
	}
	for _, n := range []int{1, 2, 99, 100} {
		ids, err := g.NewBatch(n)
		if err != nil || len(ids) != n {
			t.Fatalf("NewBatch(%d) = %d ids, %v", n, len(ids), err)
		}
		checkBatch(t, ids)
		ids, err = objectid.NewBatch(n)
		if err != nil || len(ids) != n {
			t.Fatalf("package NewBatch(%d) = %d ids, %v", n, len(ids), err)
		}
		checkBatch(t, ids)
	}
}

// checkBatch asserts one second, one random value and consecutive counters.
func checkBatch(t *testing.T, ids []objectid.ObjectID) {
	t.Helper()
	for i, id := range ids[1:] {
		prev := ids[i]
		if id.Seconds() != prev.Seconds() || id.Random() != prev.Random() {
			t.Fatalf("batch mixes %s and %s", prev, id)
		}
		if id.Counter() != (prev.Counter()+1)&objectid.MaxCounter {
			t.Fatalf("counters not consecutive: %s then %s", prev, id)
		}
	}
}

func TestAppendBatch(t *testing.T) {
	g := objectid.NewGenerator(fixedClock(1700000000), objectid.WithProcessRandom(0x3f2a91c8d4), objectid.WithCounterStart(12345))
	head := objectid.MustParse("507f1f77bcf86cd799439011")
	out, err := g.AppendBatch([]objectid.ObjectID{head}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, id := range out {
		got = append(got, id.Hex())
	}
	want := "507f1f77bcf86cd799439011 6553f1003f2a91c8d4003039 6553f1003f2a91c8d400303a 6553f1003f2a91c8d400303b"
	if strings.Join(got, " ") != want {
		t.Errorf("AppendBatch = %v", got)
	}
	// With room in dst the ids land in the same backing array.
	buf := make([]objectid.ObjectID, 0, 10)
	out, _ = g.AppendBatch(buf, 10)
	if &out[0] != &buf[:1][0] {
		t.Error("AppendBatch reallocated although dst had room")
	}
}

func TestBatchAndNewInterleave(t *testing.T) {
	// A batch is one reservation: later ids continue after it.
	g := objectid.NewGenerator(objectid.WithCounterStart(10))
	a := g.New()
	b, _ := g.NewBatch(5)
	c := g.New()
	if a.Counter() != 10 || b[0].Counter() != 11 || b[4].Counter() != 15 || c.Counter() != 16 {
		t.Errorf("counters %d, %d..%d, %d", a.Counter(), b[0].Counter(), b[4].Counter(), c.Counter())
	}
}

func TestZeroGenerator(t *testing.T) {
	var g1, g2 objectid.Generator
	a, b := g1.New(), g2.New()
	if a.Random() == b.Random() {
		// 2^-40 chance by accident; far likelier a missing draw.
		t.Errorf("two zero Generators share random value %#x", a.Random())
	}
	ids, err := g1.NewBatch(3)
	if err != nil {
		t.Fatal(err)
	}
	if ids[0].Random() != a.Random() || ids[0].Counter() != (a.Counter()+1)&objectid.MaxCounter {
		t.Errorf("zero Generator lost its state: %s then %s", a, ids[0])
	}
}

func TestPackageNew(t *testing.T) {
	before := time.Now().Unix()
	a := objectid.New()
	b := objectid.New()
	after := time.Now().Unix()
	if a.Random() != b.Random() {
		t.Errorf("process random value changed: %#x, %#x", a.Random(), b.Random())
	}
	if a == b {
		t.Errorf("New returned %s twice", a)
	}
	// Which clock is read, not how fast: bracketed by two reads of it.
	if s := int64(b.Seconds()); s < before || s > after {
		t.Errorf("Seconds %d not in [%d, %d]", s, before, after)
	}
	other := objectid.NewGenerator().New()
	if other.Random() == a.Random() {
		t.Errorf("NewGenerator reused the process random value %#x", a.Random())
	}
}

func TestConcurrentUnique(t *testing.T) {
	// Eight goroutines mixing New and batches. With a frozen clock every id
	// depends on the counter alone, so uniqueness means the atomic
	// reservation never hands out a value twice; together they must cover
	// exactly the consecutive range from the start value.
	const workers, perWorker = 8, 20000
	const start = 0xFFFF00 // crosses the 24-bit wrap
	g := objectid.NewGenerator(fixedClock(1700000000), objectid.WithProcessRandom(1), objectid.WithCounterStart(start))
	results := make([][]objectid.ObjectID, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]objectid.ObjectID, 0, perWorker)
			for len(out) < perWorker {
				if n := (len(out)/7)%objectid.MaxBatch + 1; n > 1 && len(out)+n <= perWorker {
					var err error
					out, err = g.AppendBatch(out, n)
					if err != nil {
						t.Error(err)
						return
					}
					checkBatch(t, out[len(out)-n:])
					continue
				}
				out = append(out, g.New())
			}
			results[w] = out
		}()
	}
	// The package-level generator is exercised at the same time, for -race.
	pkg := make([][]objectid.ObjectID, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				if i%10 == 0 {
					ids, _ := objectid.NewBatch(10)
					pkg[w] = append(pkg[w], ids...)
				} else {
					pkg[w] = append(pkg[w], objectid.New())
				}
			}
		}()
	}
	wg.Wait()

	seen := make(map[objectid.ObjectID]bool, workers*perWorker)
	for _, ids := range results {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("duplicate %s", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != workers*perWorker {
		t.Fatalf("%d ids, want %d", len(seen), workers*perWorker)
	}
	for i := range workers * perWorker {
		id, _ := objectid.FromParts(1700000000, 1, (start+uint32(i))&objectid.MaxCounter)
		if !seen[id] {
			t.Fatalf("counter %#x was skipped", id.Counter())
		}
	}

	seen = make(map[objectid.ObjectID]bool)
	for _, ids := range pkg {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("package New: duplicate %s", id)
			}
			seen[id] = true
		}
	}
}

func TestAllocs(t *testing.T) {
	g := objectid.NewGenerator()
	id := objectid.MustParse("56e1fc72e0c917e9c4714161")
	text := []byte(id.Hex())
	var textAny any = text // converting in the closure would be the caller's allocation
	jsonText := []byte(`"` + id.Hex() + `"`)
	buf := make([]objectid.ObjectID, 0, objectid.MaxBatch)
	textBuf := make([]byte, 0, 64)
	var sink objectid.ObjectID
	var sinkS string
	tests := []struct {
		name string
		want float64
		f    func()
	}{
		{"New", 0, func() { sink = objectid.New() }},
		{"Generator.New", 0, func() { sink = g.New() }},
		{"Parse", 0, func() { sink, _ = objectid.Parse("56e1fc72e0c917e9c4714161") }},
		{"IsValid", 0, func() { _ = objectid.IsValid("56e1fc72e0c917e9c4714161") }},
		{"UnmarshalText", 0, func() { _ = sink.UnmarshalText(text) }},
		{"UnmarshalJSON", 0, func() { _ = sink.UnmarshalJSON(jsonText) }},
		{"Scan bytes", 0, func() { _ = sink.Scan(textAny) }},
		{"AppendText", 0, func() { textBuf, _ = id.AppendText(textBuf[:0]) }},
		{"AppendBatch with room", 0, func() { buf, _ = g.AppendBatch(buf[:0], objectid.MaxBatch) }},
		{"UUIDv7", 0, func() { _ = id.UUIDv7() }},
		{"Hex", 1, func() { sinkS = id.Hex() }},
		{"NewBatch", 1, func() { _, _ = objectid.NewBatch(objectid.MaxBatch) }},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(100, tt.f); got != tt.want {
			t.Errorf("%s: %v allocs, want %v", tt.name, got, tt.want)
		}
	}
	_, _ = sink, sinkS
}

func counters(ids []objectid.ObjectID) []uint32 {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = id.Counter()
	}
	return out
}
