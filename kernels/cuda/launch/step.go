package launch

import (
	"fmt"

	"github.com/prefixd/prefixd/blockstore"
)

// PrefillTile is the most tokens of one sequence in a query tile of the
// prefill attention kernel (attn_prefill): StepBuilder cuts each
// sequence's rows into tiles of this many.
const PrefillTile = 64

// StepBuilder gathers a step's rows on the host into the arrays Step
// names, packed in one int32 slice so that a step costs one upload. The
// zero value is ready; Reset reuses its memory for the next step.
type StepBuilder struct {
	rowPos, rowBT, bt, tiles []int32
	packed                   []int32
	maxPos, work             int
}

// Reset empties the builder.
func (b *StepBuilder) Reset() {
	b.rowPos, b.rowBT, b.bt, b.tiles, b.maxPos, b.work = b.rowPos[:0], b.rowBT[:0], b.bt[:0], b.tiles[:0], 0, 0
}

// Add appends a sequence's rows: rows query tokens at positions start,
// start+1, ..., whose K/V live in the blocks of table (logical order).
// The table must cover every position up to start+rows-1.
func (b *StepBuilder) Add(table []blockstore.BlockID, blockSize, start, rows int) error {
	if start < 0 || rows <= 0 || blockSize <= 0 || len(table)*blockSize < start+rows || start+rows > 1<<30 {
		return fmt.Errorf("%w: %d rows from position %d over %d blocks of %d", ErrShape, rows, start, len(table), blockSize)
	}
	off, first := int32(len(b.bt)), len(b.rowPos)
	for t := 0; t < rows; t += PrefillTile {
		b.tiles = append(b.tiles, int32(first+t), int32(min(PrefillTile, rows-t)))
	}
	for _, id := range table[:(start+rows+blockSize-1)/blockSize] {
		b.bt = append(b.bt, int32(id))
	}
	for r := range rows {
		b.rowPos = append(b.rowPos, int32(start+r))
		b.rowBT = append(b.rowBT, off)
		b.work += start + r + 1
	}
	b.maxPos = max(b.maxPos, start+rows-1)
	return nil
}

// Rows returns the rows added since Reset.
func (b *StepBuilder) Rows() int { return len(b.rowPos) }

// Packed returns RowPos, RowBT, Tiles and BT one after another: the bytes
// to upload (4 bytes each, little-endian). The slice is reused by the next
// call. The block tables, the one array whose length changes as contexts
// grow, come last, so that the others' addresses depend only on the rows
// and tiles: consecutive decode steps then launch with the same
// parameters, and a graph captured from one replays the next.
func (b *StepBuilder) Packed() []int32 {
	b.packed = append(append(append(append(b.packed[:0], b.rowPos...), b.rowBT...), b.tiles...), b.bt...)
	return b.packed
}

// Step returns the Step for Packed's contents uploaded at base.
func (b *StepBuilder) Step(base Ptr) Step {
	n := Ptr(4 * len(b.rowPos))
	tiles := base + 2*n
	return Step{Rows: len(b.rowPos), RowPos: base, RowBT: base + n, Tiles: tiles, NTiles: len(b.tiles) / 2,
		BT: tiles + Ptr(4*len(b.tiles)), MaxPos: b.maxPos, KVWork: b.work}
}
