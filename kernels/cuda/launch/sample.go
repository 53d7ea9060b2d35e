package launch

import (
	"fmt"
	"math"

	"github.com/prefixd/prefixd/sample"
)

// SampleRow is one row for Sample: its row of the logits buffer and the
// draw sample.Sampler's Offload describes.
type SampleRow struct {
	Row int
	sample.Draw
}

// sampleParams is the int32 words of a row's parameters (sample.cu's
// SAMPLE_PARAMS).
const sampleParams = 12

// SampleBuilder packs a step's SampleRows into the two int32 arrays
// sample_rows reads (parameters, then entries: one upload). The zero
// value is ready; Reset reuses its memory.
type SampleBuilder struct {
	params, entries, packed []int32
}

// Reset empties the builder.
func (b *SampleBuilder) Reset() { b.params, b.entries = b.params[:0], b.entries[:0] }

// Add appends r, or returns an error wrapping ErrShape for a row or token
// outside [0, vocab) or a draw outside [0, 1).
func (b *SampleBuilder) Add(r SampleRow, vocab int) error {
	if r.Row < 0 || r.TopK < 0 || !(r.U >= 0 && r.U < 1) || !(r.Temperature >= 0) {
		return fmt.Errorf("%w: sample row %d, top-k %d, temperature %v, draw %v", ErrShape, r.Row, r.TopK, r.Temperature, r.U)
	}
	for _, e := range r.Entries {
		if e.Token < 0 || int(e.Token) >= vocab {
			return fmt.Errorf("%w: sample entry for token %d of %d", ErrShape, e.Token, vocab)
		}
	}
	f := func(v float32) int32 { return int32(math.Float32bits(v)) }
	u := math.Float64bits(r.U)
	b.params = append(b.params, int32(r.Row), f(r.Temperature), int32(r.TopK), f(r.TopP), f(r.MinP), f(r.Frequency),
		f(r.Presence), f(r.Repetition), int32(len(b.entries)/4), int32(len(r.Entries)), int32(uint32(u)), int32(uint32(u>>32)))
	for _, e := range r.Entries {
		in := int32(0)
		if e.InPrompt {
			in = 1
		}
		b.entries = append(b.entries, e.Token, f(e.Bias), e.Count, in)
	}
	return nil
}

// Rows returns the rows added since Reset.
func (b *SampleBuilder) Rows() int { return len(b.params) / sampleParams }

// Packed returns the parameters, then the entries: the int32s to upload.
// The slice is reused by the next call.
func (b *SampleBuilder) Packed() []int32 {
	b.packed = append(append(b.packed[:0], b.params...), b.entries...)
	return b.packed
}

// Sample sets out (int32 [rows]) to each row's token, drawn on the device
// as sample.Sampler draws it (sample.cu says where the two may differ),
// or -1 where the row's logits after biases and penalties are not finite
// (sample.ErrNonFinite). packed is b.Packed() uploaded; logits (float32
// [][vocab]) holds the rows, which Sample overwrites with their
// unnormalised probabilities.
func Sample(d Device, out, logits, packed Ptr, b *SampleBuilder, vocab int) error {
	if err := positive("sample rows and vocab", b.Rows(), vocab); err != nil {
		return err
	}
	entries := packed + Ptr(4*len(b.params))
	return d.Launch("sample_rows", row(b.Rows()), threads(rowThreads), P(out), P(logits), I(vocab), P(packed), P(entries))
}
