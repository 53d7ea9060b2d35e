//go:build cuda

package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels/cuda/internal/kerneltest"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

func open(tb testing.TB, dt src.DType) *Device {
	tb.Helper()
	d, err := Open(Config{DType: dt})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// TestKernels runs every kernel test of the CPU emulator on the GPU, for
// every element type.
func TestKernels(t *testing.T) {
	var targets []kerneltest.Target
	for _, dt := range src.DTypes {
		d := open(t, dt)
		targets = append(targets, kerneltest.Target{Name: dt.String(), New: func(*testing.T) kerneltest.Memory { return d }})
	}
	kerneltest.Run(t, targets)
}

// copyModel applies a block copy to host copies of blocks in KVStore's
// layout: for each layer, K then V, each bs·kvDim elements, of which the
// first slots·kvDim are copied.
func copyModel(blocks [][]byte, lay launch.KVLayout, esize int, c blockstore.BlockCopy) {
	region := lay.BlockSize * lay.KVDim() * esize
	n := c.Slots * lay.KVDim() * esize
	for r := range 2 * lay.Layers {
		copy(blocks[c.Dst][r*region:r*region+n], blocks[c.Src][r*region:])
	}
}

func TestKVStore(t *testing.T) {
	for _, dt := range src.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			d := open(t, dt)
			lay := launch.KVLayout{Layers: 3, KVHeads: 2, HeadDim: 8, BlockSize: 5, NumBlocks: 9}
			s, err := NewKVStore(d, lay)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if want := 3 * 2 * 5 * 2 * 8 * dt.Size(); s.BlockBytes() != want {
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
				copyModel(model, lay, dt.Size(), c)
			}
			check("after copies")

			buf := make([]byte, s.BlockBytes())
			for name, c := range map[string]struct {
				err  error
				want error
			}{
				"read past the pool":   {s.ReadBlock(9, buf), ErrBlockRange},
				"write a short buffer": {s.WriteBlock(0, buf[1:]), ErrBufferSize},
				"copy too many slots":  {s.CopyBlocks([]blockstore.BlockCopy{{Src: 0, Dst: 1, Slots: 6}}), ErrSlotRange},
				"copy from nowhere":    {s.CopyBlocks([]blockstore.BlockCopy{{Src: -1, Dst: 1, Slots: 1}}), ErrBlockRange},
				"chained copies":       {s.CopyBlocks([]blockstore.BlockCopy{{Src: 0, Dst: 1, Slots: 1}, {Src: 1, Dst: 2, Slots: 1}}), ErrCopyOverlap},
				"one block twice":      {s.CopyBlocks([]blockstore.BlockCopy{{Src: 0, Dst: 1, Slots: 1}, {Src: 2, Dst: 1, Slots: 1}}), ErrCopyOverlap},
			} {
				if !errors.Is(c.err, c.want) {
					t.Errorf("%s: %v, want %v", name, c.err, c.want)
				}
			}
			check("after refused calls")
		})
	}
}

// naiveMatMulT is y = a·wᵀ in float64.
func naiveMatMulT(a, w []float32, m, n, k int) []float32 {
	y := make([]float32, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				s += float64(a[i*k+l]) * float64(w[j*k+l])
			}
			y[i*n+j] = float32(s)
		}
	}
	return y
}

func TestMatMulT(t *testing.T) {
	for _, dt := range src.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			d := open(t, dt)
			m, n, k := 37, 53, 70
			rng := rand.New(rand.NewPCG(3, 4))
			vec := func(n int) []float32 {
				f := make([]float32, n)
				for i := range f {
					f[i] = launch.Round(dt, float32(rng.Float64()*2-1))
				}
				return f
			}
			a, w, y0 := vec(m*k), vec(n*k), vec(m*n)
			up := func(dt src.DType, f []float32) launch.Ptr {
				b := encode(dt, f)
				p, err := d.Alloc(len(b))
				if err == nil {
					err = d.Write(p, b)
				}
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			pa, pw, py := up(dt, a), up(dt, w), up(src.F32, y0)
			defer func() { // compute-sanitizer's leak check would report them
				for _, p := range []launch.Ptr{pa, pw, py} {
					if err := d.Free(p); err != nil {
						t.Error(err)
					}
				}
			}()
			for _, beta := range []float32{0, 1} {
				if err := d.Write(py, encode(src.F32, y0)); err != nil {
					t.Fatal(err)
				}
				if err := d.Do(func(x *Exec) error { return x.MatMulT(py, pa, pw, m, n, k, beta) }); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, 4*m*n)
				if err := d.Read(got, py); err != nil {
					t.Fatal(err)
				}
				gotF := make([]float32, m*n)
				launch.Decode(src.F32, gotF, got)
				want := naiveMatMulT(a, w, m, n, k)
				for i := range want {
					want[i] += beta * y0[i]
				}
				if e := kerneltest.RelErr(gotF, want); e > kerneltest.Tolerance[dt] {
					t.Errorf("beta %g: relative error %.3g", beta, e)
				}
			}
		})
	}
}

func encode(t src.DType, f []float32) []byte {
	b := make([]byte, len(f)*t.Size())
	launch.Encode(t, b, f)
	return b
}

