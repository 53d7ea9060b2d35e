//go:build cuda

package cuda

import (
	"errors"
	"fmt"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
)

// Errors returned by KVStore, wrapped with detail; test with errors.Is.
var (
	// ErrBlockRange means a block ID is outside the store.
	ErrBlockRange = errors.New("cuda: block ID out of range")
	// ErrSlotRange means a copy asked for more slots than a block has.
	ErrSlotRange = errors.New("cuda: slot count out of range")
	// ErrBufferSize means a ReadBlock or WriteBlock buffer is not
	// BlockBytes long.
	ErrBufferSize = errors.New("cuda: block buffer has the wrong size")
	// ErrCopyOverlap means one CopyBlocks call names a block as a
	// destination twice, or as both a source and a destination: the copies
	// run in parallel, so their order would be undefined.
	ErrCopyOverlap = errors.New("cuda: copies overlap")
)

// KVStore is the GPU's K/V pool: every block in one device allocation of
// the Device's element type, laid out as launch.KVLayout says, so a
// block's bytes are contiguous. It implements blockstore.Storage; which
// blocks are live is the blockstore.Pool's business. It is safe for
// concurrent use (its calls run on the device thread one at a time).
type KVStore struct {
	d     *Device
	lay   launch.KVLayout
	pool  launch.Ptr
	bytes int // one block
	// On the device thread only:
	staging  []byte     // pinned, one block: ReadBlock and WriteBlock go through it
	copies   launch.Ptr // device int32 [copiesCap][3]: CopyBlocks' descriptors
	copyCap  int
	copyDesc []int32
	dsts     map[blockstore.BlockID]bool
}

var _ blockstore.Storage = (*KVStore)(nil)

// NewKVStore allocates a pool of lay.NumBlocks blocks on d. Its contents
// start undefined, as the pool hands out blocks only to be written.
func NewKVStore(d *Device, lay launch.KVLayout) (*KVStore, error) {
	if err := lay.Check(); err != nil {
		return nil, err
	}
	s := &KVStore{d: d, lay: lay, bytes: int(lay.BlockElems()) * d.dtype.Size(), dsts: map[blockstore.BlockID]bool{}}
	err := d.Do(func(x *Exec) (err error) {
		if s.pool, err = x.Alloc(s.bytes * lay.NumBlocks); err != nil {
			return err
		}
		if s.staging, err = pinnedAlloc(s.bytes); err != nil {
			x.Free(s.pool)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Layout returns the pool's sizes.
func (s *KVStore) Layout() launch.KVLayout { return s.lay }

// Pool returns the pool's device address, for the kernels.
func (s *KVStore) Pool() launch.Ptr { return s.pool }

// BlockBytes implements blockstore.Storage: 2·Layers·BlockSize·KVHeads·
// HeadDim elements of the Device's type.
func (s *KVStore) BlockBytes() int { return s.bytes }

func (s *KVStore) block(id blockstore.BlockID) (launch.Ptr, error) {
	if id < 0 || int(id) >= s.lay.NumBlocks {
		return 0, fmt.Errorf("%w: block %d, store of %d", ErrBlockRange, id, s.lay.NumBlocks)
	}
	return s.pool + launch.Ptr(int(id)*s.bytes), nil
}

// ReadBlock implements blockstore.Storage: dst gets the block's bytes,
// for each layer its K then its V, each [slot][kvHead][headDim] in the
// Device's element type, little-endian.
func (s *KVStore) ReadBlock(id blockstore.BlockID, dst []byte) error {
	p, err := s.block(id)
	if err != nil {
		return err
	}
	if len(dst) != s.bytes {
		return fmt.Errorf("%w: %d bytes, want %d", ErrBufferSize, len(dst), s.bytes)
	}
	return s.d.Do(func(x *Exec) error {
		if err := x.Read(s.staging, p); err != nil {
			return err
		}
		copy(dst, s.staging)
		return nil
	})
}

// WriteBlock implements blockstore.Storage, in ReadBlock's layout.
func (s *KVStore) WriteBlock(id blockstore.BlockID, src []byte) error {
	p, err := s.block(id)
	if err != nil {
		return err
	}
	if len(src) != s.bytes {
		return fmt.Errorf("%w: %d bytes, want %d", ErrBufferSize, len(src), s.bytes)
	}
	return s.d.Do(func(x *Exec) error {
		copy(s.staging, src)
		return x.Write(p, s.staging)
	})
}

// CopyBlocks implements blockstore.Storage with one kernel launch for all
// copies. It checks every copy first, so an error leaves the store
// unchanged; copies that overlap (ErrCopyOverlap) are refused because they
// run in parallel.
func (s *KVStore) CopyBlocks(copies []blockstore.BlockCopy) error {
	if len(copies) == 0 {
		return nil
	}
	return s.d.Do(func(x *Exec) error {
		clear(s.dsts)
		s.copyDesc = s.copyDesc[:0]
		for _, c := range copies {
			if _, err := s.block(c.Src); err != nil {
				return err
			}
			if _, err := s.block(c.Dst); err != nil {
				return err
			}
			if c.Slots < 0 || c.Slots > s.lay.BlockSize {
				return fmt.Errorf("%w: copy of %d slots, block size %d", ErrSlotRange, c.Slots, s.lay.BlockSize)
			}
			if s.dsts[c.Dst] {
				return fmt.Errorf("%w: block %d is a destination twice", ErrCopyOverlap, c.Dst)
			}
			s.dsts[c.Dst] = true
			s.copyDesc = append(s.copyDesc, int32(c.Src), int32(c.Dst), int32(c.Slots))
		}
		for _, c := range copies {
			if s.dsts[c.Src] {
				return fmt.Errorf("%w: block %d is a source and a destination", ErrCopyOverlap, c.Src)
			}
		}
		if len(copies) > s.copyCap {
			if s.copyCap > 0 {
				if err := x.Free(s.copies); err != nil {
					return err
				}
				s.copyCap = 0
			}
			p, err := x.Alloc(12 * len(copies))
			if err != nil {
				return err
			}
			s.copies, s.copyCap = p, len(copies)
		}
		if err := x.Write(s.copies, int32Bytes(s.copyDesc)); err != nil {
			return err
		}
		return launch.CopyBlocks(x, s.pool, s.lay, s.copies, len(copies))
	})
}

// Close frees the pool and its buffers.
func (s *KVStore) Close() error {
	return s.d.Do(func(x *Exec) error {
		errs := []error{x.Free(s.pool), pinnedFree(s.staging)}
		if s.copyCap > 0 {
			errs = append(errs, x.Free(s.copies))
		}
		return errors.Join(errs...)
	})
}
