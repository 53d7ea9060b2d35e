package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/prefixd/prefixd/tokenizer/bpe"
)

// GGUF value types.
const (
	ggufUint8 = iota
	ggufInt8
	ggufUint16
	ggufInt16
	ggufUint32
	ggufInt32
	ggufFloat32
	ggufBool
	ggufString
	ggufArray
	ggufUint64
	ggufInt64
	ggufFloat64
)

// GGUF tensor types prefixd reads.
const (
	ggmlF32  = 0
	ggmlF16  = 1
	ggmlQ8_0 = 8
)

// ggufReader decodes GGUF's little-endian primitives, checking every length
// against the bytes left before allocating.
type ggufReader struct {
	b   []byte
	off int
}

var errTruncated = errors.New("model: GGUF file truncated")

func (r *ggufReader) take(n uint64) ([]byte, error) {
	if n > uint64(len(r.b)-r.off) {
		return nil, errTruncated
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s, nil
}

func (r *ggufReader) u32() (uint32, error) {
	b, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *ggufReader) u64() (uint64, error) {
	b, err := r.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (r *ggufReader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	b, err := r.take(n)
	return string(b), err
}

// value reads a metadata value of type t: numbers as float64 or int64,
// strings, bools, and arrays as []any.
func (r *ggufReader) value(t uint32, depth int) (any, error) {
	size := map[uint32]uint64{ggufUint8: 1, ggufInt8: 1, ggufBool: 1, ggufUint16: 2, ggufInt16: 2,
		ggufUint32: 4, ggufInt32: 4, ggufFloat32: 4, ggufUint64: 8, ggufInt64: 8, ggufFloat64: 8}
	switch t {
	case ggufString:
		return r.str()
	case ggufArray:
		if depth > 2 {
			return nil, errors.New("model: GGUF arrays nested too deep")
		}
		et, err := r.u32()
		if err != nil {
			return nil, err
		}
		n, err := r.u64()
		if err != nil {
			return nil, err
		}
		min := size[et]
		if et == ggufString || et == ggufArray {
			min = 8
		}
		if min == 0 {
			return nil, fmt.Errorf("model: GGUF array of unknown type %d", et)
		}
		if n > uint64(len(r.b)-r.off)/min {
			return nil, errTruncated
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = r.value(et, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	n, ok := size[t]
	if !ok {
		return nil, fmt.Errorf("model: unknown GGUF value type %d", t)
	}
	b, err := r.take(n)
	if err != nil {
		return nil, err
	}
	switch t {
	case ggufUint8, ggufBool:
		return int64(b[0]), nil
	case ggufInt8:
		return int64(int8(b[0])), nil
	case ggufUint16:
		return int64(binary.LittleEndian.Uint16(b)), nil
	case ggufInt16:
		return int64(int16(binary.LittleEndian.Uint16(b))), nil
	case ggufUint32:
		return int64(binary.LittleEndian.Uint32(b)), nil
	case ggufInt32:
		return int64(int32(binary.LittleEndian.Uint32(b))), nil
	case ggufFloat32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
	case ggufUint64, ggufInt64:
		return int64(binary.LittleEndian.Uint64(b)), nil
	default: // ggufFloat64
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	}
}

type ggufTensor struct {
	dims   []uint64 // innermost first
	typ    uint32
	offset uint64
}

// parseGGUF reads a GGUF v2/v3 model of one of ggufArchs, dequantising
// every tensor to float32.
func parseGGUF(data []byte) (*Model, error) {
	r := &ggufReader{b: data}
	magic, err := r.take(4)
	if err != nil || string(magic) != "GGUF" {
		return nil, errors.New("model: not a GGUF file (bad magic)")
	}
	version, err := r.u32()
	if err != nil {
		return nil, err
	}
	if version != 2 && version != 3 {
		return nil, fmt.Errorf("model: GGUF version %d not supported (2 or 3)", version)
	}
	nTensors, err := r.u64()
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64()
	if err != nil {
		return nil, err
	}
	if nKV > uint64(len(data)) || nTensors > uint64(len(data)) {
		return nil, errTruncated
	}
	meta := map[string]any{}
	for range nKV {
		key, err := r.str()
		if err != nil {
			return nil, err
		}
		t, err := r.u32()
		if err != nil {
			return nil, err
		}
		if meta[key], err = r.value(t, 0); err != nil {
			return nil, fmt.Errorf("model: GGUF metadata %q: %w", key, err)
		}
	}
	tensors := map[string]ggufTensor{}
	for range nTensors {
		name, err := r.str()
		if err != nil {
			return nil, err
		}
		nd, err := r.u32()
		if err != nil {
			return nil, err
		}
		if nd == 0 || nd > 4 {
			return nil, fmt.Errorf("model: GGUF tensor %q has %d dimensions", name, nd)
		}
		t := ggufTensor{dims: make([]uint64, nd)}
		for i := range t.dims {
			if t.dims[i], err = r.u64(); err != nil {
				return nil, err
			}
		}
		if t.typ, err = r.u32(); err != nil {
			return nil, err
		}
		if t.offset, err = r.u64(); err != nil {
			return nil, err
		}
		tensors[name] = t
	}
	align := uint64(32)
	if a, ok := meta["general.alignment"].(int64); ok {
		if a <= 0 || a > 1<<20 {
			return nil, fmt.Errorf("model: GGUF alignment %d", a)
		}
		align = uint64(a)
	}
	base := (uint64(r.off) + align - 1) / align * align
	return buildGGUF(data, base, meta, tensors)
}

// buildGGUF makes the Model that meta and tensors describe, reading the
// tensors from data at base.
func buildGGUF(data []byte, base uint64, meta map[string]any, tensors map[string]ggufTensor) (*Model, error) {
	c, err := ggufConfig(meta)
	if err != nil {
		return nil, err
	}
	var tok Tokenizer
	if _, ok := meta["tokenizer.ggml.tokens"]; ok {
		if tok, err = GGUFTokenizer(meta); err != nil {
			return nil, err
		}
	}
	emb, ok := tensors["token_embd.weight"]
	if !ok || len(emb.dims) != 2 {
		return nil, errors.New("model: GGUF has no 2-D token_embd.weight")
	}
	c.Vocab = int(min(emb.dims[1], 1<<30))
	c.BOS, c.EOS = -1, -1
	if tok != nil {
		// Fewer tokens than logits is normal (models pad their
		// embeddings); more would be another model's vocabulary.
		if err := bpe.CheckVocabSize(tok.VocabSize(), c.Vocab); err != nil {
			return nil, fmt.Errorf("model: GGUF: %w", err)
		}
		c.BOS, c.EOS = tok.BOS(), tok.EOS()
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	// Every layer has at least 9 tensors: bound the layer count by the
	// file's before allocating layers and naming their tensors.
	if c.Layers > len(tensors)/9 {
		return nil, fmt.Errorf("model: GGUF block_count %d, but the file has %d tensors", c.Layers, len(tensors))
	}
	get := func(name string, shape ...int) ([]float32, error) {
		t, ok := tensors[name]
		if !ok {
			return nil, fmt.Errorf("model: GGUF tensor %q missing", name)
		}
		return ggufTensorData(data, base, name, t, shape)
	}
	d, kv, h, qd, hd := c.Dim, c.KVDim(), c.Hidden, c.QDim(), c.HeadDim()
	m := &Model{Config: c, Layers: make([]Layer, c.Layers), Name: "gguf"}
	if name, ok := meta["general.name"].(string); ok && name != "" {
		m.Name = name
	}
	if tok != nil {
		m.Tokenizer = tok
	}
	var errs []error
	load := func(dst *[]float32, name string, shape ...int) {
		w, err := get(name, shape...)
		*dst = w
		errs = append(errs, err)
	}
	load(&m.Embedding, "token_embd.weight", d, c.Vocab)
	load(&m.FinalNorm, "output_norm.weight", d)
	if _, ok := tensors["output.weight"]; ok {
		load(&m.Classifier, "output.weight", d, c.Vocab)
	} else {
		m.Classifier, m.Config.SharedClassifier = m.Embedding, true
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		load(&l.AttnNorm, p+"attn_norm.weight", d)
		load(&l.Wq, p+"attn_q.weight", d, qd)
		load(&l.Wk, p+"attn_k.weight", d, kv)
		load(&l.Wv, p+"attn_v.weight", d, kv)
		load(&l.Wo, p+"attn_output.weight", qd, d)
		if c.Arch.QKVBias {
			load(&l.Bq, p+"attn_q.bias", qd)
			load(&l.Bk, p+"attn_k.bias", kv)
			load(&l.Bv, p+"attn_v.bias", kv)
		}
		if c.Arch.QKNorm {
			load(&l.QNorm, p+"attn_q_norm.weight", hd)
			load(&l.KNorm, p+"attn_k_norm.weight", hd)
		}
		load(&l.FFNNorm, p+"ffn_norm.weight", d)
		load(&l.W1, p+"ffn_gate.weight", d, h)
		load(&l.W2, p+"ffn_down.weight", h, d)
		load(&l.W3, p+"ffn_up.weight", d, h)
	}
	var freqs []float32
	if _, ok := tensors["rope_freqs.weight"]; ok {
		load(&freqs, "rope_freqs.weight", hd/2)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	arch, _ := meta["general.architecture"].(string) // ggufConfig has checked it
	if m.RopeFactors, err = ggufRopeFactors(meta, arch, c, freqs); err != nil {
		return nil, err
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// ggufTensorData checks a tensor's shape (innermost first) and converts its
// bytes to float32.
func ggufTensorData(data []byte, base uint64, name string, t ggufTensor, shape []int) ([]float32, error) {
	if len(t.dims) != len(shape) {
		return nil, fmt.Errorf("model: GGUF tensor %q has shape %v, want %v", name, t.dims, shape)
	}
	n := uint64(1)
	for i, dim := range t.dims {
		if dim != uint64(shape[i]) {
			return nil, fmt.Errorf("model: GGUF tensor %q has shape %v, want %v", name, t.dims, shape)
		}
		n *= dim
	}
	var size uint64
	switch t.typ {
	case ggmlF32:
		size = 4 * n
	case ggmlF16:
		size = 2 * n
	case ggmlQ8_0:
		if n%32 != 0 {
			return nil, fmt.Errorf("model: Q8_0 tensor %q of %d values is not whole blocks of 32", name, n)
		}
		size = n / 32 * 34
	default:
		return nil, fmt.Errorf("model: GGUF tensor %q has type %d; F32, F16 and Q8_0 are supported", name, t.typ)
	}
	start := base + t.offset
	if t.offset > uint64(len(data)) || start > uint64(len(data)) || size > uint64(len(data))-start {
		return nil, fmt.Errorf("model: GGUF tensor %q runs past the end of the file", name)
	}
	b := data[start : start+size]
	out := make([]float32, n)
	switch t.typ {
	case ggmlF32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case ggmlF16:
		for i := range out {
			out[i] = halfToFloat(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case ggmlQ8_0:
		for blk := range len(out) / 32 {
			q := b[blk*34:]
			scale := halfToFloat(binary.LittleEndian.Uint16(q))
			for i := range 32 {
				out[blk*32+i] = scale * float32(int8(q[2+i]))
			}
		}
	}
	return out, nil
}

// halfToFloat converts an IEEE 754 binary16 to float32.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: value = frac * 2^-24
		v := float32(frac) / (1 << 24)
		if sign != 0 {
			return -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}
