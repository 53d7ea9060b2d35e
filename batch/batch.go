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
}
