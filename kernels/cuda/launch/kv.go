package launch

import (
	"errors"
	"fmt"
)

// KVLayout sizes the K/V pool: one allocation of the device's element
// type, laid out [block][layer][K,V][slot][kvHead][headDim], so a block is
// contiguous (BlockElems elements) and so is a layer's K or V of it.
type KVLayout struct {
	Layers, KVHeads, HeadDim, BlockSize, NumBlocks int
}

// KVDim is the elements of one token's K (or V) in one layer.
func (l KVLayout) KVDim() int { return l.KVHeads * l.HeadDim }

// BlockElems is the elements of one block: K and V of every layer.
func (l KVLayout) BlockElems() int64 {
	return int64(l.Layers) * 2 * int64(l.BlockSize) * int64(l.KVDim())
}

// LayerOffset is the offset of layer's K within a block.
func (l KVLayout) LayerOffset(layer int) int64 {
	return int64(layer) * 2 * int64(l.BlockSize) * int64(l.KVDim())
}

// Check returns an error wrapping ErrShape if a size is not positive.
func (l KVLayout) Check() error {
	return errors.Join(positive("layers", l.Layers), positive("KV heads", l.KVHeads), positive("head dim", l.HeadDim),
		positive("block size", l.BlockSize), positive("blocks", l.NumBlocks))
}

func (l KVLayout) layerOK(layer int) error {
	if err := l.Check(); err != nil {
		return err
	}
	if layer < 0 || layer >= l.Layers {
		return fmt.Errorf("%w: layer %d of %d", ErrShape, layer, l.Layers)
	}
	return nil
}

// Step is one batch's rows as the attention kernels read them, uploaded
// once per step and shared by every layer: RowPos (int32 [Rows]) is each
// row's position in its sequence, RowBT (int32 [Rows]) the offset in BT of
// its sequence's block table, BT (int32) every block table one after
// another. MaxPos is the largest RowPos, which sizes the attention grid.
type Step struct {
	Rows          int
	RowPos, RowBT Ptr
	BT            Ptr
	MaxPos        int
}

func (s Step) check() error {
	if err := rowsOK(s.Rows); err != nil {
		return err
	}
	if s.MaxPos < 0 || s.MaxPos >= 1<<30 {
		return fmt.Errorf("%w: max position %d", ErrShape, s.MaxPos)
	}
	return nil
}

// AppendKV stores each row's K and V of layer in its slot: read as
// float32 from qkv (row stride ld floats, K at column kOff, V at vOff),
// written in the element type at the row's position through its block
// table.
func AppendKV(d Device, kv Ptr, lay KVLayout, layer int, qkv Ptr, ld, kOff, vOff int, st Step) error {
	if err := errors.Join(lay.layerOK(layer), st.check()); err != nil {
		return err
	}
	kd := lay.KVDim()
	if kOff < 0 || vOff < 0 || kOff+kd > ld || vOff+kd > ld {
		return fmt.Errorf("%w: K at %d and V at %d of %d floats in rows of %d", ErrShape, kOff, vOff, kd, ld)
	}
	return d.Launch("kv_append", row(st.Rows), threads(rowThreads),
		P(kv), L(lay.BlockElems()), L(lay.LayerOffset(layer)), P(qkv), I(ld), I(kOff), I(vOff),
		P(st.RowPos), P(st.RowBT), P(st.BT), I(lay.BlockSize), I(kd))
}

// CopyBlocks performs n copies described by copies (int32 [n][3]: source
// block, destination block, slots) in one launch. The caller has checked
// each block is in the pool, slots ≤ BlockSize, and that no block is both
// a source and a destination.
func CopyBlocks(d Device, kv Ptr, lay KVLayout, copies Ptr, n int) error {
	if err := errors.Join(lay.Check(), rowsOK(n)); err != nil {
		return err
	}
	return d.Launch("copy_blocks", Dim3{n, 2 * lay.Layers, 1}, threads(rowThreads),
		P(kv), P(copies), I(lay.Layers), I(lay.BlockSize), I(lay.KVDim()))
}
