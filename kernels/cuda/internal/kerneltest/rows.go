package kerneltest

import (
	"math"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/sample"
)

// Convert checks the device narrows float32 to the element type bit
// for bit as launch.ToBF16 and launch.ToF16 do (those are checked against
// hand-computed encodings), on values chosen to hit ties, subnormals and
// overflow, through kv_append, which stores floats as elements.
func Convert(t *testing.T, e *Env) {
	vals := []float32{0, 1, -1, 1 + 0x1p-11, 1 + 3*0x1p-11, 1 + 0x1p-8, 1 + 3*0x1p-8, 65504, 65519, 65520, 1e6,
		0x1p-14, 0x1p-24, 0x1p-25, 0x1.8p-25, 3 * 0x1p-25, 1e-30, 0x1p-133, float32(math.Inf(-1)), 0.1, -0.333}
	vals = append(vals, e.randF32(64-len(vals))...)
	for i := range vals[:32] {
		vals = append(vals, vals[i]*1000)
	}
	n := len(vals) // 96 values: K and V of one slot, kvDim 48
	lay := launch.KVLayout{Layers: 1, KVHeads: 3, HeadDim: 16, BlockSize: 1, NumBlocks: 1}
	kv := e.alloc(int(lay.BlockElems()) * e.dt.Size())
	st := launch.Step{Rows: 1, RowPos: e.ints([]int32{0}), RowBT: e.ints([]int32{0}), BT: e.ints([]int32{0})}
	pv := e.floats(vals)
	e.launch(launch.AppendKV(e.d, kv, lay, 0, pv, pv+launch.Ptr(4*n/2), n, st))
	got := e.read(kv, n*e.dt.Size())
	want := make([]byte, len(got))
	launch.Encode(e.dt, want, vals)
	if !slices.Equal(got, want) {
		for i := range vals {
			s := e.dt.Size()
			if !slices.Equal(got[i*s:(i+1)*s], want[i*s:(i+1)*s]) {
				t.Errorf("%g: stored % x, want % x", vals[i], got[i*s:(i+1)*s], want[i*s:(i+1)*s])
			}
		}
	}
}

func Embed(t *testing.T, e *Env) {
	vocab, dim := 11, 300
	table := e.rand(vocab * dim)
	tok := []int32{3, 0, 10, 3, 7}
	out := e.alloc(4 * len(tok) * dim)
	e.launch(launch.Embed(e.d, out, e.elems(table), e.ints(tok), len(tok), dim))
	var want []float32
	for _, id := range tok {
		want = append(want, table[int(id)*dim:][:dim]...)
	}
	if got := e.readFloats(out, len(want)); !slices.Equal(got, want) {
		t.Errorf("embed: element %d differs", worst(got, want))
	}
}

func RMSNorm(t *testing.T, e *Env) {
	for _, dim := range []int{1, 31, 64, 257, 1000, 2048} { // 64, 1,000 and 2,048: 16-byte loads
		rows := 3
		x, w := e.randF32(rows*dim), e.randF32(dim)
		out, px, pw := e.alloc(rows*dim*e.dt.Size()), e.floats(x), e.floats(w)
		e.launch(launch.RMSNorm(e.d, out, px, pw, rows, dim, 1e-5))
		want := make([]float32, rows*dim)
		for r := range rows {
			cpu.RMSNorm(want[r*dim:(r+1)*dim], x[r*dim:(r+1)*dim], w, 1e-5)
		}
		e.close("rmsnorm", e.readElems(out, rows*dim), want)
		// In place, in float32: the q/k norm.
		e.launch(launch.RMSNormF32(e.d, px, px, pw, rows, dim, 1e-5))
		if err := RelErr(e.readFloats(px, rows*dim), want); err > 1e-5 {
			t.Errorf("rmsnorm_f32 of %d: relative error %.3g", dim, err)
		}
	}
}

