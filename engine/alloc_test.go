package engine

import "testing"

// TestSchedulerStepAllocatesNothing pins scheduler.go's claim: once
// sequences are admitted, an iteration allocates nothing, block fills and
// prefix-cache inserts included, except that decoding text grows each
// request's output text by appending (amortized: far less than one
// allocation per token). The measured run is 512 iterations, in which
// every sequence fills 32 blocks, so the amortized growth of any
// per-sequence buffer would show.
func TestSchedulerStepAllocatesNothing(t *testing.T) {
	if invariants {
		t.Skip("the invariants build checks, and allocates, after every step")
	}
	const running, steps = 64, 512
	for _, c := range stepCases {
		t.Run(c.name, func(t *testing.T) {
			sc, _ := steadyScheduler(t, running, c)
			allocs := testing.AllocsPerRun(1, func() { // after as long a warm-up
				for range steps { // the streams hold 4001 tokens: no draining
					sc.step()
				}
			})
			if len(sc.running) != running {
				t.Fatalf("%d of %d sequences still running: the measurement saw others finish", len(sc.running), running)
			}
			switch {
			case !c.text && allocs != 0:
				t.Fatalf("%d iterations allocate %v times", steps, allocs)
			case c.text && allocs*8 > running*steps:
				t.Fatalf("%d iterations decoding text allocate %v times, more than once per 8 tokens", steps, allocs)
			}
		})
	}
}
