package blockstore

import (
	"fmt"
	"slices"
)

// Table is one sequence's block table: logical block i of the sequence lives
// in physical block Blocks()[i], and token position pos in slot pos%B of
// logical block pos/B. A Table holds one reference to each of its blocks.
//
// A paged table allocates a block when a write first needs it. A contiguous
// table (see Reserve) allocates up front and never grows past its
// reservation; it is kept as the baseline that benchmarks compare against.
type Table struct {
	pool     *Pool
	blocks   []BlockID
	n        int  // token slots written
	reserved bool // contiguous: blocks were reserved up front
}

// NewTable returns an empty paged table drawing on p.
func (p *Pool) NewTable() *Table { return &Table{pool: p} }

// Len is the number of token slots written.
func (t *Table) Len() int { return t.n }

// Blocks returns the physical blocks in logical order, reserved ones
// included. The slice aliases the table: callers must not modify it, and it
// is valid only until the table's next mutation.
func (t *Table) Blocks() []BlockID { return t.blocks }

// Reserved reports whether the table is contiguous (see Reserve).
func (t *Table) Reserved() bool { return t.reserved }

// Slot returns the physical block and the slot within it of position pos.
// REQUIRES: 0 <= pos < Len().
func (t *Table) Slot(pos int) (BlockID, int) {
	if pos < 0 || pos >= t.n {
		panic(fmt.Sprintf("blockstore: position %d outside table of %d", pos, t.n))
	}
	b := t.pool.blockSize
	return t.blocks[pos/b], pos % b
}

// Grow sizes the table's block list for blocks blocks in all, so appends up
// to that length do not reallocate it (as slices.Grow does); it allocates
// no blocks from the pool.
func (t *Table) Grow(blocks int) {
	t.blocks = slices.Grow(t.blocks, max(0, blocks-len(t.blocks)))
}

// Adopt appends whole blocks that already hold K/V, such as a cached prefix,
// taking a reference to each. The table must end at a block boundary and be
// paged.
func (t *Table) Adopt(blocks []BlockID) error {
	b := t.pool.blockSize
	if t.reserved || t.n != len(t.blocks)*b {
		return fmt.Errorf("blockstore: Adopt needs a paged table ending on a block boundary (len %d, %d blocks)", t.n, len(t.blocks))
	}
	for _, id := range blocks {
		t.pool.Retain(id)
	}
	t.blocks = append(t.blocks, blocks...)
	t.n += len(blocks) * b
	return nil
}

// Reserve makes the table contiguous: it allocates now every block needed to
// hold tokens slots, all or nothing, and later writes past that reservation
// fail with ErrTableFull.
func (t *Table) Reserve(tokens int) error {
	b := t.pool.blockSize
	need := BlocksFor(tokens, b) - len(t.blocks)
	if need > 0 {
		var err error
		if t.blocks, err = t.pool.AllocN(t.blocks, need); err != nil {
			return err
		}
	}
	t.reserved = true
	return nil
}

// BlocksNeeded returns how many free blocks Append(k) would take: new
// blocks past the end plus copies of shared blocks the write falls in.
func (t *Table) BlocksNeeded(k int) int {
	if k <= 0 {
		return 0
	}
	p, b := t.pool, t.pool.blockSize
	first, last := t.n/b, (t.n+k-1)/b
	need := max(0, last+1-len(t.blocks))
	for i := first; i <= last && i < len(t.blocks); i++ {
		if p.refs[t.blocks[i]] > 1 {
			need++
		}
	}
	return need
}

// Append makes room for k more token slots and returns nil, or changes
// nothing and returns ErrPoolExhausted or ErrTableFull. Every block the new
// slots fall in becomes private to this table: a block that is shared (with
// another table or the prefix cache) is first copied, slots written so far
// only, into a fresh block. If the Storage fails a copy, Append returns its
// error with the length unchanged; blocks it already made private stay so
// (the table holds the same K/V either way).
func (t *Table) Append(k int) error {
	if k < 0 {
		return fmt.Errorf("blockstore: Append of %d slots", k)
	}
	if k == 0 {
		return nil
	}
	p, b := t.pool, t.pool.blockSize
	newN := t.n + k
	first, last := t.n/b, (newN-1)/b
	grow := last + 1 - len(t.blocks)
	if grow > 0 && t.reserved {
		return ErrTableFull
	}
	if t.BlocksNeeded(k) > len(p.free) {
		return ErrPoolExhausted
	}
	for i := first; i <= last && i < len(t.blocks); i++ {
		if p.refs[t.blocks[i]] > 1 {
			if err := t.copyOnWrite(i); err != nil {
				return err
			}
		}
	}
	if grow > 0 {
		t.blocks, _ = p.AllocN(t.blocks, grow)
	}
	for i := first; i <= last; i++ {
		p.noteFill(t.blocks[i], min(b, newN-i*b))
	}
	t.n = newN
	return nil
}

