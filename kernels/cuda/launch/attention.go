package launch

import (
	"errors"
	"fmt"
	"strings"
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
	// decodeThreads is attn_decode's block: four warps share each page.
	decodeThreads = 128
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
	// Counts is, with Partial, an int32 [Rows][KVHeads] (AttnCounts) of
	// zeros, each the splits of a row over a KV head that have finished:
	// the last to finish merges them, and sets the count back to zero for
	// the next launch.
	Counts Ptr
	// Warp forces attn (or attn_wide), a warp per query head, where
	// AttentionKernel would pick attn_decode: for benchmarks comparing
	// the two.
	Warp bool
	// Prefill forces attn_prefill where its shape fits (head size 64 or
	// 128, a step with Tiles) whatever the rows per tile, on an f32 pool
	// too, whose K/V and queries it rounds to bf16: for tests and
	// benchmarks.
	Prefill bool
	// TensorCores forces attn_decode_tc, attn_decode on tensor cores,
	// where its shape fits (TensorCoreDecode), on an f32 pool too, whose
	// K/V and queries it rounds to bf16: for tests and for benchmarks
	// comparing it with attn_decode until a GPU has shown which is faster.
	TensorCores bool
}

// The shapes attn_decode takes (decode.cu): a page size it is compiled
// for, a head whose row is whole 16-byte loads, the group's queries in
// its shared memory, and splits that start on a tile of positions.
const (
	decodeTile       = 32
	decodeMaxHeadDim = 128
	decodeMaxQ       = 2048
)

// The shapes attn_prefill takes (prefill.cu): 16-bit elements (the
// tensor cores' inputs), a head size it is compiled for, and a step whose
// query tiles average at least prefillMinRows tokens (a step of mostly
// decode rows is better served by the decode kernels' splits);
// prefillRows is its packed (token, query head) rows per thread block.
const (
	prefillThreads = 128
	prefillRows    = 64
	prefillMinRows = 16
)

// The shapes attn_decode_tc takes (decode_tc.cu): attn_decode's pages and
// splits, heads of 64 or 128 and groups of up to 16 (the MMA's 16 rows).
const decodeTCMaxGroup = 16

// TensorCoreDecode reports whether attn_decode_tc takes nHeads query heads
// over lay with split. Attention launches it only when Attn.TensorCores
// asks; it is built for 16-bit pools, and on an f32 pool (for tests) it
// rounds K/V and queries to bf16 as attn_prefill does.
func TensorCoreDecode(lay KVLayout, nHeads, split int) bool {
	bs, hd := lay.BlockSize, lay.HeadDim
	return (hd == 64 || hd == 128) && nHeads/lay.KVHeads <= decodeTCMaxGroup && (bs == 8 || bs == 16 || bs == 32) &&
		split%decodeTile == 0
}

// AttentionKernel returns the kernel Attention launches for nHeads query
// heads over lay for step st with split (0: one split per row), on
// elements of elemSize bytes:
//   - attn_prefillHD, FlashAttention-2 on tensor cores over query tiles of
//     one sequence, where elements are 16-bit, the head size HD is 64 or
//     128 and st's query tiles (Step.Tiles) average at least 16 rows;
//   - else attn_decodeBS, a block per (split, KV head, row) holding the
//     whole group, its K/V tiles copied into shared memory by cp.async,
//     the next tile in flight while it computes one, where the
//     page size BS is 8, 16 or 32, a head row is a multiple of 16 bytes
//     (and at most 128 elements), the group's queries fit (group · headDim
//     ≤ 2,048) and split is a multiple of 32;
//   - else attn, a warp per query head, or attn_wide for groups of more
//     than 16.
func AttentionKernel(lay KVLayout, st Step, nHeads, split, elemSize int) string {
	group, hd := nHeads/lay.KVHeads, lay.HeadDim
	if elemSize == 2 && (hd == 64 || hd == 128) && st.NTiles > 0 && st.Rows >= prefillMinRows*st.NTiles {
		return prefillKernels[hd]
	}
	switch bs := lay.BlockSize; {
	case bs != 8 && bs != 16 && bs != 32, hd > decodeMaxHeadDim, hd*elemSize%16 != 0, group*hd > decodeMaxQ,
		split%decodeTile != 0:
	default:
		return decodeKernels[bs]
	}
	return warpKernel(group)
}

// prefillKernels and decodeKernels name attn_prefill's kernels by head
// size and attn_decode's by page size: a launch formats no name.
var (
	prefillKernels  = map[int]string{64: "attn_prefill64", 128: "attn_prefill128"}
	decodeKernels   = map[int]string{8: "attn_decode8", 16: "attn_decode16", 32: "attn_decode32"}
	decodeTCKernels = map[int]string{8: "attn_decode_tc8", 16: "attn_decode_tc16", 32: "attn_decode_tc32"}
)

// warpKernel is the kernel with a warp per query head for groups of
// group: attn, or attn_wide past 16.
func warpKernel(group int) string {
	if group > narrowGroup {
		return "attn_wide"
	}
	return "attn"
}

