package launch

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/prefixd/prefixd/blockstore"
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
// another. MaxPos is the largest RowPos, which sizes the attention grid;
// KVWork is the positions attention reads over all rows (the sum of
// RowPos+1), which sizes its splits (ChooseSplit; 0 counts every row at
// MaxPos). Tiles (int32 [NTiles][2]: first row, rows) cuts each
// sequence's rows into query tiles of at most PrefillTile for the prefill
// kernel; a Step without them (NTiles 0) never runs it.
type Step struct {
	Rows          int
	RowPos, RowBT Ptr
	BT            Ptr
	MaxPos        int
	KVWork        int
	Tiles         Ptr
	NTiles        int
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
// float32 from k and v (row stride ld floats each: two buffers, or two
// column ranges of one fused QKV product), written in the element type at
// the row's position through its block table.
func AppendKV(d Device, kv Ptr, lay KVLayout, layer int, k, v Ptr, ld int, st Step) error {
	if err := errors.Join(lay.layerOK(layer), st.check()); err != nil {
		return err
	}
	kd := lay.KVDim()
	if kd > ld {
		return fmt.Errorf("%w: K and V of %d floats in rows of %d", ErrShape, kd, ld)
	}
	return d.Launch("kv_append", row(st.Rows), threads(rowThreads),
		P(kv), L(lay.BlockElems()), L(lay.LayerOffset(layer)), P(k), P(v), I(ld),
		P(st.RowPos), P(st.RowBT), P(st.BT), I(lay.BlockSize), I(kd))
}

// CopyBlocks performs n copies described by copies (int32 [n][3]: source
// block, destination block, slots) in one launch. The caller has checked
// each block is in the pool, slots ≤ BlockSize, and that no block is both
// a source and a destination.
func CopyBlocks(d Device, kv Ptr, lay KVLayout, copies Ptr, n int) error {
	if err := errors.Join(lay.Check(), positive("copies", n)); err != nil {
		return err
	}
	return d.Launch("copy_blocks", Dim3{n, 2 * lay.Layers, 1}, threads(rowThreads),
		P(kv), P(copies), I(lay.Layers), I(lay.BlockSize), I(lay.KVDim()))
}

// Errors of a K/V pool (Copier, and the pools of kernels/cuda and
// kernels/cuda/emu), wrapped with detail; test with errors.Is.
var (
	// ErrBlockRange means a block ID is outside the pool.
	ErrBlockRange = errors.New("launch: block ID out of range")
	// ErrSlotRange means a copy asked for more slots than a block has.
	ErrSlotRange = errors.New("launch: slot count out of range")
	// ErrCopyOverlap means one batch of copies names a block as a
	// destination twice, or as both a source and a destination: the copies
	// run in parallel, so their order would be undefined.
	ErrCopyOverlap = errors.New("launch: copies overlap")
	// ErrBufferSize means a ReadBlock or WriteBlock buffer is not one
	// block long.
	ErrBufferSize = errors.New("launch: block buffer has the wrong size")
)

// BlockOK returns an error wrapping ErrBlockRange unless id is a block of
// the pool.
func (l KVLayout) BlockOK(id blockstore.BlockID) error {
	if id < 0 || int(id) >= l.NumBlocks {
		return fmt.Errorf("%w: block %d, pool of %d", ErrBlockRange, id, l.NumBlocks)
	}
	return nil
}

// Memory is a Device that holds buffers: what a K/V pool lives in.
type Memory interface {
	Device
	// Alloc returns n bytes of device memory.
	Alloc(n int) (Ptr, error)
	// Free releases an allocation.
	Free(p Ptr) error
	// Write copies b to device address p.
	Write(p Ptr, b []byte) error
	// Read copies len(b) bytes from device address p into b.
	Read(b []byte, p Ptr) error
}

// Copier performs a K/V pool's block copies (blockstore.Storage's
// CopyBlocks): it checks a batch, uploads its descriptors to a device
// buffer it keeps and grows, and launches CopyBlocks once. The zero value
// is ready; it is not safe for concurrent use.
type Copier struct {
	desc []int32
	raw  []byte
	dsts map[blockstore.BlockID]bool
	buf  Ptr
	cap  int // copies buf holds
}

// Copy checks copies against the pool at kv and performs them in one
// launch; a refused batch changes nothing.
func (c *Copier) Copy(m Memory, kv Ptr, lay KVLayout, copies []blockstore.BlockCopy) error {
	if len(copies) == 0 {
		return nil
	}
	if c.dsts == nil {
		c.dsts = map[blockstore.BlockID]bool{}
	}
	var err error
	if c.desc, err = packCopies(lay, copies, c.desc, c.dsts); err != nil {
		return err
	}
	if len(copies) > c.cap {
		if err := c.Free(m); err != nil {
			return err
		}
		if c.buf, err = m.Alloc(12 * len(copies)); err != nil {
			return err
		}
		c.cap = len(copies)
	}
	c.raw = c.raw[:0]
	for _, v := range c.desc {
		c.raw = binary.LittleEndian.AppendUint32(c.raw, uint32(v))
	}
	if err := m.Write(c.buf, c.raw); err != nil {
		return err
	}
	return CopyBlocks(m, kv, lay, c.buf, len(copies))
}

// Free releases the descriptor buffer.
func (c *Copier) Free(m Memory) error {
	if c.cap == 0 {
		return nil
	}
	c.cap = 0
	return m.Free(c.buf)
}

// packCopies checks copies against the pool and appends them to dst[:0]
// as CopyBlocks' descriptors (source, destination, slots). dsts is
// scratch, cleared first.
func packCopies(lay KVLayout, copies []blockstore.BlockCopy, dst []int32, dsts map[blockstore.BlockID]bool) ([]int32, error) {
	clear(dsts)
	dst = dst[:0]
	for _, c := range copies {
		if err := errors.Join(lay.BlockOK(c.Src), lay.BlockOK(c.Dst)); err != nil {
			return dst, err
		}
		if c.Slots < 0 || c.Slots > lay.BlockSize {
			return dst, fmt.Errorf("%w: copy of %d slots, block size %d", ErrSlotRange, c.Slots, lay.BlockSize)
		}
		if dsts[c.Dst] {
			return dst, fmt.Errorf("%w: block %d is a destination twice", ErrCopyOverlap, c.Dst)
		}
		dsts[c.Dst] = true
		dst = append(dst, int32(c.Src), int32(c.Dst), int32(c.Slots))
	}
	for _, c := range copies {
		if dsts[c.Src] {
			return dst, fmt.Errorf("%w: block %d is a source and a destination", ErrCopyOverlap, c.Src)
		}
	}
	return dst, nil
}
