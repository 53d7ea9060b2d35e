package cpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels"
)

// Errors returned by KVCache, wrapped with detail; test with errors.Is.
var (
	// ErrBadConfig means a KVConfig size is not positive or its Type is
	// neither F32 nor F16.
	ErrBadConfig = errors.New("cpu: bad KV cache config")
	// ErrBlockRange means a block ID is outside the cache.
	ErrBlockRange = errors.New("cpu: block ID out of range")
	// ErrSlotRange means a copy asked for more slots than a block has.
	ErrSlotRange = errors.New("cpu: slot count out of range")
	// ErrBufferSize means a ReadBlock or WriteBlock buffer is not
	// BlockBytes long.
	ErrBufferSize = errors.New("cpu: block buffer has the wrong size")
)

// KVConfig sizes a KVCache: the shared kernels.KVConfig, named here for
// the cache's callers.
type KVConfig = kernels.KVConfig

// KVCache holds every block's K and V in host memory, per layer laid out
// [block][kvHead][slot][headDim], so that one head's positions in a block
// lie together (a decode step's attention reads them as one stream; laid
// out [slot][kvHead][headDim] they were pieces of one or two cache lines
// a row of every head apart, and BenchmarkAttentionFromMemory read 30%
// slower), as float32 or, for a config of Type F16,
// as IEEE half-precision values (half the memory; Put rounds to nearest
// even and Attention computes in float32). It implements blockstore.Storage;
// which blocks are live is the blockstore.Pool's business, not the cache's.
// It is not safe for concurrent use: one goroutine (the model runner) calls
// Put, Attention and the Storage methods in turn, and Attention's own
// workers only read.
type KVCache struct {
	cfg      KVConfig
	kvDim    int
	k, v     [][]float32 // per layer; nil in an F16 cache
	k16, v16 [][]uint16  // per layer; nil in an F32 cache
}

var _ blockstore.Storage = (*KVCache)(nil)

// maxLayerFloats bounds one layer's K (or V) array: 2^40 values, 4 TiB
// of float32s.
const maxLayerFloats = 1 << 40

// NewKVCache allocates a zeroed cache of 2·Layers·NumBlocks·BlockSize·
// KVHeads·HeadDim values of cfg.Type. It returns an error wrapping
// ErrBadConfig if a size is not positive, the sizes multiply past any
// memory, or the type is neither F32 nor F16.
func NewKVCache(cfg KVConfig) (*KVCache, error) {
	if cfg.Layers <= 0 || cfg.KVHeads <= 0 || cfg.HeadDim <= 0 || cfg.BlockSize <= 0 || cfg.NumBlocks <= 0 {
		return nil, fmt.Errorf("%w: every size must be positive, got %+v", ErrBadConfig, cfg)
	}
	if cfg.Type != kernels.F32 && cfg.Type != kernels.F16 {
		return nil, fmt.Errorf("%w: K/V element type %v, want F32 or F16", ErrBadConfig, cfg.Type)
	}
	c := &KVCache{cfg: cfg, kvDim: cfg.KVHeads * cfg.HeadDim}
	n := maxLayerFloats + 1
	if per := cfg.BlockSize * c.kvDim; per <= maxLayerFloats && cfg.NumBlocks <= maxLayerFloats/per {
		n = cfg.NumBlocks * per
	}
	if n > maxLayerFloats {
		return nil, fmt.Errorf("%w: %d blocks of %d slots x %d floats is too large", ErrBadConfig, cfg.NumBlocks, cfg.BlockSize, c.kvDim)
	}
	for range cfg.Layers {
		if cfg.Type == kernels.F16 {
			c.k16 = append(c.k16, make([]uint16, n))
			c.v16 = append(c.v16, make([]uint16, n))
		} else {
			c.k = append(c.k, make([]float32, n))
			c.v = append(c.v, make([]float32, n))
		}
	}
	return c, nil
}

// Config returns the cache's sizes.
func (c *KVCache) Config() KVConfig { return c.cfg }

// Put stores one token's K and V (KVHeads·HeadDim floats each) in layer,
// block id, slot, an F16 cache rounding them to nearest even. It is on the
// per-token hot path, so it does not return an error: out-of-range
// arguments are a broken caller invariant and panic.
func (c *KVCache) Put(layer int, id blockstore.BlockID, slot int, k, v []float32) {
	if slot < 0 || slot >= c.cfg.BlockSize || len(k) != c.kvDim || len(v) != c.kvDim {
		panic(fmt.Sprintf("cpu: Put of %d+%d floats in slot %d, want %d floats in a block of %d", len(k), len(v), slot, c.kvDim, c.cfg.BlockSize))
	}
	hd, span := c.cfg.HeadDim, c.cfg.BlockSize*c.cfg.HeadDim
	for h := range c.cfg.KVHeads {
		off, src := int(id)*c.cfg.BlockSize*c.kvDim+h*span+slot*hd, h*hd
		if c.k16 != nil {
			toHalf(c.k16[layer][off:off+hd], k[src:src+hd])
			toHalf(c.v16[layer][off:off+hd], v[src:src+hd])
			continue
		}
		copy(c.k[layer][off:off+hd], k[src:src+hd])
		copy(c.v[layer][off:off+hd], v[src:src+hd])
	}
}

