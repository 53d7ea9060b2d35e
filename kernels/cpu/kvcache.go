package cpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"prefixd/blockstore"
)

// KVConfig sizes a KVCache.
type KVConfig struct {
	Layers, KVHeads, HeadDim int
	BlockSize, NumBlocks     int
}

// KVCache holds every block's K and V in host memory, per layer laid out
// [block][slot][kvHead][headDim] float32. It implements blockstore.Storage.
// It is not safe for concurrent use except that Attention reads it from the
// workers while nothing writes.
type KVCache struct {
	cfg   KVConfig
	kvDim int
	k, v  [][]float32 // per layer
}

var _ blockstore.Storage = (*KVCache)(nil)

// NewKVCache allocates a zeroed cache.
func NewKVCache(cfg KVConfig) (*KVCache, error) {
	if cfg.Layers <= 0 || cfg.KVHeads <= 0 || cfg.HeadDim <= 0 || cfg.BlockSize <= 0 || cfg.NumBlocks <= 0 {
		return nil, fmt.Errorf("cpu: KVConfig needs positive sizes, got %+v", cfg)
	}
	c := &KVCache{cfg: cfg, kvDim: cfg.KVHeads * cfg.HeadDim}
	n := cfg.NumBlocks * cfg.BlockSize * c.kvDim
	for range cfg.Layers {
		c.k = append(c.k, make([]float32, n))
		c.v = append(c.v, make([]float32, n))
	}
	return c, nil
}

// Config returns the cache's sizes.
func (c *KVCache) Config() KVConfig { return c.cfg }

// Put stores one token's K and V (KVHeads·HeadDim each) in layer, block
// id, slot.
func (c *KVCache) Put(layer int, id blockstore.BlockID, slot int, k, v []float32) {
	off := (int(id)*c.cfg.BlockSize + slot) * c.kvDim
	copy(c.k[layer][off:off+c.kvDim], k)
	copy(c.v[layer][off:off+c.kvDim], v)
}

// blockSpan is the range of block id in a layer's array.
func (c *KVCache) blockSpan(id blockstore.BlockID) (int, int, error) {
	if id < 0 || int(id) >= c.cfg.NumBlocks {
		return 0, 0, fmt.Errorf("cpu: block %d outside the cache of %d", id, c.cfg.NumBlocks)
	}
	n := c.cfg.BlockSize * c.kvDim
	return int(id) * n, int(id)*n + n, nil
}

// BlockBytes implements blockstore.Storage: K then V of every layer.
func (c *KVCache) BlockBytes() int { return c.cfg.Layers * 2 * c.cfg.BlockSize * c.kvDim * 4 }

// CopyBlocks implements blockstore.Storage.
func (c *KVCache) CopyBlocks(copies []blockstore.BlockCopy) error {
	for _, cp := range copies {
		s0, _, err := c.blockSpan(cp.Src)
		if err != nil {
			return err
		}
		d0, _, err := c.blockSpan(cp.Dst)
		if err != nil {
			return err
		}
		if cp.Slots < 0 || cp.Slots > c.cfg.BlockSize {
			return fmt.Errorf("cpu: copy of %d slots, block size %d", cp.Slots, c.cfg.BlockSize)
		}
		n := cp.Slots * c.kvDim
		for l := range c.k {
			copy(c.k[l][d0:d0+n], c.k[l][s0:s0+n])
			copy(c.v[l][d0:d0+n], c.v[l][s0:s0+n])
		}
	}
	return nil
}

// ReadBlock implements blockstore.Storage: for each layer, K then V of the
// block as little-endian float32.
func (c *KVCache) ReadBlock(id blockstore.BlockID, dst []byte) error {
	return c.blockBytes(id, dst, func(f []float32, b []byte) {
		for i, v := range f {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
	})
}

// WriteBlock implements blockstore.Storage, in ReadBlock's layout.
func (c *KVCache) WriteBlock(id blockstore.BlockID, src []byte) error {
	return c.blockBytes(id, src, func(f []float32, b []byte) {
		for i := range f {
			f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	})
}

func (c *KVCache) blockBytes(id blockstore.BlockID, buf []byte, conv func([]float32, []byte)) error {
	lo, hi, err := c.blockSpan(id)
	if err != nil {
		return err
	}
	if len(buf) != c.BlockBytes() {
		return fmt.Errorf("cpu: block buffer of %d bytes, want %d", len(buf), c.BlockBytes())
	}
	n := (hi - lo) * 4
	for l := range c.k {
		conv(c.k[l][lo:hi], buf[:n])
		conv(c.v[l][lo:hi], buf[n:2*n])
		buf = buf[2*n:]
	}
	return nil
}
