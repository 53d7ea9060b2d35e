package blockstore

import "fmt"

// BlockCopy asks a Storage to copy the first Slots token slots of block Src
// into block Dst, in every layer, K and V.
type BlockCopy struct {
	Src, Dst BlockID
	Slots    int
}

// Storage holds the K/V bytes of every physical block. A compute backend
// implements it (kernels/cpu, kernels/cuda); the pool calls it for
// copy-on-write and the host tier calls it to demote and promote blocks.
type Storage interface {
	// BlockBytes is the size in bytes of one block's K/V across all layers.
	BlockBytes() int
	// CopyBlocks performs every copy in copies. Implementations may batch
	// them into one operation and must not retain copies.
	CopyBlocks(copies []BlockCopy) error
	// ReadBlock copies the bytes of block id into dst, which is BlockBytes
	// long. Implementations must not retain dst.
	ReadBlock(id BlockID, dst []byte) error
	// WriteBlock overwrites the bytes of block id with src, which is
	// BlockBytes long. Implementations must not retain src.
	WriteBlock(id BlockID, src []byte) error
}

// MemStorage is a Storage in plain host memory: numBlocks blocks of
// blockSize slots of slotBytes bytes each, laid out [block][slot][byte].
// It is the reference Storage for tests and for running the pool without a
// model.
type MemStorage struct {
	blockSize, slotBytes int
	data                 []byte
}

// NewMemStorage returns a zeroed MemStorage.
func NewMemStorage(numBlocks, blockSize, slotBytes int) (*MemStorage, error) {
	if numBlocks <= 0 || blockSize <= 0 || slotBytes <= 0 {
		return nil, fmt.Errorf("blockstore: MemStorage needs positive sizes, got blocks=%d blockSize=%d slotBytes=%d",
			numBlocks, blockSize, slotBytes)
	}
	return &MemStorage{
		blockSize: blockSize,
		slotBytes: slotBytes,
		data:      make([]byte, numBlocks*blockSize*slotBytes),
	}, nil
}

// BlockBytes implements Storage.
func (s *MemStorage) BlockBytes() int { return s.blockSize * s.slotBytes }

// Slot returns the bytes of one token slot. The slice aliases the storage.
func (s *MemStorage) Slot(id BlockID, slot int) []byte {
	off := (int(id)*s.blockSize + slot) * s.slotBytes
	return s.data[off : off+s.slotBytes : off+s.slotBytes]
}

func (s *MemStorage) block(id BlockID) ([]byte, error) {
	n := s.BlockBytes()
	if id < 0 || (int(id)+1)*n > len(s.data) {
		return nil, fmt.Errorf("blockstore: block %d out of range", id)
	}
	off := int(id) * n
	return s.data[off : off+n : off+n], nil
}

// CopyBlocks implements Storage.
func (s *MemStorage) CopyBlocks(copies []BlockCopy) error {
	for _, c := range copies {
		src, err := s.block(c.Src)
		if err != nil {
			return err
		}
		dst, err := s.block(c.Dst)
		if err != nil {
			return err
		}
		if c.Slots < 0 || c.Slots > s.blockSize {
			return fmt.Errorf("blockstore: copy of %d slots, block size %d", c.Slots, s.blockSize)
		}
		copy(dst, src[:c.Slots*s.slotBytes])
	}
	return nil
}

// ReadBlock implements Storage.
func (s *MemStorage) ReadBlock(id BlockID, dst []byte) error {
	b, err := s.block(id)
	if err != nil {
		return err
	}
	if len(dst) != len(b) {
		return fmt.Errorf("blockstore: read of %d bytes, block is %d", len(dst), len(b))
	}
	copy(dst, b)
	return nil
}

// WriteBlock implements Storage.
func (s *MemStorage) WriteBlock(id BlockID, src []byte) error {
	b, err := s.block(id)
	if err != nil {
		return err
	}
	if len(src) != len(b) {
		return fmt.Errorf("blockstore: write of %d bytes, block is %d", len(src), len(b))
	}
	copy(b, src)
	return nil
}