// HeadNormQwen3Step normalises the q heads of one 2,048-token step of a
// model with 32 heads of 128 (Qwen3-8B's), one row per head: 65,536 rows,
// one more than a grid's y or z dimension takes (the backend's HeadNorm
// launch was capped there), and compares them with cpu.RMSNorm.
func HeadNormQwen3Step(t *testing.T, e *Env) {
	const tokens, heads, hd = 2048, 32, 128
	rows := tokens * heads
	x, w := e.randF32(rows*hd), e.randF32(hd)
	px := e.floats(x)
	e.launch(launch.RMSNormF32(e.d, px, px, e.floats(w), rows, hd, 1e-6))
	want := make([]float32, len(x))
	for r := range rows {
		cpu.RMSNorm(want[r*hd:(r+1)*hd], x[r*hd:(r+1)*hd], w, 1e-6)
	}
	if err := RelErr(e.readFloats(px, len(x)), want); err > 1e-5 {
		t.Errorf("rmsnorm_f32 over %d head rows: relative error %.3g", rows, err)
	}
}

// RoPEAdjacent compares rope_gguf with cpu.RoPE over q and k heads of
// a fused row, at positions up to 5,000 (where float32 angles would be
// off), with and without frequency factors (against cpu.RoPEScaled).
func RoPEAdjacent(t *testing.T, e *Env) {
	heads, hd, ld := 5, 18, 5*18+7
	pos := []int32{0, 1, 17, 4999}
	factors := make([]float32, hd/2)
	for i := range factors {
		factors[i] = 1 + 7*float32(i)/float32(hd/2)
	}
	for _, f := range [][]float32{nil, factors} {
		x := e.randF32(len(pos) * ld)
		px, pf := e.floats(x), launch.Ptr(0)
		if f != nil {
			pf = e.floats(f)
		}
		e.launch(launch.RoPE(e.d, launch.Adjacent, px, ld, e.ints(pos), len(pos), heads, hd, 10000, pf))
		want := slices.Clone(x)
		for r, p := range pos {
			if f == nil {
				cpu.RoPE(want[r*ld:r*ld+heads*hd], int(p), heads, hd, 10000)
			} else {
				ropeScaled(want[r*ld:], int(p), heads, hd, 10000, f)
			}
		}
		if err := RelErr(e.readFloats(px, len(x)), want); err > 1e-5 {
			t.Errorf("rope_gguf (factors %v): relative error %.3g", f != nil, err)
		}
	}
}

// ropeScaled is the adjacent-pair rotation with Llama 3's frequency
// divisors: pair i turns by pos·theta^(-2i/d)/factors[i].
func ropeScaled(x []float32, pos, heads, hd int, theta float64, factors []float32) {
	for h := range heads {
		for i := range hd / 2 {
			a := float64(pos) * math.Pow(theta, -2*float64(i)/float64(hd)) / float64(factors[i])
			j := h*hd + 2*i
			x0, x1 := float64(x[j]), float64(x[j+1])
			x[j], x[j+1] = float32(x0*math.Cos(a)-x1*math.Sin(a)), float32(x0*math.Sin(a)+x1*math.Cos(a))
		}
	}
}

// ropeHalves is Hugging Face's rotation: x·cos + rotate_half(x)·sin, with
// rotate_half(x) = concat(-x[d/2:], x[:d/2]) and pair i's angle
// pos·theta^(-2i/d).
func ropeHalves(x []float32, pos, heads, hd int, theta float64) {
	for h := range heads {
		v := x[h*hd : (h+1)*hd]
		rot := make([]float64, hd)
		for i := range hd / 2 {
			rot[i], rot[i+hd/2] = -float64(v[i+hd/2]), float64(v[i])
		}
		for i := range hd {
			a := float64(pos) * math.Pow(theta, -2*float64(i%(hd/2))/float64(hd))
			v[i] = float32(float64(v[i])*math.Cos(a) + rot[i]*math.Sin(a))
		}
	}
}

