package gpu

import (
	"math"
	"testing"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/sample"
)

// TestStepAllocatesNothing pins a warmed-up step's heap allocations on the
// device, as model's TestForwardAllocatesNothingAfterWarmUp does on the
// CPU: a prefill whose rows partly want logits (Narrow's gathers), a
// decode, a greedy decode (LogitsGreedy's argmax) and one with a row
// drawn on the device (LogitsSample's sample_rows), each repeated over
// the same positions (the K/V rewritten in place), so every buffer has its
// size from the first run. The Backend allocates nothing; what is left is
// one allocation a kernel launch, outside it: launch.Device.Launch's
// variadic parameters escape through the interface (the emulator hands
// them to cgo, a GPU to cuLaunchKernel), which the test counts and allows.
func TestStepAllocatesNothing(t *testing.T) {
	each(t, []src.DType{src.F32, src.BF16}, func(t *testing.T, dev Device) {
		for _, i := range []int{0, 3, 4} {
			fm := forwardModels[i]
			t.Run(fm.name, func(t *testing.T) {
				m := forwardModel(i)
				c := m.Config
				const bs, blocks = 8, 4
				dc := newLaunchCounter(dev)
				r := runnerOn(t, roundMatrices(t, m, dev.DType()), dc)
				if _, err := r.NewKV(4*blocks, bs); err != nil {
					t.Fatal(err)
				}
				tb := seqTables(4, blocks, bs)
				prefill := []batch.Row{{Tokens: tokens(1, 11, c.Vocab), Blocks: tb[0], Logits: true},
					{Tokens: tokens(2, 6, c.Vocab), Blocks: tb[1]},
					{Tokens: tokens(3, 9, c.Vocab), Blocks: tb[3], Logits: true}}
				decode := []batch.Row{{Tokens: tokens(5, 1, c.Vocab), Start: 11, Blocks: tb[0], Logits: true},
					{Tokens: tokens(6, 1, c.Vocab), Start: 6, Blocks: tb[1], Logits: true},
					{Tokens: tokens(7, 1, c.Vocab), Start: 9, Blocks: tb[3], Logits: true}}
				greedy := []bool{true, false, true}
				sampler, err := sample.NewFor(sample.Params{Temperature: 0.9, TopP: 0.9, RepetitionPenalty: 1.2, Seed: 1}, c.Vocab, prefill[0].Tokens, 0)
				if err != nil {
					t.Fatal(err)
				}
				var draw sample.Draw
				sampler.Offload(&draw)
				draws := []*sample.Draw{nil, &draw, nil}
				for _, st := range []struct {
					name string
					run  func() error
				}{
					{"prefill", func() error { _, err := r.Forward(prefill); return err }},
					{"decode", func() error { _, err := r.Forward(decode); return err }},
					{"greedy decode", func() error { _, _, err := r.ForwardGreedy(decode, greedy); return err }},
					{"sampled decode", func() error { _, _, err := r.ForwardSample(decode, greedy, draws); return err }},
				} {
					if err := st.run(); err != nil { // the warm-up
						t.Fatal(err)
					}
					before := dc.launches
					if err := st.run(); err != nil {
						t.Fatal(err)
					}
					launches := dc.launches - before
					// Work of the runtime's own can add allocations to a run,
					// never take any away: under load a cgo call into the
					// emulator that blocks long enough has its P handed to a
					// new thread, whose m and g are heap allocations (CI saw
					// 14 for 13 launches once). The least of three
					// measurements is the step's own.
					allocs := math.Inf(1)
					for range 3 {
						allocs = min(allocs, testing.AllocsPerRun(5, func() {
							if err := st.run(); err != nil {
								t.Fatal(err)
							}
						}))
					}
					if allocs != float64(launches) {
						t.Errorf("%s: %v allocations a step of %d kernel launches: want one a launch", st.name, allocs, launches)
					}
				}
			})
		}
	})
}

// launchCounter is a Device that counts the kernels launched through it
// without allocating: each Do hands its f the counter itself as Mem,
// through a func value made once.
type launchCounter struct {
	Device
	Mem      // the device's, set by each Do
	launches int
	f        func(Mem) error // Do's
	do       func(Mem) error // c.run
}

func newLaunchCounter(d Device) *launchCounter {
	c := &launchCounter{Device: d}
	c.do = c.run
	return c
}

func (c *launchCounter) Do(f func(Mem) error) error {
	c.f = f
	return c.Device.Do(c.do)
}

func (c *launchCounter) run(m Mem) error {
	c.Mem = m
	return c.f(c)
}

func (c *launchCounter) DType() src.DType { return c.Device.DType() }

func (c *launchCounter) Launch(kernel string, grid, block launch.Dim3, args ...uint64) error {
	c.launches++
	return c.Mem.Launch(kernel, grid, block, args...)
}
