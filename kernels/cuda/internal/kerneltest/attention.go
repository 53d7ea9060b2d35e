package kerneltest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// attnCase is one batch: each sequence has start cached positions and rows
// new ones; share[i] > 0 makes sequence i begin with the first share[i]
// blocks of sequence 0's table (a shared cached prefix).
type attnCase struct {
	name                string
	kvHeads, nHeads, hd int
	bs, split           int
	starts, rows, share []int
}

var attnCases = []attnCase{
	{name: "decode GQA split", kvHeads: 2, nHeads: 8, hd: 16, bs: 4, split: 8,
		starts: []int{37, 12, 0, 64}, rows: []int{1, 1, 1, 1}, share: []int{0, 3, 0, 9}},
	{name: "prefill over prefix", kvHeads: 1, nHeads: 3, hd: 10, bs: 5,
		starts: []int{7, 0, 20}, rows: []int{9, 13, 3}, share: []int{0, 0, 1}},
	{name: "mixed split head 40", kvHeads: 3, nHeads: 6, hd: 40, bs: 3, split: 7,
		starts: []int{6, 30, 0, 6}, rows: []int{4, 1, 6, 2}, share: []int{0, 1, 0, 2}},
	{name: "head 128 block 16", kvHeads: 2, nHeads: 4, hd: 128, bs: 16, split: 32,
		starts: []int{40, 100, 33}, rows: []int{2, 1, 5}, share: []int{0, 2, 2}},
	{name: "MHA head 8", kvHeads: 4, nHeads: 4, hd: 8, bs: 7,
		starts: []int{0, 15}, rows: []int{11, 1}, share: []int{0, 0}},
	{name: "split of one", kvHeads: 1, nHeads: 2, hd: 6, bs: 2, split: 1,
		starts: []int{4, 0}, rows: []int{1, 2}, share: []int{0, 0}},
	// The largest groups: 26 and 32 query heads per KV head (832 and
	// 1,024 threads, attn_wide), which the GPU refused before attn_wide's
	// launch bound capped its registers.
	{name: "group of 26", kvHeads: 2, nHeads: 52, hd: 24, bs: 4,
		starts: []int{9, 2}, rows: []int{2, 1}, share: []int{0, 0}},
	{name: "group of 32 split", kvHeads: 1, nHeads: 32, hd: 64, bs: 8, split: 16,
		starts: []int{20, 0}, rows: []int{1, 3}, share: []int{0, 0}},
	// attn_decode's shapes (pages of 8, 16 and 32; splits of multiples of
	// 32; tiles cut short by a split's or a context's end; the largest
	// group it holds, 32 heads of 64; prefill rows too).
	{name: "decode page 16 group 8 split", kvHeads: 2, nHeads: 16, hd: 64, bs: 16, split: 64,
		starts: []int{150, 37, 0, 95}, rows: []int{1, 1, 1, 1}, share: []int{0, 2, 0, 5}},
	{name: "decode page 8 prefill rows", kvHeads: 1, nHeads: 3, hd: 32, bs: 8,
		starts: []int{9, 30}, rows: []int{3, 1}, share: []int{0, 1}},
	{name: "decode page 32 group 32 split", kvHeads: 1, nHeads: 32, hd: 64, bs: 32, split: 32,
		starts: []int{70}, rows: []int{1}, share: []int{0}},
	{name: "decode page 8 head 8", kvHeads: 2, nHeads: 6, hd: 8, bs: 8, split: 32,
		starts: []int{5, 40}, rows: []int{1, 1}, share: []int{0, 0}},
	// attn_decode's pipeline: splits of several tiles (64 positions, or
	// 32 and 16 where head rows are longer), so that tiles t+1 and t+2
	// are fetched while tile t is computed; last tiles of 1 and 2
	// positions; heads whose dimensions leave lanes idle (48, 96 over
	// 2 and 4 per lane); head 4 (f32 only: 8 bytes on 16-bit pools go to
	// attn); groups of 1, 4, 5, 12, 16 and 24.
	{name: "decode page 16 group 8 long rows", kvHeads: 2, nHeads: 16, hd: 64, bs: 16,
		starts: []int{300, 129, 64, 0}, rows: []int{1, 1, 1, 1}, share: []int{0, 4, 0, 0}},
	{name: "decode page 8 group 1 head 48 split 96", kvHeads: 3, nHeads: 3, hd: 48, bs: 8, split: 96,
		starts: []int{250, 95, 191}, rows: []int{1, 1, 1}, share: []int{0, 0, 6}},
	{name: "decode page 32 group 4 head 128", kvHeads: 1, nHeads: 4, hd: 128, bs: 32,
		starts: []int{200, 17}, rows: []int{1, 2}, share: []int{0, 0}},
	{name: "decode page 16 group 5 head 96 split 160", kvHeads: 2, nHeads: 10, hd: 96, bs: 16, split: 160,
		starts: []int{333, 40}, rows: []int{1, 1}, share: []int{0, 2}},
	{name: "decode page 8 group 12 head 4", kvHeads: 1, nHeads: 12, hd: 4, bs: 8, split: 32,
		starts: []int{70, 3}, rows: []int{1, 1}, share: []int{0, 0}},
	{name: "decode page 32 group 16 head 16", kvHeads: 2, nHeads: 32, hd: 16, bs: 32,
		starts: []int{150}, rows: []int{1}, share: []int{0}},
	{name: "decode page 16 group 24 head 32 split 64", kvHeads: 1, nHeads: 24, hd: 32, bs: 16, split: 64,
		starts: []int{140, 64}, rows: []int{1, 1}, share: []int{0, 4}},
	// attn_decode_tc's (Attn.TensorCores, on every pool; the cases
	// above with heads of 64 or 128 and groups of up to 16 run it too):
	// pages of 8 with the largest group, 16, over splits of 96 (a tile of
	// 64 and one of 32, whose last two warps see no position); heads of
	// 128 (tiles of 32, two warps a slice) over pages of 8 and 32 with
	// a group of 1 and tiles ending 1 and 17 positions in.
	{name: "decode tc page 8 group 16 split 96", kvHeads: 1, nHeads: 16, hd: 64, bs: 8, split: 96,
		starts: []int{200, 17, 96}, rows: []int{1, 1, 1}, share: []int{0, 2, 12}},
	{name: "decode tc page 8 group 1 head 128", kvHeads: 2, nHeads: 2, hd: 128, bs: 8, split: 64,
		starts: []int{160, 0, 48}, rows: []int{1, 1, 1}, share: []int{0, 0, 6}},
	{name: "decode tc page 32 group 6 head 128 long", kvHeads: 1, nHeads: 6, hd: 128, bs: 32,
		starts: []int{272, 31}, rows: []int{1, 2}, share: []int{0, 0}},
	{name: "decode tc page 16 group 2 head 64 prefill rows", kvHeads: 2, nHeads: 4, hd: 64, bs: 16, split: 32,
		starts: []int{10, 63}, rows: []int{7, 1}, share: []int{0, 0}},
	// attn_prefill's shapes (head sizes 64 and 128, groups of 1, 3, 4
	// and 8; prompts cut into several query tiles, after a cached
	// prefix, ending mid-page; decode rows in the same step; a group's
	// packed rows crossing a chunk's edge mid-token).
	{name: "prefill head 64 MHA", kvHeads: 2, nHeads: 2, hd: 64, bs: 16,
		starts: []int{0, 37}, rows: []int{70, 40}, share: []int{0, 0}},
	{name: "prefill head 128 group 4", kvHeads: 2, nHeads: 8, hd: 128, bs: 16, split: 32,
		starts: []int{21}, rows: []int{50}, share: []int{0}},
	{name: "prefill head 64 group 8 shared prefix", kvHeads: 1, nHeads: 8, hd: 64, bs: 8,
		starts: []int{16, 40}, rows: []int{33, 20}, share: []int{0, 2}},
	{name: "prefill head 64 group 3 with decodes", kvHeads: 2, nHeads: 6, hd: 64, bs: 32,
		starts: []int{100, 5, 60}, rows: []int{1, 60, 1}, share: []int{0, 0, 1}},
}

