package model

import (
	"github.com/prefixd/prefixd/gguf"
)

// ReadGGUFMetadata reads a GGUF v2/v3 file's metadata through package
// gguf: numbers as int64 or float64, strings, bools as int64, arrays as
// []any. It reads vocabulary-only files, which Load refuses for want of
// weights.
func ReadGGUFMetadata(path string) (map[string]any, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ggufMetadata(f), nil
}
