package kerneltest

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// KVStore checks a device K/V pool of layout lay (elements of esize
// bytes), which must have 9 blocks of 5 slots: BlockBytes, block round
// trips, copies on the device (against copyModel) and refused calls that
// change nothing.
func KVStore(t *testing.T, s blockstore.Storage, lay launch.KVLayout, esize int) {
	if want := lay.Layers * 2 * lay.BlockSize * lay.KVDim() * esize; s.BlockBytes() != want {
		t.Fatalf("BlockBytes %d, want %d", s.BlockBytes(), want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	model := make([][]byte, lay.NumBlocks)
	for id := range model {
		model[id] = make([]byte, s.BlockBytes())
		for i := range model[id] {
			model[id][i] = byte(rng.Uint32())
		}
		if err := s.WriteBlock(blockstore.BlockID(id), model[id]); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		got := make([]byte, s.BlockBytes())
		for id := range model {
			if err := s.ReadBlock(blockstore.BlockID(id), got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, model[id]) {
				t.Fatalf("%s: block %d differs", when, id)
			}
		}
	}
	check("after writes")

	copies := []blockstore.BlockCopy{{Src: 0, Dst: 4, Slots: 2}, {Src: 1, Dst: 5, Slots: 5}, {Src: 1, Dst: 6, Slots: 0}, {Src: 2, Dst: 7, Slots: 4}}
	if err := s.CopyBlocks(copies); err != nil {
		t.Fatal(err)
	}
	for _, c := range copies {
		copyModel(model, lay, esize, c)
	}
	check("after copies")

	buf := make([]byte, s.BlockBytes())
	for name, c := range map[string]struct {
		err  error
		want error
	}{
		"read past the pool":   {s.ReadBlock(9, buf), launch.ErrBlockRange},
		"write a short buffer": {s.WriteBlock(0, buf[1:]), launch.ErrBufferSize},
		"copy too many slots":  {s.CopyBlocks([]blockstore.BlockCopy{{Src: 0, Dst: 1, Slots: 6}}), launch.ErrSlotRange},
		"copy from nowhere":    {s.CopyBlocks([]blockstore.BlockCopy{{Src: -1, Dst: 1, Slots: 1}}), launch.ErrBlockRange},
		"chained copies":       {s.CopyBlocks([]blockstore.BlockCopy{{Src: 0, Dst: 1, Slots: 1}, {Src: 1, Dst: 2, Slots: 1}}), launch.ErrCopyOverlap},
		"one block twice":      {s.CopyBlocks([]blockstore.BlockCopy{{Src: 0, Dst: 1, Slots: 1}, {Src: 2, Dst: 1, Slots: 1}}), launch.ErrCopyOverlap},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", name, c.err, c.want)
		}
	}
	check("after refused calls")
}

// copyModel applies a block copy to host copies of blocks in the pools'
// layout: for each layer, K then V, each bs·kvDim elements, of which the
// first slots·kvDim are copied.
func copyModel(blocks [][]byte, lay launch.KVLayout, esize int, c blockstore.BlockCopy) {
	region := lay.BlockSize * lay.KVDim() * esize
	n := c.Slots * lay.KVDim() * esize
	for r := range 2 * lay.Layers {
		copy(blocks[c.Dst][r*region:r*region+n], blocks[c.Src][r*region:])
	}
}

// MatMulT checks mul, a device's y = a·wᵀ + beta·y (a and w in d's
// element type, y float32), against a float64 product of the same
// rounded inputs, with beta 0 and 1, on odd sizes.
func MatMulT(t *testing.T, d Memory, mul func(y, a, w launch.Ptr, m, n, k int, beta float32) error) {
	dt := d.DType()
	e := &Env{t: t, d: d, dt: dt, rng: rand.New(rand.NewPCG(3, 4))}
	t.Cleanup(e.free)
	m, n, k := 37, 53, 70
	a, w, y0 := e.rand(m*k), e.rand(n*k), e.rand(m*n)
	pa, pw, py := e.elems(a), e.elems(w), e.floats(y0)
	for _, beta := range []float32{0, 1} {
		e.write(py, encode(src.F32, y0))
		if err := mul(py, pa, pw, m, n, k, beta); err != nil {
			t.Fatal(err)
		}
		p, want := productT(a, w, m, n, k), make([]float32, m*n)
		for i := range want {
			want[i] = float32(p[i] + float64(beta*y0[i]))
		}
		if err := RelErr(e.readFloats(py, m*n), want); err > Tolerance[dt] {
			t.Errorf("beta %g: relative error %.3g", beta, err)
		}
	}
}

// productT returns a·wᵀ (a m×k, w n×k, row-major), summed in float64:
// the reference for a device's matrix products.
func productT(a, w []float32, m, n, k int) []float64 {
	p := make([]float64, m*n)
	for i := range m {
		for j := range n {
			for l := range k {
				p[i*n+j] += float64(a[i*k+l]) * float64(w[j*k+l])
			}
		}
	}
	return p
}

func encode(t src.DType, f []float32) []byte {
	b := make([]byte, len(f)*t.Size())
	launch.Encode(t, b, f)
	return b
}
