package parallel

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestEach(t *testing.T) {
	for _, tt := range []struct{ n, workers, wantMax int }{
		{n: 0, workers: 4, wantMax: 0},
		{n: 1, workers: 4, wantMax: 1},
		{n: 50, workers: 1, wantMax: 1},
		{n: 50, workers: 3, wantMax: 3},
	} {
		var (
			mu           sync.Mutex
			seen         = make([]int, tt.n)
			running, top atomic.Int32
		)
		Each(tt.n, tt.workers, func(i int) {
			now := running.Add(1)
			for {
				old := top.Load()
				if now <= old || top.CompareAndSwap(old, now) {
					break
				}
			}
			mu.Lock()
			seen[i]++
			mu.Unlock()
			running.Add(-1)
		})
		for i, c := range seen {
			if c != 1 {
				t.Errorf("n=%d workers=%d: do(%d) called %d times", tt.n, tt.workers, i, c)
			}
		}
		if got := int(top.Load()); got > tt.wantMax {
			t.Errorf("n=%d workers=%d: %d calls at a time, want at most %d", tt.n, tt.workers, got, tt.wantMax)
		}
	}
}