// wholeRow is the split parameter of a launch with one split per row:
// above every position a Step allows (MaxPos < 1<<30), and with the
// split's start (0) still an int.
const wholeRow = 1 << 30

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

// AttnCounts returns the int32s a.Counts must hold for step st, zeroed
// before the first launch (0 when every row's context fits one split).
func AttnCounts(st Step, lay KVLayout, split int) int {
	if Splits(st, split) == 1 {
		return 0
	}
	return st.Rows * lay.KVHeads
}

// Attention computes causal paged attention for every row of st in layer
// a.Layer, after AppendKV has stored the step's K/V: row r attends to
// positions 0..RowPos[r] of its sequence (its cached prefix and the new
// tokens up to itself), scaled by 1/sqrt(HeadDim), query head h using KV
// head h/(NHeads/KVHeads). One thread block handles one (split, KV head,
// row): attn_decode, which loads whole pages into shared memory for the
// whole group, where AttentionKernel allows it, else a warp per query
// head of the group (attn, or attn_wide for groups of more than 16), or
// attn_decode_tc, attn_decode's variant on tensor cores, where a.TensorCores
// asks for it; with
// several splits (decode of long contexts: more blocks in flight) the
// last split of a row over a KV head to finish merges them, in the same
// launch (FlashInfer's design; a.Counts counts them). A step of prefill rows runs attn_prefill
// instead, a block per (query tile, KV head, 64 packed query rows), which
// ignores a.Split.
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
		// One split covers every row: any split past the longest row
		// does, and one that does not follow MaxPos keeps the launch's
		// parameters the same from one decode step to the next.
		split = wholeRow
	}
	ns := Splits(st, a.Split)
	if ns > 1 && (a.Partial == 0 || a.Counts == 0) {
		return fmt.Errorf("%w: %d splits and no workspace or counts", ErrShape, ns)
	}
	group, kernel := a.NHeads/lay.KVHeads, AttentionKernel(lay, st, a.NHeads, a.Split, d.DType().Size())
	switch {
	case a.Warp:
		kernel = warpKernel(group)
	case a.Prefill && (hd == 64 || hd == 128) && st.NTiles > 0:
		kernel = prefillKernels[hd]
	case a.TensorCores && TensorCoreDecode(lay, a.NHeads, a.Split):
		kernel = decodeTCKernels[lay.BlockSize]
	}
	if kernel != "attn" && kernel != "attn_wide" && kv%16 != 0 {
		return fmt.Errorf("%w: K/V pool at %#x, not on a 16-byte boundary (%s loads 16 bytes at a time)", ErrShape, uint64(kv), kernel)
	}
	if strings.HasPrefix(kernel, "attn_prefill") {
		// A tile's PrefillTile tokens × group heads, in chunks of
		// prefillRows packed rows.
		chunks := (PrefillTile*group + prefillRows - 1) / prefillRows
		return d.Launch(kernel, Dim3{st.NTiles, lay.KVHeads, chunks}, threads(prefillThreads), P(a.Out), P(a.Q), I(a.LDQ), P(kv),
			L(lay.BlockElems()), L(lay.LayerOffset(a.Layer)), P(st.RowPos), P(st.RowBT), P(st.BT), P(st.Tiles),
			I(lay.BlockSize), I(a.NHeads), I(lay.KVHeads))
	}
	// The parameters attn, attn_wide and attn_decode share, then theirs,
	// in one array: one allocation a launch (Launch's parameters escape).
	var params [16]uint64
	args := append(params[:0], P(a.Out), P(a.Partial), P(a.Counts), P(a.Q), I(a.LDQ), P(kv),
		L(lay.BlockElems()), L(lay.LayerOffset(a.Layer)), P(st.RowPos), P(st.RowBT), P(st.BT))
	block := threads(decodeThreads)
	if !strings.HasPrefix(kernel, "attn_decode") {
		args, block = append(args, I(lay.BlockSize)), threads(32*group)
	}
	grid := Dim3{ns, lay.KVHeads, st.Rows}
	return d.Launch(kernel, grid, block, append(args, I(a.NHeads), I(lay.KVHeads), I(hd), I(split))...)
}

// ChooseSplit returns Attn.Split for a step on a GPU of sms
// multiprocessors, sized by the step's total K/V work (FlashInfer's
// rule): the positions all rows read, times the KV heads, spread over
// about eight thread blocks per multiprocessor, rounded up to a multiple
// of 32 (attn_decode's tile). A long row then gets many splits and a
// short one few, where a split sized by the longest row alone leaves a
// batch of mostly short rows with too few blocks. It returns 0 (one split
// per row) when the rows and KV heads alone fill the GPU, the contexts
// are short, or the split would cover the longest row.
func ChooseSplit(st Step, kvHeads, sms int) int {
	blocks, want := st.Rows*kvHeads, 8*sms
	if blocks >= want || st.MaxPos < 128 {
		return 0
	}
	work := st.KVWork
	if work == 0 {
		work = st.Rows * (st.MaxPos + 1)
	}
	split := (work*kvHeads + want - 1) / want
	split = (split + decodeTile - 1) / decodeTile * decodeTile
	if split > st.MaxPos {
		return 0
	}
	return split
}
