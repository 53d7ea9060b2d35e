package launch

import (
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// recorder is a Device that records launches instead of running them.
type recorder struct{ launches []string }

func (r *recorder) DType() src.DType { return src.F32 }

func (r *recorder) Launch(kernel string, grid, block Dim3, args ...uint64) error {
	r.launches = append(r.launches, kernel)
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
		"layer out of range":               AppendKV(d, 1, lay, 1, 1, 100, 0, 16, st),
		"K past the row":                   AppendKV(d, 1, lay, 0, 1, 20, 0, 16, st),
		"empty pool":                       CopyBlocks(d, 1, KVLayout{Layers: 1, KVHeads: 2, HeadDim: 8, BlockSize: 4}, 1, 1),
		"no rows":                          RMSNorm(d, 1, 1, 1, 0, 8, 1e-5),
		"too many rows":                    Embed(d, 1, 1, 1, 70000, 8),
		"odd head dim":                     RoPE(d, Adjacent, 1, 10, 1, 1, 1, 5, 1e4),
		"heads past the row":               RoPE(d, Halves, 1, 10, 1, 1, 2, 6, 1e4),
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

// TestAttentionSplits checks that one split launches attn alone and
// several add attn_combine, with a workspace sized for every split.
func TestAttentionSplits(t *testing.T) {
	lay := KVLayout{Layers: 1, KVHeads: 2, HeadDim: 8, BlockSize: 4, NumBlocks: 4}
	st := Step{Rows: 3, RowPos: 1, RowBT: 1, BT: 1, MaxPos: 40}
	for _, c := range []struct {
		split, splits, workspace int
		launches                 int
	}{{0, 1, 0, 1}, {41, 1, 0, 1}, {40, 2, 3 * 4 * 2 * 10, 2}, {8, 6, 3 * 4 * 6 * 10, 2}} {
		d := &recorder{}
		if got := Splits(st, c.split); got != c.splits {
			t.Errorf("split %d: %d splits, want %d", c.split, got, c.splits)
		}
		if got := AttnWorkspace(st, lay, 4, c.split); got != c.workspace {
			t.Errorf("split %d: workspace %d, want %d", c.split, got, c.workspace)
		}
		if err := Attention(d, 1, lay, st, Attn{Q: 1, LDQ: 64, Out: 1, NHeads: 4, Split: c.split, Partial: 1}); err != nil {
			t.Fatal(err)
		}
		if len(d.launches) != c.launches {
			t.Errorf("split %d: launched %v", c.split, d.launches)
		}
	}
}

func TestChooseSplit(t *testing.T) {
	for _, c := range []struct {
		rows, maxPos, kvHeads, sms, want int
	}{
		{64, 1023, 4, 132, 224}, // 256 blocks for 1,056 wanted: 5 splits of 205, rounded to 224
		{64, 1023, 32, 132, 0},  // 2,048 blocks already
		{1, 100, 4, 132, 0},     // short context
		{1, 4095, 1, 10, 64},    // 80 splits of 52, rounded to 64
	} {
		st := Step{Rows: c.rows, MaxPos: c.maxPos}
		got := ChooseSplit(st, c.kvHeads, c.sms)
		if got != c.want {
			t.Errorf("%+v: split %d, want %d", c, got, c.want)
		}
		if got > 0 && Splits(st, got)*st.Rows*c.kvHeads < 8*c.sms*3/4 {
			t.Errorf("%+v: split %d gives only %d blocks", c, got, Splits(st, got)*st.Rows*c.kvHeads)
		}
	}
}
