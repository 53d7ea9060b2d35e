package gpu

import (
	"fmt"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/sample"
)

// Stepper is what ProfileStep needs of a model runner (model.Runner).
type Stepper interface {
	NewKV(numBlocks, blockSize int) (blockstore.Storage, error)
	Forward(seqs []batch.Row) ([]float32, error)
	ForwardSample(seqs []batch.Row, greedy []bool, draws []*sample.Draw) ([]float32, []int32, error)
	MaxSeqLen() int
	VocabSize() int
}

// ProfileBiases is the most biased tokens ProfileStep counts in a draw
// besides the context's: the server's bound on logit_bias entries.
const ProfileBiases = 1024

// ProfileStep runs the largest steps an engine configured with maxTokens
// tokens a step and maxSeqs sequences gives r, each row wanting logits:
// a prefill of maxTokens token rows over maxSeqs sequences (more where a
// sequence would pass the model's context), each ending at the end of
// the model's context, then a decode of maxSeqs rows, one at the end of
// the context and the others at its start, which splits attention the
// most and so needs its largest workspace, each row drawn on the device
// with the most bias and penalty entries a draw can have (a token of the
// context each, and ProfileBiases more, within the vocabulary: 16 bytes
// each, uploaded for sample_rows). Every sequence's block table
// is the same whole context's blocks (their K/V writes collide: the
// values do not matter), so the uploads of block tables are their
// largest too. On a Backend, whose activation, logits, step and attention
// buffers grow to the largest step and stay, the device's free memory
// afterwards is what the K/V pool may take without a later step running
// out mid-serving (vLLM profiles a dummy step the same way); only the
// step's upload buffer may still grow, by at most 8 bytes a sequence (a
// prompt cut into one more 64-token query tile than the profile's even
// split). The profile's pool, one context's blocks, stays until the
// caller's next NewKV replaces it.
func ProfileStep(r Stepper, maxTokens, maxSeqs, blockSize int) error {
	maxLen := r.MaxSeqLen()
	if maxTokens < 1 || maxSeqs < 1 || blockSize < 1 || maxLen < 1 {
		return fmt.Errorf("gpu: a profile step of %d tokens over %d sequences in blocks of %d (context %d)", maxTokens, maxSeqs, blockSize, maxLen)
	}
	table := make([]blockstore.BlockID, blockstore.BlocksFor(maxLen, blockSize))
	for j := range table {
		table[j] = blockstore.BlockID(j)
	}
	seqs := min(max(maxSeqs, (maxTokens+maxLen-1)/maxLen), maxTokens)
	prefill := make([]batch.Row, seqs)
	for i := range prefill {
		n := maxTokens / seqs
		if i < maxTokens%seqs {
			n++
		}
		prefill[i] = batch.Row{Tokens: make([]int32, n), Start: maxLen - n, Blocks: table, Logits: true}
	}
	decode := make([]batch.Row, maxSeqs)
	for i := range decode {
		decode[i] = batch.Row{Tokens: make([]int32, 1), Blocks: table, Logits: true}
	}
	decode[0].Start = maxLen - 1
	if _, err := r.NewKV(len(table), blockSize); err != nil {
		return err
	}
	if _, err := r.Forward(prefill); err != nil {
		return err
	}
	entries := make([]sample.Entry, min(maxLen+ProfileBiases, r.VocabSize()))
	for i := range entries {
		entries[i] = sample.Entry{Token: int32(i), Bias: 1, Count: 1, InPrompt: true}
	}
	draw := &sample.Draw{Temperature: 1, Entries: entries}
	draws := make([]*sample.Draw, len(decode))
	for i := range draws {
		draws[i] = draw
	}
	_, _, err := r.ForwardSample(decode, make([]bool, len(decode)), draws)
	return err
}
