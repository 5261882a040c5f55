package objectid_test

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/objectid"
)

var (
	sinkID  objectid.ObjectID
	sinkStr string
	sinkU   [16]byte
)

// driverStyle is the baseline New is measured against: what the MongoDB Go
// driver's NewObjectID does (one time.Now, one atomic add, a process value
// drawn at init), written out here so the comparison runs without the
// driver as a dependency.
type driverStyle struct {
	process [5]byte
	counter atomic.Uint32
}

func newDriverStyle() *driverStyle {
	d := new(driverStyle)
	_, _ = rand.Read(d.process[:])
	return d
}

func (d *driverStyle) New() (id [12]byte) {
	binary.BigEndian.PutUint32(id[0:4], uint32(time.Now().Unix()))
	copy(id[4:9], d.process[:])
	c := d.counter.Add(1)
	id[9], id[10], id[11] = byte(c>>16), byte(c>>8), byte(c)
	return id
}

func BenchmarkTimeNow(b *testing.B) {
	// The floor for any generator that reads the clock per id.
	var s int64
	for b.Loop() {
		s += time.Now().Unix()
	}
	_ = s
}

func BenchmarkNew(b *testing.B) {
	b.Run("objectid.New", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkID = objectid.New()
		}
	})
	b.Run("Generator.New", func(b *testing.B) {
		g := objectid.NewGenerator()
		b.ReportAllocs()
		for b.Loop() {
			sinkID = g.New()
		}
	})
	b.Run("baseline=driver-style", func(b *testing.B) {
		d := newDriverStyle()
		b.ReportAllocs()
		for b.Loop() {
			sinkID = d.New()
		}
	})
}

func BenchmarkNewParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var id objectid.ObjectID
		for pb.Next() {
			id = objectid.New()
		}
		_ = id
	})
}

func BenchmarkBatch(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("NewBatch/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ids, _ := objectid.NewBatch(n)
				sinkID = ids[0]
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/id")
		})
		b.Run(fmt.Sprintf("AppendBatch/n=%d", n), func(b *testing.B) {
			buf := make([]objectid.ObjectID, 0, n)
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = objectid.AppendBatch(buf[:0], n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/id")
		})
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkID, _ = objectid.Parse("56e1fc72e0c917e9c4714161")
	}
}

func BenchmarkHex(b *testing.B) {
	id := objectid.MustParse("56e1fc72e0c917e9c4714161")
	b.ReportAllocs()
	for b.Loop() {
		sinkStr = id.Hex()
	}
}

func BenchmarkUUIDv7(b *testing.B) {
	id := objectid.MustParse("56e1fc72e0c917e9c4714161")
	b.ReportAllocs()
	for b.Loop() {
		sinkU = id.UUIDv7()
	}
}
