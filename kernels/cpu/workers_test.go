package cpu

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
				var parts [64]atomic.Int32
				w.For(n, func(part, lo, hi int) {
					if part < 0 || part >= w.N() || lo > hi {
						t.Errorf("n=%d: part %d chunk [%d,%d)", n, part, lo, hi)
						return
					}
					parts[part].Add(1)
					for i := lo; i < hi; i++ {
						hits[i].Add(1)
					}
				})
				for i := range hits {
					if hits[i].Load() != 1 {
						t.Fatalf("n=%d: index %d ran %d times", n, i, hits[i].Load())
					}
				}
				for p := range parts {
					if parts[p].Load() > 1 {
						t.Fatalf("n=%d: part %d ran %d times", n, p, parts[p].Load())
					}
				}
			}
		})
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
