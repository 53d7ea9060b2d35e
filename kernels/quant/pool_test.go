package quant

import "sync"

// testPool is a fixed pool of goroutines with a ParallelFor, for the tests
// and benchmarks: kernels/cpu's Workers would do, but kernels/cpu imports this
// package (its backend multiplies through it), so this package's tests
// cannot import it back.
type testPool struct {
	n    int
	jobs chan func()
	wg   sync.WaitGroup
}

// newTestPool starts n−1 goroutines; the caller of For is the n-th.
func newTestPool(n int) *testPool {
	p := &testPool{n: n, jobs: make(chan func())}
	for range n - 1 {
		go func() {
			for j := range p.jobs {
				j()
			}
		}()
	}
	return p
}

// For runs f over n split into at most p.n parts and waits for them.
func (p *testPool) For(n int, f func(part, lo, hi int)) {
	parts := min(p.n, n)
	if parts <= 1 {
		if n > 0 {
			f(0, 0, n)
		}
		return
	}
	p.wg.Add(parts - 1)
	for i := 1; i < parts; i++ {
		lo, hi := i*n/parts, (i+1)*n/parts
		p.jobs <- func() { f(i, lo, hi); p.wg.Done() }
	}
	f(0, 0, n/parts)
	p.wg.Wait()
}

// Close stops the goroutines.
func (p *testPool) Close() { close(p.jobs) }
