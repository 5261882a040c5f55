package uuidv7

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"testing"
	"time"
)

var (
	sinkUUID  UUID
	sinkBool  bool
	sinkBytes []byte
	sinkStr   string
	sinkErr   error
)

// Baselines: the floor any generator pays (a clock read), and the naive
// generator that reads crypto/rand for every id.
func BenchmarkBaselineTimeNow(b *testing.B) {
	for b.Loop() {
		sinkUUID[0] = byte(time.Now().UnixMilli())
	}
}

func BenchmarkBaselineCryptoPerID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var u UUID
		binary.BigEndian.PutUint64(u[:8], uint64(time.Now().UnixMilli())<<16)
		_, _ = crand.Read(u[6:])
		u[6] = u[6]&0x0f | 0x70
		u[8] = u[8]&0x3f | 0x80
		sinkUUID = u
	}
}

func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkUUID = New()
	}
}

func BenchmarkNewParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var u UUID
		for pb.Next() {
			u = New()
		}
		sinkUUID = u
	})
}

func BenchmarkNewFreshMs(b *testing.B) {
	// Every id starts a millisecond: the path that draws randomness.
	b.ReportAllocs()
	g := NewDeterministic(1, 0, 1)
	for b.Loop() {
		sinkUUID = g.New()
	}
}

func BenchmarkNewBatch(b *testing.B) {
	for _, n := range []int{16, 1024} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]UUID, n)
			for b.Loop() {
				NewBatch(dst)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/id")
		})
	}
}

func BenchmarkNewAt(b *testing.B) {
	b.ReportAllocs()
	g := NewGenerator()
	for b.Loop() {
		sinkUUID, sinkErr = g.NewAt(t0)
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkUUID, sinkErr = Parse(rfcVector)
	}
}

func BenchmarkParseInvalid(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkUUID, sinkErr = Parse("017f22e2-79b0-4cc3-98c4-dc0c0c07398f")
	}
}

func BenchmarkIsValid(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkBool = IsValid(rfcVector)
	}
}

func BenchmarkString(b *testing.B) {
	b.ReportAllocs()
	u := MustParse(rfcVector)
	for b.Loop() {
		sinkStr = u.String()
	}
}

func BenchmarkAppendText(b *testing.B) {
	b.ReportAllocs()
	u := MustParse(rfcVector)
	buf := make([]byte, 0, 36)
	for b.Loop() {
		sinkBytes, _ = u.AppendText(buf[:0])
	}
}
