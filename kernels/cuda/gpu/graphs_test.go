package gpu

import (
	"errors"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/model"
)

// graphRunner returns a runner for m on a new Backend over dev, closed
// when the test ends, with graphs on or off and a K/V pool of blocks
// blocks of bs slots.
func graphRunner(t *testing.T, m *model.Model, dev Device, graphs bool, blocks, bs int) (*model.Runner, *Backend) {
	t.Helper()
	r, b := runnerAndBackend(t, m, dev)
	b.UseGraphs(graphs)
	if _, err := r.NewKV(blocks, bs); err != nil {
		t.Fatal(err)
	}
	return r, b
}

// TestGraphsReplayDecode runs the same prefill and decode steps on two
// Backends, one replaying steps from graphs and one launching every
// kernel: every step's logits agree bit for bit. The decodes feed back
// their greedy tokens, cross 128 positions (where attention starts to
// split over the sequence, and the split grows with the contexts) and
// lose a row halfway: so some steps launch something new, and the graph
// Backend captures a graph only for a step that repeats the one before,
// and replays it for most decodes.
func TestGraphsReplayDecode(t *testing.T) {
	each(t, []src.DType{src.F32, src.BF16}, func(t *testing.T, dev Device) {
		fm := forwardModels[0]
		c := fm.cfg
		c.MaxSeqLen, c.RopeTheta, c.NormEps, c.BOS, c.EOS = 512, 10000, 1e-5, -1, -1
		m := roundMatrices(t, model.Random(c, 3), dev.DType())
		const bs, blocks, prompt, steps = 8, 24, 118, 24
		var runners [2]*model.Runner
		var backends [2]*Backend
		for i := range runners {
			runners[i], backends[i] = graphRunner(t, m, dev, i == 0, 4*blocks, bs)
		}
		tb := seqTables(4, blocks, bs)
		tb[2] = tb[3] // no shared blocks: a prefill writes each slot once
		rows := make([]batch.Row, 3)
		for i := range rows {
			rows[i] = batch.Row{Tokens: tokens(i+1, prompt-10*i, c.Vocab), Blocks: tb[i], Logits: true}
		}
		greedy := []bool{true, true, true}
		for step := range steps + 1 {
			var logits [2][]float32
			var ids [2][]int32
			for i, r := range runners {
				l, g, err := r.ForwardGreedy(rows, greedy[:len(rows)])
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				logits[i], ids[i] = slices.Clone(l), slices.Clone(g)
			}
			if !slices.Equal(logits[0], logits[1]) || !slices.Equal(ids[0], ids[1]) {
				t.Fatalf("step %d: logits or tokens differ with graphs (by up to %g)", step, maxDiff(logits[0], logits[1]))
			}
			if step == steps/2 {
				rows = rows[:2]
			}
			for i := range rows {
				rows[i].Start += len(rows[i].Tokens)
				rows[i].Tokens = []int32{ids[0][i]}
			}
		}
		on, off := backends[0].GraphStats(), backends[1].GraphStats()
		t.Logf("graphs: %+v", on)
		if on.Err != nil || on.Captures == 0 || on.Replays < steps/2 || on.Live > maxGraphs {
			t.Errorf("%d decode steps: %+v, want most replayed", steps, on)
		}
		if off != (GraphStats{}) {
			t.Errorf("graphs off: %+v", off)
		}
	})
}

