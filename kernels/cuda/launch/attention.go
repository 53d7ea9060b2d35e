package launch

import (
	"errors"
	"fmt"
)

// MaxHeadDim is the largest head size the attention kernel takes.
const MaxHeadDim = 256

// maxGroup is the most query heads per KV head: one warp each in a
// thread block of at most 1,024 threads. Groups of more than
// narrowGroup run attn_wide, whose launch bound (1,024 threads) caps its
// registers; smaller ones run attn, bounded at 512 threads.
const (
	maxGroup    = 32
	narrowGroup = 16
)

// Attn describes one layer's attention call over a step.
type Attn struct {
	Q       Ptr // float32 queries: row r's head h at Q + (r·LDQ + h·HeadDim)·4
	LDQ     int // row stride of Q in floats
	Out     Ptr // element type [rows][NHeads][HeadDim]: the output projection's input
	NHeads  int // query heads; NHeads/KVHeads share a KV head (GQA)
	Layer   int
	Split   int // positions per split; 0 puts each row's context in one split
	Partial Ptr // float32 workspace of AttnWorkspace floats when Split divides some context
}

// Splits returns how many splits of split positions the longest row of
// st needs (1 when split is 0).
func Splits(st Step, split int) int {
	if split <= 0 {
		return 1
	}
	return st.MaxPos/split + 1
}

// AttnWorkspace returns the float32s a.Partial must hold for step st
// (0 when every row's context fits one split).
func AttnWorkspace(st Step, lay KVLayout, nHeads, split int) int {
	ns := Splits(st, split)
	if ns == 1 {
		return 0
	}
	return st.Rows * nHeads * ns * (lay.HeadDim + 2)
}

// Attention computes causal paged attention for every row of st in layer
// a.Layer, after AppendKV has stored the step's K/V: row r attends to
// positions 0..RowPos[r] of its sequence (its cached prefix and the new
// tokens up to itself), scaled by 1/sqrt(HeadDim), query head h using KV
// head h/(NHeads/KVHeads). One thread block handles one (split, KV head,
// row), a warp per query head of the group (attn, or attn_wide for groups
// of more than 16); with several splits
// (decode of long contexts: more blocks in flight) a second kernel merges
// them.
func Attention(d Device, kv Ptr, lay KVLayout, st Step, a Attn) error {
	if err := errors.Join(lay.layerOK(a.Layer), st.check(), positive("query heads", a.NHeads)); err != nil {
		return err
	}
	hd := lay.HeadDim
	if a.NHeads%lay.KVHeads != 0 || a.NHeads/lay.KVHeads > maxGroup || hd > MaxHeadDim || a.NHeads*hd > a.LDQ {
		return fmt.Errorf("%w: %d query heads over %d KV heads of %d in rows of %d (at most %d per KV head, head dim ≤ %d)",
			ErrShape, a.NHeads, lay.KVHeads, hd, a.LDQ, maxGroup, MaxHeadDim)
	}
	split := a.Split
	if split <= 0 {
		split = st.MaxPos + 1
	}
	ns := Splits(st, a.Split)
	if ns > 1 && a.Partial == 0 {
		return fmt.Errorf("%w: %d splits and no workspace", ErrShape, ns)
	}
	group, kernel := a.NHeads/lay.KVHeads, "attn"
	if group > narrowGroup {
		kernel = "attn_wide"
	}
	err := d.Launch(kernel, Dim3{ns, lay.KVHeads, st.Rows}, threads(32*group),
		P(a.Out), P(a.Partial), P(a.Q), I(a.LDQ), P(kv), L(lay.BlockElems()), L(lay.LayerOffset(a.Layer)),
		P(st.RowPos), P(st.RowBT), P(st.BT), I(lay.BlockSize), I(a.NHeads), I(lay.KVHeads), I(hd), I(split))
	if err != nil || ns == 1 {
		return err
	}
	return d.Launch("attn_combine", Dim3{a.NHeads, st.Rows, 1}, threads(min(MaxHeadDim, (hd+31)/32*32)),
		P(a.Out), P(a.Partial), P(st.RowPos), I(a.NHeads), I(hd), I(split), I(ns))
}

// ChooseSplit returns Attn.Split for a step on a GPU of sms
// multiprocessors: enough splits that about eight thread blocks per
// multiprocessor are in flight (a batch of long decodes otherwise leaves
// most of the GPU idle), or 0 when the rows and KV heads alone are enough
// or the contexts are short.
func ChooseSplit(st Step, kvHeads, sms int) int {
	blocks, want := st.Rows*kvHeads, 8*sms
	if blocks >= want || st.MaxPos < 128 {
		return 0
	}
	splits := (want + blocks - 1) / blocks
	split := (st.MaxPos + splits) / splits // ceil((MaxPos+1)/splits)
	return (split + 31) / 32 * 32
}
