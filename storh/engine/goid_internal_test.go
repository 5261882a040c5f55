package engine

import (
	"sync"
	"testing"
)

// TestGoroutineIDAgreesWithRuntime: the fast goroutine id matches the
// runtime's own account on many goroutines, and ids differ between them.
func TestGoroutineIDAgreesWithRuntime(t *testing.T) {
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			fast, slow := goroutineID(), stackGoroutineID()
			mu.Lock()
			defer mu.Unlock()
			if fast != slow || fast <= 0 {
				t.Errorf("goroutineID = %d, runtime.Stack says %d", fast, slow)
			}
			if seen[fast] {
				t.Errorf("two live goroutines share id %d", fast)
			}
			seen[fast] = true
		})
	}
	wg.Wait()
}

func BenchmarkGoroutineID(b *testing.B) {
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			goroutineID()
		}
	})
	b.Run("stack", func(b *testing.B) {
		for b.Loop() {
			stackGoroutineID()
		}
	})
}