// blockSpan is the range of block id in a layer's array.
func (c *KVCache) blockSpan(id blockstore.BlockID) (int, int, error) {
	if id < 0 || int(id) >= c.cfg.NumBlocks {
		return 0, 0, fmt.Errorf("%w: block %d, cache of %d", ErrBlockRange, id, c.cfg.NumBlocks)
	}
	n := c.cfg.BlockSize * c.kvDim
	return int(id) * n, int(id)*n + n, nil
}

// elemBytes is the size of one stored value: 4, or 2 in an F16 cache.
func (c *KVCache) elemBytes() int {
	if c.k16 != nil {
		return 2
	}
	return 4
}

// BlockBytes implements blockstore.Storage: the bytes of one block's K and
// V in every layer, 2·Layers·BlockSize·KVHeads·HeadDim values of 4 bytes,
// or of 2 in an F16 cache.
func (c *KVCache) BlockBytes() int {
	return c.cfg.Layers * 2 * c.cfg.BlockSize * c.kvDim * c.elemBytes()
}

// CopyBlocks implements blockstore.Storage: each copy takes the first Slots
// slots of Src's K and V in every layer to Dst. It checks every copy before
// doing any, so an error leaves the cache unchanged.
func (c *KVCache) CopyBlocks(copies []blockstore.BlockCopy) error {
	for _, cp := range copies {
		if _, _, err := c.blockSpan(cp.Src); err != nil {
			return err
		}
		if _, _, err := c.blockSpan(cp.Dst); err != nil {
			return err
		}
		if cp.Slots < 0 || cp.Slots > c.cfg.BlockSize {
			return fmt.Errorf("%w: copy of %d slots, block size %d", ErrSlotRange, cp.Slots, c.cfg.BlockSize)
		}
	}
	span, head := c.cfg.BlockSize*c.kvDim, c.cfg.BlockSize*c.cfg.HeadDim
	for _, cp := range copies {
		n := cp.Slots * c.cfg.HeadDim
		for h := range c.cfg.KVHeads {
			s0, d0 := int(cp.Src)*span+h*head, int(cp.Dst)*span+h*head
			copyLayers(c.k, s0, d0, n)
			copyLayers(c.v, s0, d0, n)
			copyLayers(c.k16, s0, d0, n)
			copyLayers(c.v16, s0, d0, n)
		}
	}
	return nil
}

// copyLayers copies n values from s0 to d0 in every layer's array (none
// for the type the cache does not store).
func copyLayers[T float32 | uint16](layers [][]T, s0, d0, n int) {
	for _, a := range layers {
		copy(a[d0:d0+n], a[s0:s0+n])
	}
}

// ReadBlock implements blockstore.Storage. The layout of dst is, for each
// layer in order, the block's K then its V, each [slot][kvHead][headDim]
// (not the cache's own order: the storage tiers' format, which the GPU
// cache writes too) little-endian float32, or half-precision (IEEE
// binary16) in an F16 cache: BlockBytes in all.
func (c *KVCache) ReadBlock(id blockstore.BlockID, dst []byte) error {
	return c.blockBytes(id, dst, func(f []float32, b []byte) {
		for i, v := range f {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
	}, func(h []uint16, b []byte) {
		for i, v := range h {
			binary.LittleEndian.PutUint16(b[2*i:], v)
		}
	})
}

// WriteBlock implements blockstore.Storage, in ReadBlock's layout.
func (c *KVCache) WriteBlock(id blockstore.BlockID, src []byte) error {
	return c.blockBytes(id, src, func(f []float32, b []byte) {
		for i := range f {
			f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}, func(h []uint16, b []byte) {
		for i := range h {
			h[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
	})
}

// blockBytes checks id and buf, then hands each head vector of each
// layer's K and V of block id, with the part of buf that holds it in
// ReadBlock's layout, to conv, or to conv16 in an F16 cache.
func (c *KVCache) blockBytes(id blockstore.BlockID, buf []byte, conv func([]float32, []byte), conv16 func([]uint16, []byte)) error {
	lo, hi, err := c.blockSpan(id)
	if err != nil {
		return err
	}
	if len(buf) != c.BlockBytes() {
		return fmt.Errorf("%w: %d bytes, want %d", ErrBufferSize, len(buf), c.BlockBytes())
	}
	eb, hd, bs := c.elemBytes(), c.cfg.HeadDim, c.cfg.BlockSize
	n := (hi - lo) * eb
	for l := range c.cfg.Layers {
		for slot := range bs {
			for h := range c.cfg.KVHeads {
				m := lo + (h*bs+slot)*hd                  // in the cache
				b := ((slot*c.cfg.KVHeads + h) * hd) * eb // in buf
				if c.k16 != nil {
					conv16(c.k16[l][m:m+hd], buf[b:])
					conv16(c.v16[l][m:m+hd], buf[n+b:])
				} else {
					conv(c.k[l][m:m+hd], buf[b:])
					conv(c.v[l][m:m+hd], buf[n+b:])
				}
			}
		}
		buf = buf[2*n:]
	}
	return nil
}