// recorder is a Memory that records the kernels launched through it.
type recorder struct {
	Memory
	kernels []string
}

func (r *recorder) Launch(kernel string, grid, block launch.Dim3, args ...uint64) error {
	r.kernels = append(r.kernels, kernel)
	return r.Memory.Launch(kernel, grid, block, args...)
}

// attnSetup is a case laid out on the CPU (reference) and on the device.
type attnSetup struct {
	c      attnCase
	lay    launch.KVLayout
	ref    *cpu.KVCache
	seqs   []cpu.AttnSeq
	qkv    []float32 // [rows][q | k | v] as the step's matrix product leaves them
	ld     int
	layer  int
	st     launch.Step
	kv     launch.Ptr
	rowPos []int32
}

// setup builds block tables over shuffled physical blocks, fills every
// slot any sequence reads with random K/V (the same bytes on the CPU and
// the device), and clears the new rows' slots of the tested layer on the
// device, which AppendKV must then fill.
func (e *Env) setup(c attnCase) *attnSetup {
	s := &attnSetup{c: c, layer: 1}
	tables := make([][]blockstore.BlockID, len(c.starts))
	need := 0
	for i := range c.starts {
		need += (c.starts[i] + c.rows[i] + c.bs - 1) / c.bs
	}
	s.lay = launch.KVLayout{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, BlockSize: c.bs, NumBlocks: need + 3}
	free := e.rng.Perm(s.lay.NumBlocks)
	for i := range c.starts {
		n := (c.starts[i] + c.rows[i] + c.bs - 1) / c.bs
		if c.share[i] > 0 {
			if c.share[i]*c.bs > min(c.starts[0], c.starts[i]) {
				panic(fmt.Sprintf("case %s: sequence %d shares blocks past a cached prefix", c.name, i))
			}
			tables[i] = slices.Clone(tables[0][:c.share[i]])
		}
		for len(tables[i]) < n {
			tables[i] = append(tables[i], blockstore.BlockID(free[0]))
			free = free[1:]
		}
	}
	var err error
	s.ref, err = cpu.NewKVCache(cpu.KVConfig{Layers: 2, KVHeads: c.kvHeads, HeadDim: c.hd, BlockSize: c.bs, NumBlocks: s.lay.NumBlocks})
	if err != nil {
		e.t.Fatal(err)
	}
	kd := s.lay.KVDim()
	for l := range 2 {
		for b := range s.lay.NumBlocks {
			for slot := range c.bs {
				s.ref.Put(l, blockstore.BlockID(b), slot, e.rand(kd), e.rand(kd))
			}
		}
	}
	// The new rows' K and V, in the qkv rows, are what the CPU cache
	// already holds in their slots.
	s.ld = (c.nHeads+2*c.kvHeads)*c.hd + 3
	var sb launch.StepBuilder
	var slots []blockstore.BlockID // the block of each new row, for clearing below
	block := make([]byte, s.ref.BlockBytes())
	f := make([]float32, len(block)/4)
	for i := range c.starts {
		s.seqs = append(s.seqs, cpu.AttnSeq{Blocks: tables[i], Start: c.starts[i], Rows: c.rows[i]})
		if err := sb.Add(tables[i], c.bs, c.starts[i], c.rows[i]); err != nil {
			e.t.Fatal(err)
		}
		for r := range c.rows[i] {
			pos := c.starts[i] + r
			row := make([]float32, s.ld)
			copy(row, e.randF32(c.nHeads*c.hd))
			id := tables[i][pos/c.bs]
			if err := s.ref.ReadBlock(id, block); err != nil {
				e.t.Fatal(err)
			}
			launch.Decode(launch.F32, f, block)
			copy(row[c.nHeads*c.hd:], f[(2*s.layer*c.bs+pos%c.bs)*kd:][:kd])
			copy(row[(c.nHeads+c.kvHeads)*c.hd:], f[((2*s.layer+1)*c.bs+pos%c.bs)*kd:][:kd])
			s.qkv = append(s.qkv, row...)
			s.rowPos = append(s.rowPos, int32(pos))
			slots = append(slots, id)
		}
	}
	s.st = sb.Step(e.ints(sb.Packed()))
	s.kv = e.alloc(int(s.lay.BlockElems()) * s.lay.NumBlocks * e.dt.Size())
	e.writePool(s)
	for i, pos := range s.rowPos {
		off := (int64(slots[i])*s.lay.BlockElems() + s.lay.LayerOffset(s.layer) + int64(int(pos)%c.bs*kd)) * int64(e.dt.Size())
		for _, o := range []int64{off, off + int64(c.bs*kd*e.dt.Size())} {
			e.write(s.kv+launch.Ptr(o), make([]byte, kd*e.dt.Size()))
		}
	}
	return s
}

