// Package safetensorstest writes safetensors files and sharded folders of
// seeded random tensors, so tests of the readers and of model loading
// need no downloads.
package safetensorstest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/prefixd/prefixd/kernels/quant"
	"github.com/prefixd/prefixd/safetensors"
)

// Random returns a tensor of dtype "F32", "F16" or "BF16" and the given
// shape holding values drawn from N(0, scale²) by a PRNG seeded with
// seed: the same arguments give the same bytes.
func Random(seed uint64, name, dtype string, scale float64, shape ...int) safetensors.Tensor {
	rng := rand.New(rand.NewPCG(seed, 0x5afe))
	t := safetensors.Tensor{Name: name, DType: dtype, Shape: shape}
	n := t.Elements()
	size := safetensors.DTypeSize(dtype)
	t.Data = make([]byte, n*size)
	for i := range n {
		v := float32(rng.NormFloat64() * scale)
		switch dtype {
		case "F32":
			binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(v))
		case "F16":
			binary.LittleEndian.PutUint16(t.Data[2*i:], quant.F32ToF16(v))
		case "BF16":
			binary.LittleEndian.PutUint16(t.Data[2*i:], quant.F32ToBF16(v))
		default:
			panic("safetensorstest: Random cannot fill dtype " + dtype)
		}
	}
	return t
}

// WriteFile writes tensors and metadata as the safetensors file path.
func WriteFile(path string, tensors []safetensors.Tensor, metadata map[string]string) error {
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, metadata); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// WriteSharded writes tensors into dir as Hugging Face does for a large
// model: shards model-0000i-of-0000n.safetensors of at most perShard
// tensors each (in the order given), each with metadata {"format": "pt"},
// and model.safetensors.index.json mapping every tensor to its shard.
func WriteSharded(dir string, tensors []safetensors.Tensor, perShard int) error {
	n := (len(tensors) + perShard - 1) / perShard
	weightMap := map[string]string{}
	total := 0
	for s := range n {
		shard := fmt.Sprintf("model-%05d-of-%05d.safetensors", s+1, n)
		part := tensors[s*perShard : min((s+1)*perShard, len(tensors))]
		for _, t := range part {
			weightMap[t.Name] = shard
			total += len(t.Data)
		}
		if err := WriteFile(filepath.Join(dir, shard), part, map[string]string{"format": "pt"}); err != nil {
			return err
		}
	}
	idx, err := json.MarshalIndent(map[string]any{"metadata": map[string]int{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, safetensors.IndexFile), idx, 0o644)
}
