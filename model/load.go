package model

import (
	"fmt"
	"io"
	"os"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/internal/mmap"
	"github.com/prefixd/prefixd/internal/sidefile"
)

// Load reads a model: a Hugging Face folder (config.json and safetensors)
// or a GGUF file (told by its magic), whose tensors stay in the files'
// types, read-only, until Model.Close; or a llama2.c checkpoint,
// converted into float32 slices the Model owns.
// Anything but a folder or a regular file (a device, a pipe) is refused.
// GGUF and safetensors files are copied into huge pages of the process's
// own (mmap.Resident), where decoding, which reads every weight a token,
// runs faster than on the file's mapping (BENCHMARKS.md, "Weights in huge
// pages"), unless the CPU kernels would read the bulk of the file from
// copies of their own (readInPlace): then it stays mapped, as LoadMapped
// maps it.
func Load(path string) (*Model, error) { return load(path, true) }

// LoadMapped is Load with GGUF and safetensors files mapped shared
// (mmap.File): memory grows only with the weights read, the page cache
// holds them, and processes serving one file share them.
func LoadMapped(path string) (*Model, error) { return load(path, false) }

func load(path string, resident bool) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if st.IsDir() {
		m, err := loadHF(path, resident)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return m, nil
	}
	if err := sidefile.CheckRegular(path, st); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if isGGUF(path) {
		m, err := loadGGUF(path, resident)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return m, nil
	}
	data, unmap, err := mmap.File(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m, err := parseLlama2C(data) // copies every tensor out of data
	if uerr := unmap(data); uerr != nil {
		return nil, fmt.Errorf("model: %s: %w", path, uerr)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// isGGUF reports whether path is a regular file that starts with GGUF's
// magic.
func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == gguf.Magic
}
