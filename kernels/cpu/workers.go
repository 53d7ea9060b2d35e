package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Workers is a fixed pool of goroutines that runs parallel loops, so no
// kernel starts a goroutine per call. It is safe for concurrent use; calls
// to For (and the kernels that use the pool) are serialised.
//
// A forward pass runs some fifty parallel loops a token, separated by
// microseconds of single-threaded work (a norm, a RoPE). A worker parked in
// the Go scheduler takes tens of microseconds to wake, so between loops the
// workers, and the caller waiting for them, spin for up to spinFor before
// they park; the loops of one pass then start and end within a
// microsecond.
type Workers struct {
	n  int
	mu sync.Mutex // one loop at a time; guards the loop fields and mm

	// The running loop, written by the caller before it bumps gen and read
	// by the workers after they see the new gen.
	t     task
	items int
	parts int
	stop  bool // Close: the workers return

	gen     atomic.Uint64 // loops started; each new value is a loop to join
	pending atomic.Int32  // workers not yet done with the running loop
	done    waker         // the caller, waiting for pending to reach 0
	workers []waker       // worker i+1 waits for gen to change

	wg sync.WaitGroup // the worker goroutines
	mm matmulTask     // MatMul's arguments, kept here so MatMul allocates nothing
}

// spinFor is how long a worker or a waiting caller checks for its next
// event before it parks: longer than the single-threaded gaps of a forward
// pass, short enough that an idle pool gives its cores back at once.
// While it spins it yields its core to the OS every few dozen checks
// (osYield): where other processes share the cores, the goroutine awaited
// may be waiting for that very core, and a spin that kept it measured
// half a parking pool's speed (Q8_0 decode 87 against 166 tok/s beside
// one busy process), with the yields 151-160; on idle cores the yield
// returns at once.
const spinFor = 50 * time.Microsecond

// waker parks one goroutine until another wakes it, without lost wake-ups:
// the sleeper sets sleeping before its last check of the condition, the
// waker changes the condition before it clears sleeping, and whichever
// clears sleeping first decides whether a token is sent.
type waker struct {
	sleeping atomic.Bool
	wake     chan struct{}
}

func newWaker() waker { return waker{wake: make(chan struct{}, 1)} }

// await returns once ready reports true: it spins for spinFor, then parks
// until wakeUp.
func (k *waker) await(ready func() bool) {
	var deadline time.Time // read the clock only once a wait is not short
	for i := 0; !ready(); i++ {
		if i&63 != 63 {
			continue
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(spinFor)
		}
		if time.Now().Before(deadline) {
			osYield()
			continue
		}
		// A swap, not a store: the read-modify-write orders it before
		// ready's loads everywhere. Go's atomics are sequentially
		// consistent, but QEMU's arm64 emulation lets a store-release pass
		// a later load-acquire, and a plain store parked the pool for good
		// there (the wake-up was lost).
		k.sleeping.Swap(true)
		if ready() && k.sleeping.CompareAndSwap(true, false) {
			return
		}
		<-k.wake // sent by the wakeUp that cleared sleeping
	}
}

// wakeUp wakes the goroutine if it is parked; the condition it waits for
// must already hold.
func (k *waker) wakeUp() {
	if k.sleeping.CompareAndSwap(true, false) {
		k.wake <- struct{}{}
	}
}

// task is a parallel loop body; a pointer to a long-lived struct satisfies
// it without allocating, where a closure handed to another goroutine would
// escape to the heap on every call.
type task interface {
	run(part, lo, hi int)
}

type funcTask func(part, lo, hi int)

func (f funcTask) run(part, lo, hi int) { f(part, lo, hi) }

// NewWorkers starts a pool of n workers, the calling goroutine being one of
// them; n <= 0 means runtime.GOMAXPROCS(0).
func NewWorkers(n int) *Workers {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	w := &Workers{n: n, done: newWaker(), workers: make([]waker, n-1)}
	w.wg.Add(n - 1)
	for i := range w.workers {
		w.workers[i] = newWaker()
		go w.work(i + 1)
	}
	return w
}

// work is worker part's goroutine: it runs its part of every loop that
// has one for it, and reports every loop done, until Close.
func (w *Workers) work(part int) {
	defer w.wg.Done()
	k := &w.workers[part-1]
	seen := uint64(0)
	newLoop := func() bool { return w.gen.Load() != seen }
	for {
		k.await(newLoop)
		seen = w.gen.Load()
		if w.stop {
			return
		}
		if part < w.parts {
			w.t.run(part, part*w.items/w.parts, (part+1)*w.items/w.parts)
		}
		if w.pending.Add(-1) == 0 {
			w.done.wakeUp()
		}
	}
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
	w.t, w.items, w.parts = t, n, parts
	// Every worker, with a part or not, reports back, so none still reads
	// this loop's fields when the next one writes them.
	w.pending.Store(int32(len(w.workers)))
	w.start()
	t.run(0, 0, n/parts)
	w.done.await(w.allDone)
	w.t = nil // keep no caller's task alive
}

func (w *Workers) allDone() bool { return w.pending.Load() == 0 }

// start publishes the loop fields to the workers and wakes those parked.
func (w *Workers) start() {
	w.gen.Add(1)
	for i := range w.workers {
		w.workers[i].wakeUp()
	}
}

// Close stops the workers. The pool must not be used afterwards.
func (w *Workers) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stop = true
	w.start()
	w.wg.Wait()
}