// writePool copies the CPU cache's blocks into the device pool: both lay
// a block out [layer][K,V][slot][kvHead][headDim].
func (e *Env) writePool(s *attnSetup) {
	block := make([]byte, s.ref.BlockBytes())
	f := make([]float32, len(block)/4)
	dev := make([]byte, len(f)*e.dt.Size())
	for b := range s.lay.NumBlocks {
		if err := s.ref.ReadBlock(blockstore.BlockID(b), block); err != nil {
			e.t.Fatal(err)
		}
		launch.Decode(launch.F32, f, block)
		launch.Encode(e.dt, dev, f)
		e.write(s.kv+launch.Ptr(b*len(dev)), dev)
	}
}

// checkPool compares every block of the device pool with the CPU cache,
// exactly: both hold the same rounded values.
func (e *Env) checkPool(s *attnSetup) {
	e.t.Helper()
	block := make([]byte, s.ref.BlockBytes())
	want := make([]float32, len(block)/4)
	n := len(want) * e.dt.Size()
	got := make([]float32, len(want))
	for b := range s.lay.NumBlocks {
		if err := s.ref.ReadBlock(blockstore.BlockID(b), block); err != nil {
			e.t.Fatal(err)
		}
		launch.Decode(launch.F32, want, block)
		launch.Decode(e.dt, got, e.read(s.kv+launch.Ptr(b*n), n))
		if !slices.Equal(got, want) {
			e.t.Fatalf("block %d: element %d is %g, want %g", b, worst(got, want), got[worst(got, want)], want[worst(got, want)])
		}
	}
}

