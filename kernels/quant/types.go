package quant

import "fmt"

// Type is a ggml tensor element type, numbered as ggml numbers them (the
// ggml_type enum, which GGUF stores in each tensor info).
type Type uint32

// The types this package reads. Gaps in the numbering are ggml types it
// does not support (Q8_1, Q2_K, Q3_K, the IQ types, ...).
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	// Q8_K is the activation format of the K-quant dot products; ggml
	// never stores weights in it, but its layout is defined here too.
	Q8_K Type = 15
	BF16 Type = 30
)

// QK is the block size of the legacy quantizations (Q4_0 ... Q8_0) and
// QKK of the K-quants: how many values one block holds.
const (
	QK  = 32
	QKK = 256
)

type traits struct {
	name       string
	blockSize  int // values per block
	blockBytes int // bytes per block
}

// typeTraits is indexed by Type (an array, not a map: the kernels ask for
// block sizes once per row); a zero entry is an unsupported type.
var typeTraits = [BF16 + 1]traits{
	F32:  {"F32", 1, 4},
	F16:  {"F16", 1, 2},
	BF16: {"BF16", 1, 2},
	Q4_0: {"Q4_0", QK, 2 + QK/2},
	Q4_1: {"Q4_1", QK, 2 + 2 + QK/2},
	Q5_0: {"Q5_0", QK, 2 + 4 + QK/2},
	Q5_1: {"Q5_1", QK, 2 + 2 + 4 + QK/2},
	Q8_0: {"Q8_0", QK, 2 + QK},
	Q4_K: {"Q4_K", QKK, 2 + 2 + 12 + QKK/2},
	Q5_K: {"Q5_K", QKK, 2 + 2 + 12 + QKK/8 + QKK/2},
	Q6_K: {"Q6_K", QKK, QKK/2 + QKK/4 + QKK/16 + 2},
	Q8_K: {"Q8_K", QKK, 4 + QKK + 2*QKK/16},
}

// traits returns t's entry, and whether t is supported.
func (t Type) traits() (traits, bool) {
	if t >= Type(len(typeTraits)) || typeTraits[t].blockSize == 0 {
		return traits{}, false
	}
	return typeTraits[t], true
}

// Valid reports whether t is one of the types this package supports.
func (t Type) Valid() bool {
	_, ok := t.traits()
	return ok
}

// String returns ggml's name for t ("Q4_K"), or "type(N)" for a type this
// package does not support.
func (t Type) String() string {
	if tr, ok := t.traits(); ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is how many values one block of t holds: 1 for the float
// types, 32 for Q4_0 ... Q8_0, 256 for the K-quants. It is 0 for an
// unsupported type.
func (t Type) BlockSize() int {
	tr, _ := t.traits()
	return tr.blockSize
}

// BlockBytes is the size in bytes of one block of t (0 for an unsupported
// type).
func (t Type) BlockBytes() int {
	tr, _ := t.traits()
	return tr.blockBytes
}

// RowSize returns the bytes that n values of t take, or an error if t is
// unsupported or n is negative or not a whole number of blocks.
func (t Type) RowSize(n int) (int, error) {
	tr, ok := t.traits()
	switch {
	case !ok:
		return 0, fmt.Errorf("quant: unsupported tensor type %s", t)
	case n < 0 || n%tr.blockSize != 0:
		return 0, fmt.Errorf("quant: %d values of %s are not whole blocks of %d", n, t, tr.blockSize)
	}
	return n / tr.blockSize * tr.blockBytes, nil
}

// checkRow returns an error unless src holds exactly n values of t in
// whole blocks.
func checkRow(t Type, n, srcLen int) error {
	size, err := t.RowSize(n)
	if err != nil {
		return err
	}
	if srcLen != size {
		return fmt.Errorf("quant: %d values of %s take %d bytes, got %d", n, t, size, srcLen)
	}
	return nil
}
