package cpu

import (
	"runtime"
	"sync"
)

// Workers is a fixed pool of goroutines that runs parallel loops, so no
// kernel starts a goroutine per call. It is safe for concurrent use; calls
// to For (and the kernels that use the pool) are serialised.
type Workers struct {
	n    int
	mu   sync.Mutex // one loop at a time; guards mm
	jobs chan job
	done sync.WaitGroup // the parts of the running loop
	wg   sync.WaitGroup // the worker goroutines
	mm   matmulTask     // MatMul's arguments, kept here so MatMul allocates nothing
}

// task is a parallel loop body; a pointer to a long-lived struct satisfies
// it without allocating, where a closure handed to another goroutine would
// escape to the heap on every call.
type task interface {
	run(part, lo, hi int)
}

type funcTask func(part, lo, hi int)

func (f funcTask) run(part, lo, hi int) { f(part, lo, hi) }

type job struct {
	t            task
	part, lo, hi int
}

// NewWorkers starts a pool of n workers, the calling goroutine being one of
// them; n <= 0 means runtime.GOMAXPROCS(0).
func NewWorkers(n int) *Workers {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	w := &Workers{n: n, jobs: make(chan job, n)}
	w.wg.Add(n - 1)
	for range n - 1 {
		go func() {
			defer w.wg.Done()
			for j := range w.jobs {
				j.t.run(j.part, j.lo, j.hi)
				w.done.Done()
			}
		}()
	}
	return w
}

// N is the most parts a For splits into.
func (w *Workers) N() int { return w.n }

// For runs fn over disjoint chunks [lo, hi) that cover [0, n), numbered
// part 0, 1, ... below N(), and returns when all are done. A loop of one
// chunk runs inline. fn must not call For, MatMul or Attention on the same
// pool: the pool runs one loop at a time, so that would deadlock.
func (w *Workers) For(n int, fn func(part, lo, hi int)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forLocked(n, funcTask(fn))
}

// forLocked runs t over [0, n) split into at most N parts; w.mu is held.
func (w *Workers) forLocked(n int, t task) {
	parts := min(w.n, n)
	if parts <= 1 {
		if n > 0 {
			t.run(0, 0, n)
		}
		return
	}
	w.done.Add(parts - 1)
	for p := 1; p < parts; p++ {
		w.jobs <- job{t: t, part: p, lo: p * n / parts, hi: (p + 1) * n / parts}
	}
	t.run(0, 0, n/parts)
	w.done.Wait()
}

// Close stops the workers. The pool must not be used afterwards.
func (w *Workers) Close() {
	close(w.jobs)
	w.wg.Wait()
}