func RoPEHalves(t *testing.T, e *Env) {
	// Hand-computed: head [1 2 3 4] at position 1, theta 10000 turns
	// (1,3) by 1 radian and (2,4) by 0.01.
	px := e.floats([]float32{1, 2, 3, 4})
	e.launch(launch.RoPE(e.d, launch.Halves, px, 4, e.ints([]int32{1}), 1, 1, 4, 10000, 0))
	golden := []float32{-1.9841106, 1.9599007, 2.4623779, 4.0197997}
	if err := RelErr(e.readFloats(px, 4), golden); err > 1e-6 {
		t.Errorf("rope_halves of [1 2 3 4] at 1 = %v, want %v", e.readFloats(px, 4), golden)
	}

	heads, hd, ld := 3, 22, 3*22+1
	pos := []int32{0, 2, 300, 4095}
	x := e.randF32(len(pos) * ld)
	px = e.floats(x)
	e.launch(launch.RoPE(e.d, launch.Halves, px, ld, e.ints(pos), len(pos), heads, hd, 500000, 0))
	want := slices.Clone(x)
	for r, p := range pos {
		ropeHalves(want[r*ld:], int(p), heads, hd, 500000)
	}
	if err := RelErr(e.readFloats(px, len(x)), want); err > 1e-5 {
		t.Errorf("rope_halves: relative error %.3g", err)
	}
}

func SwiGLU(t *testing.T, e *Env) {
	rows, hidden := 3, 300
	gu := e.randF32(rows * 2 * hidden) // fused: [gate | up] per row
	for i := range gu {
		gu[i] *= 6
	}
	pg := e.floats(gu)
	out := e.alloc(rows * hidden * e.dt.Size())
	e.launch(launch.SwiGLU(e.d, out, pg, pg+launch.Ptr(4*hidden), 2*hidden, rows, hidden))
	want := make([]float32, rows*hidden)
	for r := range rows {
		cpu.SwiGLU(want[r*hidden:(r+1)*hidden], gu[r*2*hidden:][:hidden], gu[r*2*hidden+hidden:][:hidden])
	}
	e.close("swiglu", e.readElems(out, rows*hidden), want)
}

func AddGather(t *testing.T, e *Env) {
	n := 5*256*4 + 13 // more than one block per thread of the grid stride
	x, y := e.randF32(n), e.randF32(n)
	px := e.floats(x)
	e.launch(launch.Add(e.d, px, e.floats(y), n))
	cpu.Add(x, y)
	if got := e.readFloats(px, n); !slices.Equal(got, x) {
		t.Errorf("add: element %d differs", worst(got, x))
	}
	bias := e.randF32(37)
	e.launch(launch.AddBias(e.d, px, e.floats(bias), n/37, 37))
	for i := range n / 37 * 37 {
		x[i] += bias[i%37]
	}
	if got := e.readFloats(px, n); !slices.Equal(got, x) {
		t.Errorf("add_bias: element %d differs", worst(got, x))
	}

	dim := 37
	idx := []int32{4, 0, 4, 2}
	out := e.alloc(4 * len(idx) * dim)
	e.launch(launch.GatherRows(e.d, out, px, e.ints(idx), len(idx), dim))
	var want []float32
	for _, i := range idx {
		want = append(want, x[int(i)*dim:][:dim]...)
	}
	if got := e.readFloats(out, len(want)); !slices.Equal(got, want) {
		t.Errorf("gather_rows: element %d differs", worst(got, want))
	}
}

func Argmax(t *testing.T, e *Env) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	n := 1003
	var rows [][]float32
	rows = append(rows, e.randF32(n))
	tie := e.randF32(n)
	tie[900], tie[17], tie[500] = 5, 5, 5 // lowest index wins
	rows = append(rows, tie)
	withNaN := e.randF32(n)
	withNaN[0], withNaN[600], withNaN[601] = nan, 3, nan
	rows = append(rows, withNaN)
	allNaN := make([]float32, n)
	for i := range allNaN {
		allNaN[i] = nan
	}
	rows = append(rows, allNaN)
	negInf := make([]float32, n)
	for i := range negInf {
		negInf[i] = -inf
	}
	negInf[10] = nan
	rows = append(rows, negInf)
	posInf := e.randF32(n)
	posInf[333] = inf
	rows = append(rows, posInf)
	var x []float32
	for _, r := range rows {
		x = append(x, r...)
	}
	out := e.alloc(4 * len(rows))
	e.launch(launch.Argmax(e.d, out, e.floats(x), len(rows), n))
	got := e.readInts(out, len(rows))
	for i, r := range rows {
		want := sample.Argmax(r)
		if sample.CheckFinite(r) != nil {
			want = -1 // a row the engine fails
		}
		if got[i] != want {
			t.Errorf("row %d: argmax %d, want %d", i, got[i], want)
		}
	}
}
