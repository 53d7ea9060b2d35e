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
// A forward pass runs some fifty to a hundred parallel loops a token,
// separated by microseconds of single-threaded work (a norm, a RoPE). A
// worker parked in the Go scheduler takes tens of microseconds to wake, so
// between loops the workers, and the caller waiting for them, spin for up
// to spinFor before they park. Even so a worker now and then starts late
// (it was parked, or the OS ran something else on its core), and the
// cores of a shared host do not run at one speed. So no loop waits for a
// worker that has not begun it: each part of a loop is split into
// subParts ranges, which its owner takes from the front and a goroutine
// done with its own part takes from the back, and a worker joins a loop
// only while the loop is open; the caller closes it once every range is
// taken, and then waits only for the workers that joined.
type Workers struct {
	n  int
	mu sync.Mutex // one loop at a time; guards the loop fields and mm

	// The running loop, written by the caller before it bumps gen and read
	// by the workers that join it.
	t     task
	items int
	parts int
	stop  atomic.Bool // Close: the workers return

	gen      atomic.Uint64 // loops started; each new value is a loop to join
	join     atomic.Uint64 // the running loop: gen<<32 | joinClosed | workers joined
	finished atomic.Int32  // joined workers done with the running loop
	claims   []claim       // claims[p]: part p's ranges not yet taken
	done     waker         // the caller, waiting for finished to reach the joined count
	workers  []waker       // worker i+1 waits for gen to change

	wg sync.WaitGroup // the worker goroutines
	mm matmulTask     // MatMul's arguments, kept here so MatMul allocates nothing
}

// subParts is how many ranges each part of a loop is split into, the unit
// in which a goroutine done with its own part takes over another's. More
// ranges balance better but shorten the weight streams the decode kernels
// read: ranges of 32 KB of weights, taken in turn from one counter by both
// goroutines, made the 110M Q5_K_M model's decode a fifth slower
// (PREFIXD_CPU=avx2, 2 threads).
const subParts = 4

// subBound returns where range s of the part [lo, hi) begins: the ranges
// halve in size, the last two equal (1/2, 1/4, 1/8, 1/8 of the part), so
// the owner streams its first half in one call and the goroutines that
// take over from the back take the smallest ranges, which end the loop
// soonest.
func subBound(lo, hi, s int) int {
	if s >= subParts {
		return hi
	}
	return hi - (hi-lo)>>s
}

// joinClosed marks the running loop closed to workers not yet in it.
const joinClosed = 1 << 31

// claim is one part's ranges not yet taken, front<<32 | back: its owner
// takes range front, others range back−1, while front < back. Each sits
// in its own cache line, so owners taking ranges do not contend.
type claim struct {
	v atomic.Uint64
	_ [56]byte
}

// take claims a range of the part, from the front for its owner or from
// the back, and returns its index, or -1 if none is left.
func (c *claim) take(front bool) int {
	for {
		v := c.v.Load()
		f, b := v>>32, v&0xffffffff
		if f >= b {
			return -1
		}
		if front {
			if c.v.CompareAndSwap(v, v+1<<32) {
				return int(f)
			}
		} else if c.v.CompareAndSwap(v, v-1) {
			return int(b - 1)
		}
	}
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
	w := &Workers{n: n, done: newWaker(), workers: make([]waker, n-1), claims: make([]claim, n)}
	w.wg.Add(n - 1)
	for i := range w.workers {
		w.workers[i] = newWaker()
		go w.work(i + 1)
	}
	return w
}

// work is worker part's goroutine: it joins every loop it finds open and
// takes ranges until none is left, until Close.
func (w *Workers) work(part int) {
	defer w.wg.Done()
	k := &w.workers[part-1]
	seen := uint64(0)
	newLoop := func() bool { return w.gen.Load() != seen }
	for {
		k.await(newLoop)
		seen = w.gen.Load()
		if w.stop.Load() {
			return
		}
		if !w.joinLoop(seen) {
			continue // begun late: the loop's ranges are all taken
		}
		w.runParts(part)
		w.finished.Add(1)
		w.done.wakeUp()
	}
}

// joinLoop joins loop gen if it is still open.
func (w *Workers) joinLoop(gen uint64) bool {
	for {
		j := w.join.Load()
		if j>>32 != gen&0xffffffff || j&joinClosed != 0 {
			return false
		}
		if w.join.CompareAndSwap(j, j+1) {
			return true
		}
	}
}

// runParts runs the ranges of part own (if the loop has one), then those
// left of the other parts, as part own.
func (w *Workers) runParts(own int) {
	parts := w.parts
	for i := range parts {
		p := (own + i) % parts
		for {
			s := w.claims[p].take(p == own)
			if s < 0 {
				break
			}
			lo, hi := w.items*p/parts, w.items*(p+1)/parts
			if a, b := subBound(lo, hi, s), subBound(lo, hi, s+1); a < b {
				w.t.run(own, a, b)
			}
		}
	}
}

// N is the most parts a For splits into.
func (w *Workers) N() int { return w.n }

// For runs fn over disjoint chunks [lo, hi) that cover [0, n), and returns
// when all are done. Each call of fn is given the part number of the
// goroutine running it, below N(): no two goroutines run under one part
// number at once, but one may run several chunks, in any order, so per-part
// scratch is indexed by it. A loop of one chunk runs inline. fn must not
// call For, MatMul or Attention on the same pool: the pool runs one loop at
// a time, so that would deadlock.
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
	for p := range parts {
		w.claims[p].v.Store(subParts)
	}
	w.finished.Store(0)
	w.join.Store((w.gen.Load() + 1) << 32)
	w.start()
	w.runParts(0)
	joined := w.closeLoop()
	w.done.await(func() bool { return w.finished.Load() == joined })
	w.t = nil // keep no caller's task alive
}

// closeLoop closes the running loop to workers not yet in it and returns
// how many joined.
func (w *Workers) closeLoop() int32 {
	for {
		j := w.join.Load()
		if w.join.CompareAndSwap(j, j|joinClosed) {
			return int32(j & (joinClosed - 1))
		}
	}
}

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
	w.stop.Store(true)
	w.start()
	w.wg.Wait()
}