// copyOnWrite replaces shared logical block i with a private copy of the
// slots this table has written in it.
func (t *Table) copyOnWrite(i int) error {
	p := t.pool
	old := t.blocks[i]
	fresh, err := p.Alloc()
	if err != nil {
		return err
	}
	slots := min(p.blockSize, max(0, t.n-i*p.blockSize))
	if slots > 0 && p.storage != nil {
		p.copyBuf[0] = BlockCopy{Src: old, Dst: fresh, Slots: slots}
		if err := p.storage.CopyBlocks(p.copyBuf[:]); err != nil {
			p.Release(fresh)
			return fmt.Errorf("blockstore: copy-on-write of block %d: %w", old, err)
		}
	}
	p.noteFill(fresh, slots)
	p.Release(old)
	t.blocks[i] = fresh
	return nil
}

// Replace makes full logical block i refer to block id, which must hold
// the same K/V (the prefix cache's copy of a block this table computed
// again, say): the table takes a reference to id and drops its reference
// to the block it held there, which is freed if nothing else holds it.
// REQUIRES: block i is full (Len() >= (i+1)*BlockSize) and id is referenced.
func (t *Table) Replace(i int, id BlockID) {
	p := t.pool
	if i < 0 || (i+1)*p.blockSize > t.n {
		panic(fmt.Sprintf("blockstore: Replace of block %d of a table of %d slots", i, t.n))
	}
	if old := t.blocks[i]; old != id {
		p.Retain(id)
		p.Release(old)
		t.blocks[i] = id
	}
}

// Truncate shortens the table to n token slots. A paged table releases the
// blocks it no longer needs; a contiguous one keeps its reservation.
// REQUIRES: 0 <= n <= Len().
func (t *Table) Truncate(n int) {
	if n < 0 || n > t.n {
		panic(fmt.Sprintf("blockstore: Truncate to %d of a table of %d", n, t.n))
	}
	p, b := t.pool, t.pool.blockSize
	keep := len(t.blocks)
	if !t.reserved {
		keep = BlocksFor(n, b)
		for _, id := range t.blocks[keep:] {
			p.Release(id)
		}
		t.blocks = t.blocks[:keep]
	}
	for i := n / b; i < keep; i++ {
		if id := t.blocks[i]; p.refs[id] == 1 {
			p.shrinkFill(id, max(0, n-i*b))
		}
	}
	t.n = n
}

// Fork returns a new table sharing every block of t, one more reference
// each. Nothing is copied until one of the two writes into a shared block.
func (t *Table) Fork() *Table {
	c := &Table{
		pool:     t.pool,
		blocks:   make([]BlockID, len(t.blocks), cap(t.blocks)),
		n:        t.n,
		reserved: t.reserved,
	}
	copy(c.blocks, t.blocks)
	for _, id := range c.blocks {
		t.pool.Retain(id)
	}
	return c
}

// Release drops the table's reference to every block and empties it; the
// table may be reused as a new paged table.
func (t *Table) Release() {
	for _, id := range t.blocks {
		t.pool.Release(id)
	}
	t.blocks = t.blocks[:0]
	t.n = 0
	t.reserved = false
}

// Check verifies the table against its pool: enough blocks for its length
// (exactly enough when paged), each referenced, each filled at least as far
// as this table has written.
func (t *Table) Check() error {
	p, b := t.pool, t.pool.blockSize
	if t.n < 0 || t.n > len(t.blocks)*b {
		return fmt.Errorf("table of %d slots has %d blocks", t.n, len(t.blocks))
	}
	if !t.reserved && len(t.blocks) != BlocksFor(t.n, b) {
		return fmt.Errorf("paged table of %d slots has %d blocks", t.n, len(t.blocks))
	}
	for i, id := range t.blocks {
		if id < 0 || int(id) >= len(p.refs) {
			return fmt.Errorf("logical block %d maps to out-of-range block %d", i, id)
		}
		if p.refs[id] < 1 {
			return fmt.Errorf("logical block %d maps to free block %d", i, id)
		}
		if w := min(b, max(0, t.n-i*b)); int(p.fill[id]) < w {
			return fmt.Errorf("block %d has fill %d but the table wrote %d slots", id, p.fill[id], w)
		}
	}
	return nil
}
