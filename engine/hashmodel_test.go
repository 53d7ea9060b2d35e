package engine

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/prefixd/prefixd/blockstore"
)

// hashModel is a test model whose "K/V" for position p is a running hash
// h(p) = mix(h(p-1), token(p), p) that it reads back for position p-1
// through the block table. Its next token is h(last) mod vocab. So any
// slip in block tables, copy-on-write, prefix reuse or preemption changes
// its output, while the right output is easy to compute from the tokens
// alone (expectGreedy). It does no other compute, which also makes it the
// model for measuring scheduler overhead.
type hashModel struct {
	vocab, maxLen int
	dense         bool // logits for every token (see denseLogits), not one-hot
	st            *blockstore.MemStorage
	blockSize     int
	logits        []float32
	forwards      int
	positions     int           // token positions computed, over all forwards
	gate          chan struct{} // if set, each Forward waits for a value
}

func newHashModel(vocab, maxLen int) *hashModel { return &hashModel{vocab: vocab, maxLen: maxLen} }

func (m *hashModel) VocabSize() int { return m.vocab }
func (m *hashModel) MaxSeqLen() int { return m.maxLen }

func (m *hashModel) NewKV(numBlocks, blockSize int) (blockstore.Storage, error) {
	st, err := blockstore.NewMemStorage(numBlocks, blockSize, 8)
	m.st, m.blockSize = st, blockSize
	return st, err
}

func mix(prev uint64, tok int32, pos int) uint64 {
	h := prev ^ (uint64(uint32(tok)) * 0x9E3779B97F4A7C15) ^ (uint64(pos) << 32)
	h ^= h >> 31
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 29
	return h
}

func (m *hashModel) slot(blocks []blockstore.BlockID, pos int) []byte {
	return m.st.Slot(blocks[pos/m.blockSize], pos%m.blockSize)
}

func (m *hashModel) Forward(rows []Row) ([]float32, error) {
	if m.gate != nil {
		<-m.gate
	}
	m.forwards++
	m.logits = m.logits[:0]
	for _, r := range rows {
		if need := blockstore.BlocksFor(r.Start+len(r.Tokens), m.blockSize); len(r.Blocks) < need {
			return nil, fmt.Errorf("row at %d+%d has %d blocks, needs %d", r.Start, len(r.Tokens), len(r.Blocks), need)
		}
		var h uint64
		if r.Start > 0 {
			h = binary.LittleEndian.Uint64(m.slot(r.Blocks, r.Start-1))
		}
		for i, tok := range r.Tokens {
			h = mix(h, tok, r.Start+i)
			binary.LittleEndian.PutUint64(m.slot(r.Blocks, r.Start+i), h)
			if len(r.Tokens)-i <= r.LogitRows() {
				m.appendLogits(h)
			}
		}
		m.positions += len(r.Tokens)
	}
	return m.logits, nil
}

// appendLogits appends the logits after running hash h.
func (m *hashModel) appendLogits(h uint64) {
	n := len(m.logits)
	m.logits = slices.Grow(m.logits, m.vocab)[:n+m.vocab]
	if m.dense {
		denseLogits(m.logits[n:], h)
	} else {
		clear(m.logits[n:])
		m.logits[n+int(h%uint64(m.vocab))] = 1
	}
}

// expectGreedy is what greedy decoding of hashModel must produce for a
// prompt: computed from the tokens alone, with no K/V.
func expectGreedy(vocab int, prompt []int32, n int, eos int32) []int32 {
	var h uint64
	toks := append([]int32(nil), prompt...)
	for i, t := range toks {
		h = mix(h, t, i)
	}
	var out []int32
	for len(out) < n {
		next := int32(h % uint64(vocab))
		if next == eos {
			break
		}
		out = append(out, next)
		h = mix(h, next, len(toks))
		toks = append(toks, next)
	}
	return out
}

// denseLogits fills logits with values in [0, 4) derived from the running
// hash h, so every token has a distinct, reproducible score.
func denseLogits(logits []float32, h uint64) {
	for i := range logits {
		logits[i] = float32(mix(h, int32(i), 1)%4000) / 1000
	}
}

// chainHash is hashModel's hash after tokens.
func chainHash(tokens []int32) uint64 {
	var h uint64
	for i, t := range tokens {
		h = mix(h, t, i)
	}
	return h
}
