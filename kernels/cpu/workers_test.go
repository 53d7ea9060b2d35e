package cpu

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkersCoverEveryIndexOnce: every index of a loop runs exactly once,
// and no part number runs on two goroutines at once (a goroutine may run
// several chunks under its own).
func TestWorkersCoverEveryIndexOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		n       []int
	}{
		{"one worker", 1, []int{0, 1, 5}},
		{"two workers", 2, []int{0, 1, 2, 3, 101}},
		{"more workers than items", 5, []int{1, 2, 4, 5, 6, 1000}},
		{"default", 0, []int{0, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWorkers(tc.workers)
			defer w.Close()
			if tc.workers > 0 && w.N() != tc.workers {
				t.Fatalf("N() = %d, want %d", w.N(), tc.workers)
			}
			for _, n := range tc.n {
				hits := make([]atomic.Int32, n)
				var busy [64]atomic.Bool
				w.For(n, func(part, lo, hi int) {
					if part < 0 || part >= w.N() || lo >= hi {
						t.Errorf("n=%d: part %d chunk [%d,%d)", n, part, lo, hi)
						return
					}
					if !busy[part].CompareAndSwap(false, true) {
						t.Errorf("n=%d: part %d runs on two goroutines at once", n, part)
						return
					}
					defer busy[part].Store(false)
					for i := lo; i < hi; i++ {
						hits[i].Add(1)
					}
				})
				for i := range hits {
					if hits[i].Load() != 1 {
						t.Fatalf("n=%d: index %d ran %d times", n, i, hits[i].Load())
					}
				}
			}
		})
	}
}

// TestWorkersTakeOverASlowPart: the caller, done with its own part, runs
// ranges of a worker's part that the worker has not begun, so a slow or
// late worker holds a loop up by at most the range it is in. Part 1's
// chunks take 20 ms each; with no taking over, part 0 would never run an
// index of part 1.
func TestWorkersTakeOverASlowPart(t *testing.T) {
	w := NewWorkers(2)
	defer w.Close()
	const n = 64
	var byCaller atomic.Int32
	w.For(n, func(part, lo, hi int) {
		if part != 0 {
			time.Sleep(20 * time.Millisecond)
			return
		}
		for i := lo; i < hi; i++ {
			if i >= n/2 {
				byCaller.Add(1)
			}
		}
	})
	if byCaller.Load() == 0 {
		t.Fatal("the caller ran none of the slow part's indices")
	}
}

// TestSubBoundsCoverThePart: a part's ranges tile it in order, halving in
// size from the front.
func TestSubBoundsCoverThePart(t *testing.T) {
	for _, c := range [][2]int{{0, 0}, {3, 4}, {0, 7}, {10, 110}, {5, 1029}} {
		lo, hi := c[0], c[1]
		if subBound(lo, hi, 0) != lo || subBound(lo, hi, subParts) != hi {
			t.Fatalf("[%d,%d): ranges span [%d,%d)", lo, hi, subBound(lo, hi, 0), subBound(lo, hi, subParts))
		}
		for s := range subParts {
			a, b := subBound(lo, hi, s), subBound(lo, hi, s+1)
			if a > b {
				t.Fatalf("[%d,%d): range %d is [%d,%d)", lo, hi, s, a, b)
			}
			if s+1 < subParts && b-a < (hi-lo)>>(s+1) {
				t.Fatalf("[%d,%d): range %d has %d items, want at least %d", lo, hi, s, b-a, (hi-lo)>>(s+1))
			}
		}
	}
}

// TestClaimTakesEachRangeOnce: an owner taking from the front and thieves
// from the back, concurrently, take every range of a part exactly once.
func TestClaimTakesEachRangeOnce(t *testing.T) {
	for round := range 200 {
		var c claim
		c.v.Store(subParts)
		var taken [subParts]atomic.Int32
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Go(func() {
				for {
					s := c.take(g == 0)
					if s < 0 {
						return
					}
					taken[s].Add(1)
				}
			})
		}
		wg.Wait()
		for s := range taken {
			if taken[s].Load() != 1 {
				t.Fatalf("round %d: range %d taken %d times", round, s, taken[s].Load())
			}
		}
	}
}

// TestWorkersConcurrentCallers runs loops from several goroutines at once
// (under -race this also checks the pool's synchronisation).
func TestWorkersConcurrentCallers(t *testing.T) {
	w := NewWorkers(2)
	defer w.Close()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for range 50 {
				sum := make([]int, 10)
				w.For(len(sum), func(_, lo, hi int) {
					for i := lo; i < hi; i++ {
						sum[i] += i + g
					}
				})
				for i, s := range sum {
					if s != i+g {
						t.Errorf("caller %d: sum[%d] = %d", g, i, s)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestWorkersParkAndWake lets the pool go idle until every worker and the
// caller's wait have parked, then runs loops again: an idle pool gives its
// cores back, and a parked worker still joins the next loop.
func TestWorkersParkAndWake(t *testing.T) {
	w := NewWorkers(3)
	defer w.Close()
	for round := range 3 {
		var hits [5]atomic.Int32
		w.For(len(hits), func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				hits[i].Add(1)
			}
		})
		for i := range hits {
			if hits[i].Load() != 1 {
				t.Fatalf("round %d: index %d ran %d times", round, i, hits[i].Load())
			}
		}
		for i := range w.workers {
			for !w.workers[i].sleeping.Load() {
				time.Sleep(spinFor)
			}
		}
	}
}

// BenchmarkWorkersFor measures the cost of one parallel loop with no work:
// handing a part to a parked worker and waiting for it.
func BenchmarkWorkersFor(b *testing.B) {
	w := NewWorkers(0)
	defer w.Close()
	var sink [64]int
	b.ReportAllocs()
	for b.Loop() {
		w.For(w.N(), func(part, lo, hi int) { sink[part*8] += hi - lo })
	}
}
