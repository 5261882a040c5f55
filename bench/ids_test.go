package bench

import (
	"sync"
	"testing"

	gofrs "github.com/gofrs/uuid/v5"
	google "github.com/google/uuid"
	"github.com/oklog/ulid/v2"
	"github.com/rs/xid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Sinks keep the compiler from discarding the work being measured. Parallel
// benchmarks write them once per goroutine, under sinkMu, at the end.
var (
	sinkUUID  uuidv7.UUID
	sinkG     google.UUID
	sinkF     gofrs.UUID
	sinkULID  ulid.ULID
	sinkOID   objectid.ObjectID
	sinkBSON  bson.ObjectID
	sinkXID   xid.ID
	sinkBool  bool
	sinkErr   error
	sinkMu    sync.Mutex
	sinkBytes int
)

// idBatch is the batch size of the batched generators: ids are handed out
// one per benchmark iteration from a refilled buffer, so ns/op is per id.
const idBatch = 100

// idGen is one contender of a generator benchmark. run is called with a
// function that reports whether to produce another id; it returns nothing
// but must store its last id in a sink.
type idGen struct {
	name string
	run  func(next func() bool)
	// setup and teardown bracket the measurement (global state of a peer).
	setup, teardown func()
}

var uuidGens = []idGen{
	{name: "storh", run: func(next func() bool) {
		var u uuidv7.UUID
		for next() {
			u = uuidv7.New()
		}
		storeUUID(u)
	}},
	{name: "storh-batch100", run: func(next func() bool) {
		var buf [idBatch]uuidv7.UUID
		i := len(buf)
		var u uuidv7.UUID
		for next() {
			if i == len(buf) {
				uuidv7.NewBatch(buf[:])
				i = 0
			}
			u = buf[i]
			i++
		}
		storeUUID(u)
	}},
	{name: "google", run: runGoogleV7},
	{name: "google-randpool", run: runGoogleV7,
		// EnableRandPool is process-wide: it must not leak into the other
		// contenders, so it is switched on only around this one.
		setup: google.EnableRandPool, teardown: google.DisableRandPool},
	{name: "gofrs", run: func(next func() bool) {
		var u gofrs.UUID
		var err error
		for next() {
			u, err = gofrs.NewV7()
		}
		sinkMu.Lock()
		sinkF, sinkErr = u, err
		sinkMu.Unlock()
	}},
	{name: "oklog-ulid", run: func(next func() bool) {
		var u ulid.ULID
		for next() {
			u = ulid.Make()
		}
		sinkMu.Lock()
		sinkULID = u
		sinkMu.Unlock()
	}},
}

func runGoogleV7(next func() bool) {
	var u google.UUID
	var err error
	for next() {
		u, err = google.NewV7()
	}
	sinkMu.Lock()
	sinkG, sinkErr = u, err
	sinkMu.Unlock()
}

func storeUUID(u uuidv7.UUID) {
	sinkMu.Lock()
	sinkUUID = u
	sinkMu.Unlock()
}

var objectIDGens = []idGen{
	{name: "storh", run: func(next func() bool) {
		var id objectid.ObjectID
		for next() {
			id = objectid.New()
		}
		storeOID(id)
	}},
	{name: "storh-batch100", run: func(next func() bool) {
		// NewBatch returns a fresh slice: its one allocation per 100 ids
		// is part of the cost.
		var buf []objectid.ObjectID
		var id objectid.ObjectID
		for next() {
			if len(buf) == 0 {
				var err error
				if buf, err = objectid.NewBatch(idBatch); err != nil {
					panic(err)
				}
			}
			id, buf = buf[0], buf[1:]
		}
		storeOID(id)
	}},
	{name: "storh-appendbatch100", run: func(next func() bool) {
		// AppendBatch into a reused buffer: the allocation-free form.
		buf := make([]objectid.ObjectID, 0, idBatch)
		i := 0
		var id objectid.ObjectID
		for next() {
			if i == len(buf) {
				var err error
				if buf, err = objectid.AppendBatch(buf[:0], idBatch); err != nil {
					panic(err)
				}
				i = 0
			}
			id = buf[i]
			i++
		}
		storeOID(id)
	}},
	{name: "mongo", run: func(next func() bool) {
		var id bson.ObjectID
		for next() {
			id = bson.NewObjectID()
		}
		sinkMu.Lock()
		sinkBSON = id
		sinkMu.Unlock()
	}},
	{name: "xid", run: func(next func() bool) {
		var id xid.ID
		for next() {
			id = xid.New()
		}
		sinkMu.Lock()
		sinkXID = id
		sinkMu.Unlock()
	}},
}

func storeOID(id objectid.ObjectID) {
	sinkMu.Lock()
	sinkOID = id
	sinkMu.Unlock()
}

// runGens runs each generator as a sub-benchmark impl=<name>, on one
// goroutine or, with parallel, under b.RunParallel (GOMAXPROCS goroutines).
func runGens(b *testing.B, gens []idGen, parallel bool) {
	for _, g := range gens {
		b.Run("impl="+g.name, func(b *testing.B) {
			if g.setup != nil {
				g.setup()
				defer g.teardown()
			}
			b.ReportAllocs()
			if parallel {
				b.RunParallel(func(pb *testing.PB) { g.run(pb.Next) })
				return
			}
			g.run(b.Loop)
		})
	}
}

// BenchmarkUUIDNew: one id per op, single goroutine.
func BenchmarkUUIDNew(b *testing.B) { runGens(b, uuidGens, false) }

// BenchmarkUUIDNewParallel: one id per op, GOMAXPROCS goroutines sharing
// each library's process-wide generator.
func BenchmarkUUIDNewParallel(b *testing.B) { runGens(b, uuidGens, true) }

// BenchmarkObjectIDNew: one id per op, single goroutine.
func BenchmarkObjectIDNew(b *testing.B) { runGens(b, objectIDGens, false) }

// BenchmarkObjectIDNewParallel: one id per op, GOMAXPROCS goroutines.
func BenchmarkObjectIDNewParallel(b *testing.B) { runGens(b, objectIDGens, true) }

// BenchmarkUUIDParse parses the same canonical UUIDv7 string with each
// library. storh-isvalid only validates; storh-validate returns an error.
func BenchmarkUUIDParse(b *testing.B) {
	s := uuidv7.New().String()
	b.Run("impl=storh", func(b *testing.B) {
		b.ReportAllocs()
		var u uuidv7.UUID
		var err error
		for b.Loop() {
			u, err = uuidv7.Parse(s)
		}
		sinkUUID, sinkErr = u, err
	})
	b.Run("impl=storh-isvalid", func(b *testing.B) {
		b.ReportAllocs()
		var ok bool
		for b.Loop() {
			ok = uuidv7.IsValid(s)
		}
		sinkBool = ok
	})
	b.Run("impl=storh-validate", func(b *testing.B) {
		b.ReportAllocs()
		var err error
		for b.Loop() {
			err = uuidv7.Validate(s)
		}
		sinkErr = err
	})
	b.Run("impl=google", func(b *testing.B) {
		b.ReportAllocs()
		var u google.UUID
		var err error
		for b.Loop() {
			u, err = google.Parse(s)
		}
		sinkG, sinkErr = u, err
	})
	b.Run("impl=gofrs", func(b *testing.B) {
		b.ReportAllocs()
		var u gofrs.UUID
		var err error
		for b.Loop() {
			u, err = gofrs.FromString(s)
		}
		sinkF, sinkErr = u, err
	})
}

// BenchmarkUUIDString formats an id as its canonical string.
func BenchmarkUUIDString(b *testing.B) {
	u := uuidv7.New()
	g := google.UUID(u)
	b.Run("impl=storh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkBytes += len(u.String())
		}
	})
	b.Run("impl=google", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkBytes += len(g.String())
		}
	})
}

// BenchmarkObjectIDParse parses the same 24-hex-digit string.
func BenchmarkObjectIDParse(b *testing.B) {
	s := objectid.New().Hex()
	b.Run("impl=storh", func(b *testing.B) {
		b.ReportAllocs()
		var id objectid.ObjectID
		var err error
		for b.Loop() {
			id, err = objectid.Parse(s)
		}
		sinkOID, sinkErr = id, err
	})
	b.Run("impl=storh-isvalid", func(b *testing.B) {
		b.ReportAllocs()
		var ok bool
		for b.Loop() {
			ok = objectid.IsValid(s)
		}
		sinkBool = ok
	})
	b.Run("impl=mongo", func(b *testing.B) {
		b.ReportAllocs()
		var id bson.ObjectID
		var err error
		for b.Loop() {
			id, err = bson.ObjectIDFromHex(s)
		}
		sinkBSON, sinkErr = id, err
	})
}
