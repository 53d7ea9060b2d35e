package launch

import (
	"errors"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// recorder is a Device that records launches instead of running them.
type recorder struct {
	launches []string
	blocks   []Dim3
}

func (r *recorder) DType() src.DType { return src.F32 }

func (r *recorder) Launch(kernel string, grid, block Dim3, args ...uint64) error {
	r.launches = append(r.launches, kernel)
	r.blocks = append(r.blocks, block)
	return nil
}

// TestShapes checks that shapes the kernels cannot take are refused
// before anything is launched.
func TestShapes(t *testing.T) {
	d := &recorder{}
	lay := KVLayout{Layers: 1, KVHeads: 2, HeadDim: 8, BlockSize: 4, NumBlocks: 4}
	st := Step{Rows: 1, RowPos: 1, RowBT: 1, BT: 1}
	for name, err := range map[string]error{
		"heads not a multiple of KV heads": Attention(d, 1, lay, st, Attn{Q: 1, LDQ: 100, Out: 1, NHeads: 3}),
		"group over 32":                    Attention(d, 1, KVLayout{Layers: 1, KVHeads: 1, HeadDim: 2, BlockSize: 4, NumBlocks: 4}, st, Attn{Q: 1, LDQ: 200, Out: 1, NHeads: 33}),
		"head dim over 256":                Attention(d, 1, KVLayout{Layers: 1, KVHeads: 1, HeadDim: 258, BlockSize: 4, NumBlocks: 4}, st, Attn{Q: 1, LDQ: 300, Out: 1, NHeads: 1}),
		"no workspace for splits":          Attention(d, 1, lay, Step{Rows: 1, MaxPos: 9}, Attn{Q: 1, LDQ: 100, Out: 1, NHeads: 2, Split: 4}),
		"queries past the row":             Attention(d, 1, lay, st, Attn{Q: 1, LDQ: 15, Out: 1, NHeads: 2}),
		"layer out of range":               AppendKV(d, 1, lay, 1, 1, 2, 100, st),
		"K wider than the row stride":      AppendKV(d, 1, lay, 0, 1, 2, 15, st),
		"empty pool":                       CopyBlocks(d, 1, KVLayout{Layers: 1, KVHeads: 2, HeadDim: 8, BlockSize: 4}, 1, 1),
		"no rows":                          RMSNorm(d, 1, 1, 1, 0, 8, 1e-5),
		"no head rows":                     RMSNormF32(d, 1, 1, 1, 0, 8, 1e-5),
		"empty bias":                       AddBias(d, 1, 1, 2, 0),
		"too many rows in grid y":          SwiGLU(d, 1, 1, 1, 8, 70000, 8),
		"too many step rows":               AppendKV(d, 1, lay, 0, 1, 2, 100, Step{Rows: 70000}),
		"odd head dim":                     RoPE(d, Adjacent, 1, 10, 1, 1, 1, 5, 1e4, 0),
		"heads past the row":               RoPE(d, Halves, 1, 10, 1, 1, 2, 6, 1e4, 0),
		"hidden over stride":               SwiGLU(d, 1, 1, 1, 4, 1, 5),
		"empty add":                        Add(d, 1, 1, 0),
		"empty argmax row":                 Argmax(d, 1, 1, 1, 0),
	} {
		if err == nil {
			t.Errorf("%s: launched", name)
		}
	}
	if len(d.launches) != 0 {
		t.Errorf("launched %v", d.launches)
	}
}

// TestAttentionSplits checks that a launch of one split or several is one
// kernel, with a workspace sized for every split and a count for each
// row and KV head where there are several.
func TestAttentionSplits(t *testing.T) {
	lay := KVLayout{Layers: 1, KVHeads: 2, HeadDim: 8, BlockSize: 4, NumBlocks: 4}
	st := Step{Rows: 3, RowPos: 1, RowBT: 1, BT: 1, MaxPos: 40}
	for _, c := range []struct {
		split, splits, workspace, counts int
	}{{0, 1, 0, 0}, {41, 1, 0, 0}, {40, 2, 3 * 4 * 2 * 10, 3 * 2}, {8, 6, 3 * 4 * 6 * 10, 3 * 2}} {
		d := &recorder{}
		if got := Splits(st, c.split); got != c.splits {
			t.Errorf("split %d: %d splits, want %d", c.split, got, c.splits)
		}
		if got := AttnWorkspace(st, lay, 4, c.split); got != c.workspace {
			t.Errorf("split %d: workspace %d, want %d", c.split, got, c.workspace)
		}
		if got := AttnCounts(st, lay, c.split); got != c.counts {
			t.Errorf("split %d: counts %d, want %d", c.split, got, c.counts)
		}
		a := Attn{Q: 1, LDQ: 64, Out: 1, NHeads: 4, Split: c.split, Partial: 1}
		if err := Attention(d, 1, lay, st, a); (err != nil) != (c.splits > 1) {
			t.Errorf("split %d without counts: %v", c.split, err)
		}
		d = &recorder{}
		a.Counts = 1
		if err := Attention(d, 1, lay, st, a); err != nil {
			t.Fatal(err)
		}
		if len(d.launches) != 1 {
			t.Errorf("split %d: launched %v", c.split, d.launches)
		}
	}
}

func TestChooseSplit(t *testing.T) {
	for _, c := range []struct {
		rows, maxPos, work, kvHeads, sms, want int
	}{
		{64, 1023, 0, 4, 132, 256},    // 262,144 head-positions over 1,056 blocks: 249, rounded to 256
		{64, 1023, 0, 32, 132, 0},     // 2,048 blocks already
		{1, 100, 0, 4, 132, 0},        // short context
		{1, 4095, 4096, 1, 10, 64},    // 80 splits of 52, rounded to 64
		{64, 4095, 10459, 4, 132, 64}, // one row of 4,096 and 63 of 101: the long one in 64 splits
		{2, 200, 300, 1, 1, 64},       // 38 a block, rounded to 64
		{2, 200, 400, 1, 0, 0},        // no multiprocessor to fill
	} {
		st := Step{Rows: c.rows, MaxPos: c.maxPos, KVWork: c.work}
		got := ChooseSplit(st, c.kvHeads, c.sms)
		if got != c.want {
			t.Errorf("%+v: split %d, want %d", c, got, c.want)
		}
		if got%32 != 0 {
			t.Errorf("%+v: split %d is not a multiple of attn_decode's tile", c, got)
		}
	}
}

// TestAttentionKernel checks that groups of up to 16 query heads per KV
// head launch attn and larger ones attn_wide, with a warp per query head.
func TestAttentionKernel(t *testing.T) {
	st := Step{Rows: 2, RowPos: 1, RowBT: 1, BT: 1, MaxPos: 5}
	for _, c := range []struct {
		group  int
		kernel string
	}{{1, "attn"}, {16, "attn"}, {17, "attn_wide"}, {26, "attn_wide"}, {32, "attn_wide"}} {
		lay := KVLayout{Layers: 1, KVHeads: 2, HeadDim: 8, BlockSize: 4, NumBlocks: 4}
		d := &recorder{}
		a := Attn{Q: 1, LDQ: 2 * c.group * 8, Out: 1, NHeads: 2 * c.group}
		if err := Attention(d, 1, lay, st, a); err != nil {
			t.Fatal(err)
		}
		if len(d.launches) != 1 || d.launches[0] != c.kernel || d.blocks[0] != (Dim3{32 * c.group, 1, 1}) {
			t.Errorf("group %d: launched %v with blocks %v, want %s with %d threads", c.group, d.launches, d.blocks, c.kernel, 32*c.group)
		}
		if err := GPULimits.Check(c.kernel, Kernel{MaxThreads: src.MaxThreads(c.kernel)}, Dim3{1, 2, 2}, d.blocks[0]); err != nil {
			t.Errorf("group %d: %v", c.group, err)
		}
	}
}

// TestTensorCoreDecode checks which shapes TensorCores launches
// attn_decode_tc on (heads of 64 or 128, groups of up to 16, attn_decode's
// pages and splits) with its 128-thread block, that other shapes keep
// AttentionKernel's pick, and that without TensorCores attn_decode runs.
func TestTensorCoreDecode(t *testing.T) {
	st := Step{Rows: 2, RowPos: 1, RowBT: 1, BT: 1, MaxPos: 200}
	for _, c := range []struct {
		bs, hd, nHeads, kvHeads, split int
		kernel                         string
	}{
		{16, 64, 32, 4, 0, "attn_decode_tc16"}, // TinyLlama
		{8, 128, 32, 8, 64, "attn_decode_tc8"},
		{32, 64, 16, 1, 96, "attn_decode_tc32"}, // a group of 16
		{32, 64, 32, 1, 0, "attn_decode32"},     // a group of 32
		{16, 96, 8, 4, 0, "attn_decode16"},      // head 96
		{16, 64, 32, 4, 48, "attn"},             // split off the tile
		{4, 64, 32, 4, 0, "attn"},               // page size
	} {
		lay := KVLayout{Layers: 1, KVHeads: c.kvHeads, HeadDim: c.hd, BlockSize: c.bs, NumBlocks: 4}
		for _, tc := range []bool{false, true} {
			d := &recorder{}
			a := Attn{Q: 1, LDQ: c.nHeads * c.hd, Out: 1, NHeads: c.nHeads, Split: c.split, Partial: 1, Counts: 1, TensorCores: tc}
			if err := Attention(d, 256, lay, st, a); err != nil {
				t.Fatal(err)
			}
			want := c.kernel
			if !tc {
				want = AttentionKernel(lay, st, c.nHeads, c.split, 4)
			}
			threads := 32 * c.nHeads / c.kvHeads
			if strings.HasPrefix(want, "attn_decode") {
				threads = 128
			}
			if d.launches[0] != want || d.blocks[0].X != threads {
				t.Errorf("%+v tensor cores %v: launched %v with blocks %v, want %s with %d threads", c, tc, d.launches, d.blocks, want, threads)
			}
		}
	}
}

// TestDecodeKernel checks which shapes launch attn_decode (a page size it
// is compiled for, 16-byte head rows of at most 128 elements, a group's
// queries within 2,048 floats, splits of multiples of 32) with its
// 128-thread block, that Warp forces attn, and that a pool off a 16-byte
// boundary is refused.
func TestDecodeKernel(t *testing.T) {
	st := Step{Rows: 2, RowPos: 1, RowBT: 1, BT: 1, MaxPos: 200}
	for _, c := range []struct {
		bs, hd, nHeads, kvHeads, split int
		kernel                         string
	}{
		{16, 64, 32, 4, 0, "attn_decode16"}, // TinyLlama
		{8, 64, 32, 4, 64, "attn_decode8"},
		{32, 128, 32, 8, 96, "attn_decode32"},
		{32, 64, 32, 1, 0, "attn_decode32"}, // a group of 32 × 64 = 2,048
		{16, 4, 4, 2, 0, "attn_decode16"},   // 16 bytes of f32
		{4, 64, 32, 4, 0, "attn"},           // page size
		{64, 64, 32, 4, 0, "attn"},
		{16, 256, 8, 4, 0, "attn"},       // head over 128
		{16, 6, 4, 2, 0, "attn"},         // 24-byte rows
		{16, 128, 32, 1, 0, "attn_wide"}, // 4,096 query floats
		{16, 64, 32, 4, 48, "attn"},      // split off the tile
	} {
		lay := KVLayout{Layers: 1, KVHeads: c.kvHeads, HeadDim: c.hd, BlockSize: c.bs, NumBlocks: 4}
		for _, warp := range []bool{false, true} {
			d := &recorder{}
			a := Attn{Q: 1, LDQ: c.nHeads * c.hd, Out: 1, NHeads: c.nHeads, Split: c.split, Partial: 1, Counts: 1, Warp: warp}
			if err := Attention(d, 256, lay, st, a); err != nil {
				t.Fatal(err)
			}
			want, threads := c.kernel, 128
			if warp || !strings.HasPrefix(want, "attn_decode") {
				want, threads = warpKernel(c.nHeads/c.kvHeads), 32*c.nHeads/c.kvHeads
			}
			if d.launches[0] != want || d.blocks[0].X != threads {
				t.Errorf("%+v warp %v: launched %v with blocks %v, want %s with %d threads", c, warp, d.launches, d.blocks, want, threads)
			}
		}
	}
	lay := KVLayout{Layers: 1, KVHeads: 4, HeadDim: 64, BlockSize: 16, NumBlocks: 4}
	err := Attention(&recorder{}, 264, lay, st, Attn{Q: 1, LDQ: 2048, Out: 1, NHeads: 32})
	if !errors.Is(err, ErrShape) {
		t.Errorf("a pool at 264: %v, want ErrShape", err)
	}
}

// TestLimits checks that Check refuses each limit it knows, naming it,
// and passes a launch at every limit.
func TestLimits(t *testing.T) {
	one := Dim3{1, 1, 1}
	k := Kernel{MaxThreads: 512, Registers: 79}
	if err := GPULimits.Check("k", Kernel{}, Dim3{1<<31 - 1, 65535, 65535}, Dim3{1024, 1, 1}); err != nil {
		t.Errorf("launch at the grid limits: %v", err)
	}
	if err := GPULimits.Check("k", k, one, Dim3{32, 8, 2}); err != nil {
		t.Errorf("512 threads × 79 registers: %v", err)
	}
	for _, c := range []struct {
		name        string
		k           Kernel
		grid, block Dim3
		says        string
	}{
		{"grid y", Kernel{}, Dim3{1, 65536, 1}, one, "grid y is 65536"},
		{"grid z", Kernel{}, Dim3{1, 1, 65536}, one, "grid z is 65536"},
		{"grid x", Kernel{}, Dim3{1 << 31, 1, 1}, one, "grid x"},
		{"empty grid", Kernel{}, Dim3{0, 1, 1}, one, "grid x is 0"},
		{"block z", Kernel{}, one, Dim3{1, 1, 65}, "block z is 65"},
		{"threads", Kernel{}, one, Dim3{32, 33, 1}, "1056 threads per block, the device allows 1024"},
		{"kernel bound", k, one, Dim3{544, 1, 1}, "the kernel allows 512"},
		{"registers", Kernel{Registers: 79}, one, Dim3{1024, 1, 1}, "1024 threads × 79 registers need 80896"},
	} {
		err := GPULimits.Check("k", c.k, c.grid, c.block)
		if !errors.Is(err, ErrLimits) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrLimits saying %q", c.name, err, c.says)
		}
	}
}