// Attention appends each case's new K/V, checks the pool equals the CPU
// cache, then compares attention with cpu.KVCache.Attention: through the
// kernel launch.AttentionKernel picks (which it checks was launched) and,
// where that is attn_decode or attn_prefill, through attn too (Attn.Warp),
// and through attn_decode_tc where it takes the case (Attn.TensorCores).
// On f32 pools, where AttentionKernel never picks attn_prefill, the
// prefill cases run it too (Attn.Prefill), within bf16's tolerance: it
// rounds its inputs to bf16.
func Attention(t *testing.T, e *Env) {
	w := cpu.NewWorkers(2)
	defer w.Close()
	for _, c := range attnCases {
		t.Run(c.name, func(t *testing.T) {
			e := e.sub(t)
			{
				s := e.setup(c)
				qkv := e.floats(s.qkv)
				lay, kd := s.lay, s.lay.KVDim()
				e.launch(launch.AppendKV(e.d, s.kv, lay, s.layer, qkv+launch.Ptr(4*c.nHeads*c.hd), qkv+launch.Ptr(4*(c.nHeads*c.hd+kd)), s.ld, s.st))
				e.checkPool(s)

				rows := s.st.Rows
				q := make([]float32, 0, rows*c.nHeads*c.hd)
				for r := range rows {
					q = append(q, s.qkv[r*s.ld:][:c.nHeads*c.hd]...)
				}
				want := make([]float32, len(q))
				s.ref.Attention(w, s.layer, q, want, s.seqs, c.nHeads, &cpu.AttnScratch{})
				kernel := launch.AttentionKernel(lay, s.st, c.nHeads, c.split, e.dt.Size())
				forced := e.dt == src.F32 && strings.HasPrefix(launch.AttentionKernel(lay, s.st, c.nHeads, c.split, 2), "attn_prefill")
				// The kernel AttentionKernel picks; attn (Warp) where that is
				// attn_decode or attn_prefill; attn_decode_tc (TensorCores)
				// where it takes the case.
				tc := launch.TensorCoreDecode(lay, c.nHeads, c.split)
				for _, mode := range []string{"picked", "warp", "tensor cores"} {
					warp := mode == "warp"
					if warp && !strings.HasPrefix(kernel, "attn_decode") && !strings.HasPrefix(kernel, "attn_prefill") ||
						mode == "tensor cores" && !tc {
						continue
					}
					out := e.alloc(rows * c.nHeads * c.hd * e.dt.Size())
					a := launch.Attn{Q: qkv, LDQ: s.ld, Out: out, NHeads: c.nHeads, Layer: s.layer, Split: c.split, Warp: warp,
						TensorCores: mode == "tensor cores"}
					if ws := launch.AttnWorkspace(s.st, lay, c.nHeads, c.split); ws > 0 {
						a.Partial = e.alloc(4 * ws)
					}
					counts := launch.AttnCounts(s.st, lay, c.split)
					if counts > 0 {
						a.Counts = e.ints(make([]int32, counts))
					}
					rec := &recorder{Memory: e.d}
					e.launch(launch.Attention(rec, s.kv, lay, s.st, a))
					if counts > 0 && slices.ContainsFunc(e.readInts(a.Counts, counts), func(n int32) bool { return n != 0 }) {
						t.Errorf("%s left split counts %v, want zeros for the next launch", rec.kernels[0], e.readInts(a.Counts, counts))
					}
					if mode == "picked" && rec.kernels[0] != kernel {
						t.Errorf("launched %v, AttentionKernel says %s", rec.kernels, kernel)
					}
					if mode == "tensor cores" && !strings.HasPrefix(rec.kernels[0], "attn_decode_tc") {
						t.Errorf("TensorCores launched %v, want attn_decode_tc", rec.kernels)
					}
					tol := Tolerance[e.dt]
					if mode == "tensor cores" && e.dt == src.F32 {
						tol = Tolerance[src.BF16] // rounded to bf16 on the way in, as attn_prefill forced on f32
					}
					e.within(fmt.Sprintf("attention (%s)", rec.kernels[0]), e.readElems(out, len(want)), want, tol)
				}
				if forced {
					out := e.alloc(rows * c.nHeads * c.hd * e.dt.Size())
					a := launch.Attn{Q: qkv, LDQ: s.ld, Out: out, NHeads: c.nHeads, Layer: s.layer, Prefill: true}
					e.launch(launch.Attention(e.d, s.kv, lay, s.st, a))
					e.within("attention (attn_prefill forced on f32)", e.readElems(out, len(want)), want, Tolerance[src.BF16])
				}
			}
		})
	}
}

// CopyBlocks copies partial and whole blocks in one launch and
// compares the pool with cpu.KVCache.CopyBlocks on the same copies.
func CopyBlocks(t *testing.T, e *Env) {
	s := e.setup(attnCases[2])
	e.writePool(s)
	copies := []blockstore.BlockCopy{{Src: 0, Dst: 5, Slots: 3}, {Src: 2, Dst: 1, Slots: 1}, {Src: 3, Dst: 4, Slots: 0}, {Src: 2, Dst: 7, Slots: 2}}
	var desc []int32
	for _, c := range copies {
		desc = append(desc, int32(c.Src), int32(c.Dst), int32(c.Slots))
	}
	e.launch(launch.CopyBlocks(e.d, s.kv, s.lay, e.ints(desc), len(copies)))
	if err := s.ref.CopyBlocks(copies); err != nil {
		t.Fatal(err)
	}
	e.checkPool(s)
}
