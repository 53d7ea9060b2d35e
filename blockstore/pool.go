package blockstore

import (
	"errors"
	"fmt"
)

// BlockID names a physical block in a Pool: an index in [0, NumBlocks).
type BlockID int32

// DefaultBlockSize is the number of token slots per block when
// Config.BlockSize is zero.
const DefaultBlockSize = 16

// BlocksFor returns how many blocks of blockSize token slots hold tokens
// slots: the ceiling of tokens / blockSize.
// REQUIRES: tokens >= 0 and blockSize > 0.
func BlocksFor(tokens, blockSize int) int { return (tokens + blockSize - 1) / blockSize }

var (
	// ErrPoolExhausted means the pool has fewer free blocks than asked for.
	// Nothing was allocated; the caller may evict or preempt and retry.
	ErrPoolExhausted = errors.New("blockstore: pool exhausted")
	// ErrTableFull means a write went past a contiguous table's reservation.
	ErrTableFull = errors.New("blockstore: write past the table's reservation")
)

// Config configures a Pool.
type Config struct {
	// NumBlocks is the number of physical blocks in the pool. Required.
	NumBlocks int
	// BlockSize is the number of token slots per block; 0 means
	// DefaultBlockSize.
	BlockSize int
	// Storage holds the blocks' K/V bytes and performs copy-on-write copies.
	// Nil means the pool keeps accounting only (schedulers without a model).
	Storage Storage
}

// Pool is a fixed set of physical KV blocks with reference counts and a free
// list. Allocation and release are O(1). A Pool is not safe for concurrent
// use.
type Pool struct {
	blockSize int
	storage   Storage

	refs   []int32   // table references + 1 if cached
	cached []bool    // whether the prefix cache holds a reference
	fill   []int32   // slots written so far, for memory-efficiency stats
	free   []BlockID // stack of blocks with refs == 0

	cachedOnly int // blocks whose one reference is the cache's
	usedSlots  int // sum of fill over referenced blocks

	copyBuf [1]BlockCopy // reused by copy-on-write so it never allocates
}