// TestGraphStepAllocations checks that a decode step replayed from a
// graph allocates on the Go heap no more than the same step launching
// every kernel (one slice a launch, TestStepAllocatesNothing): tracing
// it costs what launching it did.
func TestGraphStepAllocations(t *testing.T) {
	each(t, []src.DType{src.BF16}, func(t *testing.T, dev Device) {
		m := forwardModel(0)
		c := m.Config
		const bs, blocks = 8, 4
		tb := seqTables(4, blocks, bs)
		decode := []batch.Row{{Tokens: tokens(5, 1, c.Vocab), Start: 11, Blocks: tb[0], Logits: true},
			{Tokens: tokens(6, 1, c.Vocab), Start: 6, Blocks: tb[1], Logits: true}}
		greedy := []bool{true, true}
		var allocs [2]float64
		for i, graphs := range []bool{true, false} {
			r, b := graphRunner(t, roundMatrices(t, m, dev.DType()), dev, graphs, 4*blocks, bs)
			step := func() {
				if _, _, err := r.ForwardGreedy(decode, greedy); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 { // the warm-up: the second step is captured, the third replayed
				step()
			}
			allocs[i] = testing.AllocsPerRun(5, step) // 6 steps
			// Of 9 steps, the first launched its kernels, the second
			// captured them and launched its graph, and the rest replayed it.
			if s := b.GraphStats(); graphs != (s.Replays == 8 && s.Captures == 1) {
				t.Errorf("graphs %v: %+v after 9 steps", graphs, s)
			}
		}
		if allocs[0] > allocs[1] || allocs[1] == 0 {
			t.Errorf("a replayed step allocates %v times, one launching its kernels %v", allocs[0], allocs[1])
		}
		t.Logf("allocations a step: %v replayed, %v launched", allocs[0], allocs[1])
	})
}

// TestGraphCaptureFails checks a Backend whose captures fail: the step
// that tried still runs its ops (its logits are a Backend's without
// graphs, as are every later step's), graphs turn off with the reason,
// told once to NotifyGraphsOff's function, and no graph is left.
func TestGraphCaptureFails(t *testing.T) {
	each(t, []src.DType{src.F32}, func(t *testing.T, dev Device) {
		m := forwardModel(0)
		c := m.Config
		const bs, blocks = 8, 4
		tb := seqTables(4, blocks, bs)
		var runners [2]*model.Runner
		var refusing *Backend
		var notified []error
		for i, d := range []Device{refusingCapture{dev}, dev} {
			r, b := graphRunner(t, roundMatrices(t, m, dev.DType()), d, i == 0, 4*blocks, bs)
			b.NotifyGraphsOff(func(err error) { notified = append(notified, err) })
			runners[i] = r
			if i == 0 {
				refusing = b
			}
		}
		for step := range 5 {
			rows := []batch.Row{{Tokens: tokens(1, 11, c.Vocab), Blocks: tb[0], Logits: true}} // the prefill
			if step > 0 {
				rows = []batch.Row{{Tokens: tokens(step, 1, c.Vocab), Start: 10 + step, Blocks: tb[0], Logits: true}}
			}
			var logits [2][]float32
			for i, r := range runners {
				l, err := r.Forward(rows)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				logits[i] = slices.Clone(l)
			}
			if !slices.Equal(logits[0], logits[1]) {
				t.Fatalf("step %d: logits differ after a failed capture", step)
			}
		}
		if s := refusing.GraphStats(); !errors.Is(s.Err, errRefused) || s.Replays != 0 || s.Live != 0 {
			t.Errorf("after a failed capture: %+v", s)
		}
		if len(notified) != 1 || !errors.Is(notified[0], errRefused) {
			t.Errorf("NotifyGraphsOff heard %v, want the one refusal", notified)
		}
	})
}

var errRefused = errors.New("capture refused")

// refusingCapture is a Device whose captures record, then fail at
// EndCapture (their graph destroyed), as a capture a GPU invalidated.
type refusingCapture struct{ Device }

func (d refusingCapture) Do(f func(Mem) error) error {
	return d.Device.Do(func(m Mem) error { return f(refusingMem{m}) })
}

type refusingMem struct{ Mem }

func (m refusingMem) BeginCapture() error { return m.Mem.(Capturer).BeginCapture() }

func (m refusingMem) EndCapture() (launch.Graph, error) {
	g, err := m.Mem.(Capturer).EndCapture()
	if err == nil {
		err = g.Destroy()
	}
	return nil, errors.Join(errRefused, err)
}
