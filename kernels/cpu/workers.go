// Package cpu holds prefixd's CPU compute kernels in plain Go: matrix
// products, the row operations of a Llama block, and paged attention that
// reads K/V through block tables from KVCache, the CPU implementation of
// blockstore.Storage.
package cpu

import (
	"runtime"
	"sync"
)

// Workers is a fixed pool of goroutines that runs parallel loops, so no
// kernel starts a goroutine per call. It is safe for concurrent use; calls
// to For are serialised.
type Workers struct {
	n    int
	mu   sync.Mutex // one For at a time
	jobs chan job
	done sync.WaitGroup // the parts of the running For
	wg   sync.WaitGroup // the worker goroutines
}

type job struct {
	fn           func(part, lo, hi int)
	part, lo, hi int
}

// NewWorkers starts n workers; n <= 0 means GOMAXPROCS.
func NewWorkers(n int) *Workers {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	w := &Workers{n: n, jobs: make(chan job, n)}
	w.wg.Add(n - 1)
	for range n - 1 { // the caller runs one part itself
		go func() {
			defer w.wg.Done()
			for j := range w.jobs {
				j.fn(j.part, j.lo, j.hi)
				w.done.Done()
			}
		}()
	}
	return w
}

// N is the number of parts a For splits into at most.
func (w *Workers) N() int { return w.n }

// For runs fn over disjoint chunks [lo, hi) that cover [0, n), numbered
// part 0, 1, ... below N(), and returns when all are done. A loop of one
// chunk runs inline.
func (w *Workers) For(n int, fn func(part, lo, hi int)) {
	parts := min(w.n, n)
	if parts <= 1 {
		if n > 0 {
			fn(0, 0, n)
		}
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done.Add(parts - 1)
	for p := 1; p < parts; p++ {
		w.jobs <- job{fn: fn, part: p, lo: p * n / parts, hi: (p + 1) * n / parts}
	}
	fn(0, 0, n/parts)
	w.done.Wait()
}

// Close stops the workers. The pool must not be used afterwards.
func (w *Workers) Close() {
	close(w.jobs)
	w.wg.Wait()
}