// New returns a Pool with every block free.
func New(cfg Config) (*Pool, error) {
	if cfg.NumBlocks <= 0 {
		return nil, fmt.Errorf("blockstore: Config.NumBlocks must be positive, got %d", cfg.NumBlocks)
	}
	if cfg.NumBlocks > 1<<31-1 {
		return nil, fmt.Errorf("blockstore: Config.NumBlocks %d does not fit a BlockID", cfg.NumBlocks)
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	if cfg.BlockSize < 0 {
		return nil, fmt.Errorf("blockstore: Config.BlockSize must be positive, got %d", cfg.BlockSize)
	}
	p := &Pool{
		blockSize: cfg.BlockSize,
		storage:   cfg.Storage,
		refs:      make([]int32, cfg.NumBlocks),
		cached:    make([]bool, cfg.NumBlocks),
		fill:      make([]int32, cfg.NumBlocks),
		free:      make([]BlockID, cfg.NumBlocks),
	}
	// Pop order is ascending IDs, which keeps tests and traces readable.
	for i := range p.free {
		p.free[i] = BlockID(cfg.NumBlocks - 1 - i)
	}
	return p, nil
}

// BlockSize is the number of token slots per block.
func (p *Pool) BlockSize() int { return p.blockSize }

// NumBlocks is the total number of physical blocks.
func (p *Pool) NumBlocks() int { return len(p.refs) }

// NumFree is the number of blocks on the free list.
func (p *Pool) NumFree() int { return len(p.free) }

// Storage returns the pool's Storage, or nil.
func (p *Pool) Storage() Storage { return p.storage }

// RefCount returns block id's reference count.
func (p *Pool) RefCount(id BlockID) int { return int(p.refs[id]) }

// Cached reports whether the prefix cache holds a reference to block id.
func (p *Pool) Cached(id BlockID) bool { return p.cached[id] }

// Alloc takes one block off the free list with a reference count of one.
// The caller owns that reference and must Release it.
func (p *Pool) Alloc() (BlockID, error) {
	n := len(p.free)
	if n == 0 {
		return 0, ErrPoolExhausted
	}
	id := p.free[n-1]
	p.free = p.free[:n-1]
	p.refs[id] = 1
	return id, nil
}

// AllocN appends k newly allocated blocks to dst and returns it. It is all
// or nothing: with fewer than k blocks free it allocates none and returns
// ErrPoolExhausted. The caller owns one reference to each block.
func (p *Pool) AllocN(dst []BlockID, k int) ([]BlockID, error) {
	if k > len(p.free) {
		return dst, ErrPoolExhausted
	}
	for range k {
		id, _ := p.Alloc()
		dst = append(dst, id)
	}
	return dst, nil
}

// Retain adds a reference to block id.
// REQUIRES: id is referenced (Retain never resurrects a free block).
func (p *Pool) Retain(id BlockID) {
	if p.refs[id] <= 0 {
		panic(fmt.Sprintf("blockstore: Retain of free block %d", id))
	}
	if p.cached[id] && p.refs[id] == 1 {
		p.cachedOnly--
	}
	p.refs[id]++
}

// Release drops a reference to block id taken by Alloc, AllocN or Retain.
// The block returns to the free list when its count reaches zero.
// REQUIRES: the caller holds a reference that is not the cache's.
func (p *Pool) Release(id BlockID) {
	r := p.refs[id]
	if r <= 0 || (p.cached[id] && r == 1) {
		panic(fmt.Sprintf("blockstore: Release of block %d with no table reference (refs %d)", id, r))
	}
	p.drop(id)
}

// RetainCache records that the prefix cache holds block id.
// REQUIRES: id is referenced and not already cached.
func (p *Pool) RetainCache(id BlockID) {
	if p.cached[id] {
		panic(fmt.Sprintf("blockstore: block %d cached twice", id))
	}
	if p.refs[id] <= 0 {
		panic(fmt.Sprintf("blockstore: RetainCache of free block %d", id))
	}
	p.cached[id] = true
	p.refs[id]++
}

// ReleaseCache drops the prefix cache's reference to block id.
// REQUIRES: the cache holds block id.
func (p *Pool) ReleaseCache(id BlockID) {
	if !p.cached[id] {
		panic(fmt.Sprintf("blockstore: ReleaseCache of uncached block %d", id))
	}
	if p.refs[id] == 1 {
		p.cachedOnly--
	}
	p.cached[id] = false
	p.drop(id)
}

// drop removes one reference, keeping cachedOnly and the free list right.
func (p *Pool) drop(id BlockID) {
	p.refs[id]--
	switch r := p.refs[id]; {
	case r == 0:
		p.usedSlots -= int(p.fill[id])
		p.fill[id] = 0
		p.free = append(p.free, id)
	case r == 1 && p.cached[id]:
		p.cachedOnly++
	}
}

// WriteFull writes data, one whole block's K/V (from another memory tier),
// into block id through the pool's Storage and records every slot of it as
// holding K/V.
// REQUIRES: the pool has a Storage and the caller holds a reference to id.
func (p *Pool) WriteFull(id BlockID, data []byte) error {
	if err := p.storage.WriteBlock(id, data); err != nil {
		return err
	}
	p.noteFill(id, p.blockSize)
	return nil
}

// noteFill records that the first slots slots of block id hold K/V.
func (p *Pool) noteFill(id BlockID, slots int) {
	if f := int(p.fill[id]); slots > f {
		p.usedSlots += slots - f
		p.fill[id] = int32(slots)
	}
}

// shrinkFill lowers block id's fill after a truncation by its only holder.
func (p *Pool) shrinkFill(id BlockID, slots int) {
	if f := int(p.fill[id]); slots < f {
		p.usedSlots -= f - slots
		p.fill[id] = int32(slots)
	}
}

// Stats is a snapshot of the pool's occupancy.
type Stats struct {
	Total      int // physical blocks
	Free       int // blocks on the free list
	InUse      int // blocks held by at least one block table
	CachedOnly int // blocks held by the prefix cache alone (evictable)

	// SlotsAllocated is token slots in referenced blocks; SlotsUsed is those
	// holding K/V. SlotsUsed/SlotsAllocated is the KV memory efficiency.
	SlotsAllocated int
	SlotsUsed      int
}

// Stats returns the pool's occupancy in O(1).
func (p *Pool) Stats() Stats {
	total := len(p.refs)
	free := len(p.free)
	return Stats{
		Total:          total,
		Free:           free,
		InUse:          total - free - p.cachedOnly,
		CachedOnly:     p.cachedOnly,
		SlotsAllocated: (total - free) * p.blockSize,
		SlotsUsed:      p.usedSlots,
	}
}

// CheckRefs verifies that tables are every holder of the pool's blocks
// besides the prefix cache: each block's reference count is the number of
// times the tables hold it, plus one if the cache does. It is
// O(NumBlocks + the tables' blocks); engines call it in invariant builds.
func (p *Pool) CheckRefs(tables []*Table) error {
	refs := make([]int32, len(p.refs))
	for _, t := range tables {
		for _, id := range t.blocks {
			refs[id]++
		}
	}
	for id, n := range refs {
		if p.cached[id] {
			n++
		}
		if n != p.refs[id] {
			return fmt.Errorf("block %d has %d references; the tables and the cache account for %d", id, p.refs[id], n)
		}
	}
	return nil
}

// Check verifies the pool's invariants: every block is either free with a
// zero count or referenced and off the free list, free + referenced = total,
// and the incremental counters match a recount. It is O(NumBlocks); tests
// call it after every operation.
func (p *Pool) Check() error {
	onFree := make([]bool, len(p.refs))
	for _, id := range p.free {
		if id < 0 || int(id) >= len(p.refs) {
			return fmt.Errorf("free list holds out-of-range block %d", id)
		}
		if onFree[id] {
			return fmt.Errorf("block %d is on the free list twice", id)
		}
		onFree[id] = true
	}
	referenced, cachedOnly, used := 0, 0, 0
	for i, r := range p.refs {
		id := BlockID(i)
		switch {
		case r < 0:
			return fmt.Errorf("block %d has negative refcount %d", id, r)
		case r == 0 && !onFree[id]:
			return fmt.Errorf("block %d has refcount 0 but is not free", id)
		case r > 0 && onFree[id]:
			return fmt.Errorf("block %d is free but has refcount %d", id, r)
		case r == 0 && (p.cached[id] || p.fill[id] != 0):
			return fmt.Errorf("free block %d is still marked cached=%v fill=%d", id, p.cached[id], p.fill[id])
		}
		if r > 0 {
			referenced++
		}
		if p.cached[id] && r == 1 {
			cachedOnly++
		}
		if f := int(p.fill[id]); f < 0 || f > p.blockSize {
			return fmt.Errorf("block %d has fill %d outside [0, %d]", id, f, p.blockSize)
		}
		used += int(p.fill[id])
	}
	if referenced+len(p.free) != len(p.refs) {
		return fmt.Errorf("free %d + referenced %d != total %d", len(p.free), referenced, len(p.refs))
	}
	if cachedOnly != p.cachedOnly {
		return fmt.Errorf("cachedOnly counter %d, recount %d", p.cachedOnly, cachedOnly)
	}
	if used != p.usedSlots {
		return fmt.Errorf("usedSlots counter %d, recount %d", p.usedSlots, used)
	}
	return nil
}
