package engine

import (
	"runtime"
	"strconv"

	"github.com/petermattis/goid"
)

// goroutineID returns the calling goroutine's id. The nested-transaction
// guard asks for it on every database call while a callback is open, so it
// must be cheap: goid.Get reads it from the runtime's goroutine structure
// (a few nanoseconds). Its knowledge of that structure is per Go release,
// so it is checked once against the runtime's own account, and the slow
// but always right parse of runtime.Stack replaces it if they disagree.
var goroutineID = pickGoroutineID()

func pickGoroutineID() func() int64 {
	agree := goid.Get() == stackGoroutineID()
	ch := make(chan bool)
	go func() { ch <- goid.Get() == stackGoroutineID() }()
	if agree && <-ch {
		return goid.Get
	}
	return stackGoroutineID
}

// stackGoroutineID parses the id from the header runtime.Stack writes,
// "goroutine 123 [running]:". It costs microseconds.
func stackGoroutineID() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = len("goroutine ")
	if len(b) <= prefix {
		return 0
	}
	b = b[prefix:]
	end := 0
	for end < len(b) && b[end] >= '0' && b[end] <= '9' {
		end++
	}
	id, _ := strconv.ParseInt(string(b[:end]), 10, 64)
	return id
}
