package model

import (
	"errors"
	"fmt"
	"os"
)

// ReadGGUFMetadata reads a GGUF v2/v3 file's metadata, without its
// tensors: numbers as int64 or float64, strings, bools as int64, arrays as
// []any. It reads vocabulary-only files, which Load refuses for want of
// weights.
func ReadGGUFMetadata(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	r := &ggufReader{b: data}
	meta, _, err := r.header()
	return meta, err
}

// header reads the magic, version, counts and metadata, leaving r at the
// tensor descriptors, and returns the metadata and the tensor count.
func (r *ggufReader) header() (map[string]any, uint64, error) {
	magic, err := r.take(4)
	if err != nil || string(magic) != "GGUF" {
		return nil, 0, errors.New("model: not a GGUF file (bad magic)")
	}
	version, err := r.u32()
	if err != nil {
		return nil, 0, err
	}
	if version != 2 && version != 3 {
		return nil, 0, fmt.Errorf("model: GGUF version %d not supported (2 or 3)", version)
	}
	nTensors, err := r.u64()
	if err != nil {
		return nil, 0, err
	}
	nKV, err := r.u64()
	if err != nil {
		return nil, 0, err
	}
	if nKV > uint64(len(r.b)) || nTensors > uint64(len(r.b)) {
		return nil, 0, errTruncated
	}
	meta := map[string]any{}
	for range nKV {
		key, err := r.str()
		if err != nil {
			return nil, 0, err
		}
		t, err := r.u32()
		if err != nil {
			return nil, 0, err
		}
		if meta[key], err = r.value(t, 0); err != nil {
			return nil, 0, fmt.Errorf("model: GGUF metadata %q: %w", key, err)
		}
	}
	return meta, nTensors, nil
}
