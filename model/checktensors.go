package model

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// namedTensor is a weight with the name its file gives it (GGUF's
// blk.0.attn_q.weight, Hugging Face's model.layers.0.self_attn.q_proj.weight),
// or a descriptive one for a file without names.
type namedTensor struct {
	name string
	t    kernels.Tensor
}

// weights returns every weight of the model with its name: as the loader
// recorded them from the file, or, for a model from a file without
// tensor names (llama2.c) or built in memory, by role ("layer 3 wq").
// A classifier that aliases the embedding is listed once.
func (m *Model) weights() []namedTensor {
	if m.named != nil {
		return m.named
	}
	out := []namedTensor{{"token embedding", m.Embedding}, {"final norm", m.FinalNorm}}
	if !m.Config.SharedClassifier {
		out = append(out, namedTensor{"classifier", m.Classifier})
	}
	for i, l := range m.Layers {
		for _, w := range []namedTensor{{"attention norm", l.AttnNorm}, {"wq", l.Wq}, {"wk", l.Wk}, {"wv", l.Wv},
			{"wo", l.Wo}, {"ffn norm", l.FFNNorm}, {"w1", l.W1}, {"w2", l.W2}, {"w3", l.W3}, {"q bias", l.Bq},
			{"k bias", l.Bk}, {"v bias", l.Bv}, {"q norm", l.QNorm}, {"k norm", l.KNorm}} {
			if w.t.Rows != 0 {
				out = append(out, namedTensor{fmt.Sprintf("layer %d %s", i, w.name), w.t})
			}
		}
	}
	return out
}

// CheckTensors scans every weight for NaN and infinite values, as
// llama.cpp's --check-tensors does, and returns an error naming the first
// tensor (in file order) that holds one and the index of its first bad
// value. Each row is decoded as the kernels decode it, so a quantized
// block whose scale (d, or dmin) is NaN or infinite shows as its values,
// and every type is covered: F32, F16, BF16 and each quantized format. The
// scan reads every byte of the weights (a few seconds for a 7B model,
// spread over GOMAXPROCS goroutines) and stops early with ctx's error
// when ctx ends.
func (m *Model) CheckTensors(ctx context.Context) error {
	ws := m.weights()
	errs := make([]error, len(ws))
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(ws)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []float32
			for {
				next.Lock()
				j := i
				i++
				next.Unlock()
				if j >= len(ws) {
					return
				}
				if buf, errs[j] = checkTensor(ctx, ws[j], buf); ctx.Err() != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkTensor scans one tensor row by row, decoding into buf (grown as
// needed and returned for the next tensor).
func checkTensor(ctx context.Context, w namedTensor, buf []float32) ([]float32, error) {
	t := w.t
	if err := t.Check(); err != nil {
		return buf, fmt.Errorf("model: tensor %q: %w", w.name, err)
	}
	if cap(buf) < t.Cols {
		buf = make([]float32, t.Cols)
	}
	row := buf[:t.Cols]
	for r := range t.Rows {
		if r%64 == 0 && ctx.Err() != nil {
			return buf, nil
		}
		if err := quant.Dequantize(t.Type, row, t.Row(r)); err != nil {
			return buf, fmt.Errorf("model: tensor %q: %w", w.name, err)
		}
		for c, v := range row {
			if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
				continue
			}
			where := ""
			if bs := t.Type.BlockSize(); bs > 1 {
				where = fmt.Sprintf(", in %s block %d of the row, whose scale or values are not finite", t.Type, c/bs)
			}
			return buf, fmt.Errorf("model: tensor %q: value %d (row %d, column %d%s) is %v: the weights are corrupt",
				w.name, r*t.Cols+c, r, c, where, v)
		}
	}
	return buf, nil
}
