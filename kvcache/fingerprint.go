package kvcache

import (
	"encoding/binary"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Fingerprint identifies a cached block by everything that determines its
// K/V: the namespace, every token before it and its own tokens. It is a
// chain of two independently seeded xxhash64 sums, so two different
// prefixes share a fingerprint only by a 128-bit collision; the host tier
// also compares the block's own tokens and namespace on every lookup.
type Fingerprint struct{ Lo, Hi uint64 }

// hiSeed seeds the second hash of a Fingerprint; any fixed odd constant works.
const hiSeed = 0x9E3779B97F4A7C15

// NamespaceSalt is the per-namespace salt mixed into every fingerprint, so
// equal prompts in different namespaces never share a host-tier entry.
func NamespaceSalt(ns string) uint64 { return xxhash.Sum64String(ns) }

// Chain returns the fingerprint of a block of tokens whose prefix has
// fingerprint parent (the zero Fingerprint for the first block).
func Chain(parent Fingerprint, salt uint64, tokens []int32) Fingerprint {
	return Fingerprint{
		Lo: chainHash(0, parent.Lo, salt, tokens),
		Hi: chainHash(hiSeed, parent.Hi, salt, tokens),
	}
}

func chainHash(seed, parent, salt uint64, tokens []int32) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(seed)
	var head [16]byte
	binary.LittleEndian.PutUint64(head[:8], parent)
	binary.LittleEndian.PutUint64(head[8:], salt)
	d.Write(head[:])
	if len(tokens) > 0 {
		// Hashing the tokens' in-memory bytes (host byte order) copies
		// nothing; records that outlive the process (the disk tier's)
		// carry the byte order in their model fingerprint, and every hit
		// is verified token by token.
		d.Write(unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), 4*len(tokens)))
	}
	return d.Sum64()
}

// ChainPrefix returns the fingerprint after the first n whole blocks of
// tokens, starting from the zero Fingerprint.
func ChainPrefix(salt uint64, tokens []int32, blockSize, n int) Fingerprint {
	fp := Fingerprint{}
	for i := range n {
		fp = Chain(fp, salt, tokens[i*blockSize:(i+1)*blockSize])
	}
	return fp
}

// AppendChain appends to dst the fingerprints of the whole blocks of
// tokens (a trailing partial block has none), the first chained from
// parent, and returns dst.
func AppendChain(dst []Fingerprint, parent Fingerprint, salt uint64, tokens []int32, blockSize int) []Fingerprint {
	for i := 0; i+blockSize <= len(tokens); i += blockSize {
		parent = Chain(parent, salt, tokens[i:i+blockSize])
		dst = append(dst, parent)
	}
	return dst
}
