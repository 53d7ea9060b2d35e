// Package batch defines the row of a forward pass: the one type the
// engine (which builds batches), the model (which runs them) and every
// compute backend (which reads their positions and block tables) share. It
// is a leaf, so the engine need not import a model or a backend to name it.
package batch

import "github.com/prefixd/prefixd/blockstore"

// Row is one sequence's part of a forward pass: Tokens at positions Start,
// Start+1, ..., reading and writing K/V through the block table Blocks,
// which already has slots for every one of those positions (K/V of the
// positions before Start are present).
type Row struct {
	Tokens []int32
	Start  int
	Blocks []blockstore.BlockID
	Logits bool // compute next-token logits for the last token
	// Drafts, with Logits, is how many positions before the last get
	// next-token logits too: a speculative decoding row [next token,
	// d1..dk] verifies its k drafted tokens with Drafts = k, the logits
	// after each of its k+1 tokens. 0 <= Drafts < len(Tokens); 0 without
	// Logits.
	Drafts int
}

// LogitRows is how many of the row's trailing positions get next-token
// logits: 0 without Logits, else 1 + Drafts. A model returns them in
// position order, a vocabulary each.
func (r *Row) LogitRows() int {
	if !r.Logits {
		return 0
	}
	return 1 + r.Drafts
}
