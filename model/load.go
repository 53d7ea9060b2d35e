package model

import (
	"bytes"
	"fmt"
	"os"
)

// Load reads a model file, telling GGUF from a llama2.c checkpoint by its
// magic.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	var m *Model
	if bytes.HasPrefix(data, []byte("GGUF")) {
		m, err = parseGGUF(data)
	} else {
		m, err = parseLlama2C(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
