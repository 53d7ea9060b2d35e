package model

import (
	"reflect"

	"github.com/prefixd/prefixd/gguf"
)

// ReadGGUFMetadata reads a GGUF v2/v3 file's metadata through package
// gguf: numbers as int64 or float64, strings, bools as int64, arrays as
// []any, the form GGUFTokenizer reads; it costs
// some 16 bytes per array element, so loading a model does not use it. It
// reads vocabulary-only files, which Load refuses for want of weights.
func ReadGGUFMetadata(path string) (map[string]any, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	meta := ggufMetadata(f)
	for k, v := range meta {
		if _, ok := arrayMeta(meta, k); ok {
			meta[k] = metaValue(reflect.ValueOf(v))
		}
	}
	return meta, nil
}
