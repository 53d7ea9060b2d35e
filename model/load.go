package model

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Load reads a model file, telling GGUF from a llama2.c checkpoint by its
// magic. The file is memory-mapped for the parse and unmapped before Load
// returns: every tensor is converted (F16 and Q8_0 dequantised) into
// float32 slices the Model owns, so the Model does not depend on the file.
func Load(path string) (*Model, error) {
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	defer unmap()
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

// mapFile maps path read-only and returns its bytes and the function that
// unmaps them.
func mapFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	switch {
	case size == 0: // nothing to map; the parsers reject it as too short
		return []byte{}, func() {}, nil
	case size != int64(int(size)):
		return nil, nil, fmt.Errorf("%s: %d bytes is too large to map", path, size)
	case !st.Mode().IsRegular():
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return data, func() {
		if err := syscall.Munmap(data); err != nil {
			panic(errors.Join(errors.New("model: munmap of a mapping Load made failed"), err))
		}
	}, nil
}
