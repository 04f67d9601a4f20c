// Package parallel runs independent pieces of work on the machine's
// processors.
package parallel

import (
	"runtime"
	"sync"
)

// Each calls do(0) … do(n-1), workers of them at a time (GOMAXPROCS when
// workers <= 0), handing out i in increasing order as workers free, and
// returns when all have returned. The calls must not depend on each
// other's order.
func Each(n, workers int, do func(i int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			do(i)
		}
		return
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				do(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