// gridRecorder records each launch's grid too.
type gridRecorder struct {
	recorder
	grids []Dim3
	es    int
}

func (r *gridRecorder) DType() src.DType {
	if r.es == 2 {
		return src.BF16
	}
	return src.F32
}

func (r *gridRecorder) Launch(kernel string, grid, block Dim3, args ...uint64) error {
	r.grids = append(r.grids, grid)
	return r.recorder.Launch(kernel, grid, block, args...)
}

// TestPrefillKernel checks which steps launch attn_prefill (16-bit
// elements, head size 64 or 128, query tiles of 16 rows or more on
// average, or Prefill forcing it) with its grid of (tiles, KV heads,
// chunks of 64 packed rows) and 128-thread block, within the GPU's limits.
func TestPrefillKernel(t *testing.T) {
	for _, c := range []struct {
		hd, es, rows, tiles, nHeads, kvHeads int
		force                                bool
		kernel                               string
		chunks                               int
	}{
		{64, 2, 1056, 17, 32, 4, false, "attn_prefill64", 8}, // TinyLlama: 64 x 8 packed rows per tile
		{128, 2, 64, 4, 8, 8, false, "attn_prefill128", 1},
		{128, 2, 32, 2, 28, 4, false, "attn_prefill128", 7}, // Qwen2.5-7B's group of 7
		{64, 2, 63, 4, 32, 4, false, "attn_decode16", 0},    // under 16 rows a tile
		{64, 4, 1056, 17, 32, 4, false, "attn_decode16", 0}, // f32 keeps exact sums
		{64, 4, 1056, 17, 32, 4, true, "attn_prefill64", 8},
		{80, 2, 1056, 17, 32, 4, true, "attn_decode16", 0}, // a head size it is not compiled for
		{64, 2, 0, 0, 32, 4, true, "attn_decode16", 0},     // a Step without tiles
	} {
		lay := KVLayout{Layers: 1, KVHeads: c.kvHeads, HeadDim: c.hd, BlockSize: 16, NumBlocks: 4}
		st := Step{Rows: max(c.rows, 1), RowPos: 1, RowBT: 1, BT: 1, MaxPos: 2000, Tiles: 1, NTiles: c.tiles}
		d := &gridRecorder{es: c.es}
		a := Attn{Q: 1, LDQ: c.nHeads * c.hd, Out: 1, NHeads: c.nHeads, Prefill: c.force, Partial: 1, Counts: 1}
		if err := Attention(d, 256, lay, st, a); err != nil {
			t.Fatal(err)
		}
		if d.launches[0] != c.kernel {
			t.Errorf("%+v: launched %v, want %s", c, d.launches, c.kernel)
			continue
		}
		if c.chunks == 0 {
			continue
		}
		if want := (Dim3{c.tiles, c.kvHeads, c.chunks}); len(d.launches) != 1 || d.grids[0] != want || d.blocks[0] != (Dim3{128, 1, 1}) {
			t.Errorf("%+v: launched %v over %v with blocks %v, want one over %v with 128 threads", c, d.launches, d.grids, d.blocks, want)
		}
		if err := GPULimits.Check(c.kernel, Kernel{MaxThreads: src.MaxThreads(c.kernel), Registers: 164}, d.grids[0], d.blocks[0]); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	lay := KVLayout{Layers: 1, KVHeads: 4, HeadDim: 64, BlockSize: 16, NumBlocks: 4}
	st := Step{Rows: 64, RowPos: 1, RowBT: 1, BT: 1, MaxPos: 63, Tiles: 1, NTiles: 1}
	if err := Attention(&gridRecorder{es: 2}, 264, lay, st, Attn{Q: 1, LDQ: 2048, Out: 1, NHeads: 32}); !errors.Is(err, ErrShape) {
		t.Errorf("attn_prefill on a pool at 264: %v, want ErrShape", err)
	}
}