// TestCloseFreesMemory checks that KVStore.Close returns its memory to the
// context and Device.Close returns everything (context, module, cuBLAS) to
// the GPU, as a second context sees it.
func TestCloseFreesMemory(t *testing.T) {
	probe := open(t, src.F32)
	before, _, err := probe.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	inCtx, _, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewKVStore(d, launch.KVLayout{Layers: 22, KVHeads: 4, HeadDim: 64, BlockSize: 16, NumBlocks: 2048})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CopyBlocks([]blockstore.BlockCopy{{Src: 0, Dst: 1, Slots: 16}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	after, _, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	// The copy descriptors' buffer is freed too; the context keeps only
	// what it held before the store.
	if after != inCtx {
		t.Errorf("free memory %d after KVStore.Close, %d before NewKVStore", after, inCtx)
	}
	// A product (y f32 at p, then bf16 a and w) makes the cuBLAS handle
	// and its workspace, which Device.Close must release too.
	err = d.Do(func(x *Exec) error {
		if err := x.MatMulT(0, 0, 0, 0, 0, 0, 0); err == nil {
			return errors.New("empty product accepted")
		}
		p, err := x.Alloc(3 * 4 * 8 * 8)
		if err != nil {
			return err
		}
		if err := x.Write(p, make([]byte, 3*4*8*8)); err != nil {
			return err
		}
		return errors.Join(x.MatMulT(p, p+4*8*8, p+6*8*8, 8, 8, 8, 0), x.Synchronize(), x.Free(p))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	final, _, err := probe.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if final != before {
		t.Errorf("GPU free memory %d after Device.Close, %d before Open: %d bytes left", final, before, before-final)
	}
}

// BenchmarkDecodeAttention times one decode step's attention over 64
// sequences of 1,024 cached tokens (TinyLlama's shape: 32 query heads, 4
// KV heads of 64, bf16, blocks of 16 in random order) at several splits,
// and a device-to-device copy in the same run. Both report GB/s of memory
// traffic: K and V read for attention, read plus write for the copy.
func BenchmarkDecodeAttention(b *testing.B) {
	d := open(b, src.BF16)
	const seqs, ctx, nHeads = 64, 1024, 32
	lay := launch.KVLayout{Layers: 1, KVHeads: 4, HeadDim: 64, BlockSize: 16, NumBlocks: seqs * ctx / 16}
	kvBytes := seqs * ctx * 2 * lay.KVDim() * 2
	rng := rand.New(rand.NewPCG(5, 6))
	perm := rng.Perm(lay.NumBlocks)
	var sb launch.StepBuilder
	for s := range seqs {
		table := make([]blockstore.BlockID, ctx/16)
		for i := range table {
			table[i] = blockstore.BlockID(perm[s*ctx/16+i])
		}
		if err := sb.Add(table, 16, ctx-1, 1); err != nil {
			b.Fatal(err)
		}
	}
	var st launch.Step
	var pool, q, out, part, copyDst launch.Ptr
	err := d.Do(func(x *Exec) error {
		var err error
		alloc := func(n int) launch.Ptr {
			p, e := x.Alloc(n)
			err = errors.Join(err, e)
			return p
		}
		pool = alloc(int(lay.BlockElems()) * lay.NumBlocks * 2)
		copyDst = alloc(kvBytes)
		q = alloc(4 * seqs * nHeads * lay.HeadDim)
		out = alloc(2 * seqs * nHeads * lay.HeadDim)
		part = alloc(4 * launch.AttnWorkspace(launch.Step{Rows: seqs, MaxPos: ctx - 1}, lay, nHeads, 32))
		packed := alloc(4 * len(sb.Packed()))
		if err != nil {
			return err
		}
		st = sb.Step(packed)
		return errors.Join(x.Write(packed, int32Bytes(sb.Packed())), x.Write(q, make([]byte, 4*seqs*nHeads*lay.HeadDim)),
			x.Write(pool, make([]byte, kvBytes)))
	})
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, bytes int, step func(x *Exec) error) {
		err := d.Do(func(x *Exec) error {
			if err := step(x); err != nil { // warm up
				return err
			}
			if err := x.Synchronize(); err != nil {
				return err
			}
			b.ResetTimer()
			for range b.N {
				if err := step(x); err != nil {
					return err
				}
			}
			err := x.Synchronize()
			b.StopTimer()
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	}
	auto := launch.ChooseSplit(st, lay.KVHeads, d.SMs())
	for _, split := range []int{auto, 0, 64, 128, 256, 512} {
		name := fmt.Sprintf("attention/split=%d", split)
		if split == auto {
			name = fmt.Sprintf("attention/split=auto(%d)", auto)
		}
		b.Run(name, func(b *testing.B) {
			a := launch.Attn{Q: q, LDQ: nHeads * lay.HeadDim, Out: out, NHeads: nHeads, Split: split, Partial: part}
			run(b, kvBytes, func(x *Exec) error { return launch.Attention(x, pool, lay, st, a) })
		})
	}
	b.Run("copy", func(b *testing.B) {
		run(b, 2*kvBytes, func(x *Exec) error { return x.Copy(copyDst, pool, kvBytes) })
	})
}
