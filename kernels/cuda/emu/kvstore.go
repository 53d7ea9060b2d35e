//go:build cgo && amd64

package emu

import (
	"errors"
	"fmt"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
)

// KVStore is the emulator's K/V pool, as kernels/cuda's KVStore is the
// GPU's: every block in one allocation of the Device's element type, laid
// out as launch.KVLayout says, copies done by the copy_blocks kernel. It
// implements blockstore.Storage and is not safe for concurrent use.
type KVStore struct {
	d      *Device
	lay    launch.KVLayout
	pool   launch.Ptr
	bytes  int // one block
	copier launch.Copier
}

var _ blockstore.Storage = (*KVStore)(nil)

// NewKVStore allocates a pool of lay.NumBlocks blocks on d.
func NewKVStore(d *Device, lay launch.KVLayout) (*KVStore, error) {
	if err := lay.Check(); err != nil {
		return nil, err
	}
	s := &KVStore{d: d, lay: lay, bytes: int(lay.BlockElems()) * d.dtype.Size()}
	var err error
	if s.pool, err = d.Alloc(s.bytes * lay.NumBlocks); err != nil {
		return nil, err
	}
	return s, nil
}

// Layout returns the pool's sizes.
func (s *KVStore) Layout() launch.KVLayout { return s.lay }

// Pool returns the pool's device address, for the kernels.
func (s *KVStore) Pool() launch.Ptr { return s.pool }

// BlockBytes implements blockstore.Storage.
func (s *KVStore) BlockBytes() int { return s.bytes }

func (s *KVStore) block(id blockstore.BlockID, buf []byte) (launch.Ptr, error) {
	if err := s.lay.BlockOK(id); err != nil {
		return 0, err
	}
	if len(buf) != s.bytes {
		return 0, fmt.Errorf("%w: %d bytes, want %d", launch.ErrBufferSize, len(buf), s.bytes)
	}
	return s.pool + launch.Ptr(int(id)*s.bytes), nil
}

// ReadBlock implements blockstore.Storage, in kernels/cuda KVStore's
// layout.
func (s *KVStore) ReadBlock(id blockstore.BlockID, dst []byte) error {
	p, err := s.block(id, dst)
	if err != nil {
		return err
	}
	return s.d.Read(dst, p)
}

// WriteBlock implements blockstore.Storage.
func (s *KVStore) WriteBlock(id blockstore.BlockID, src []byte) error {
	p, err := s.block(id, src)
	if err != nil {
		return err
	}
	return s.d.Write(p, src)
}

// CopyBlocks implements blockstore.Storage with one launch for all
// copies; a refused batch (launch.ErrBlockRange, ErrSlotRange,
// ErrCopyOverlap) changes nothing.
func (s *KVStore) CopyBlocks(copies []blockstore.BlockCopy) error {
	return s.copier.Copy(s.d, s.pool, s.lay, copies)
}

// Close frees the pool and its buffers.
func (s *KVStore) Close() error { return errors.Join(s.d.Free(s.pool), s.copier.Free(s.d)) }
