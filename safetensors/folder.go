package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/prefixd/prefixd/internal/sidefile"
)

// Hugging Face's file names for a model folder's weights.
const (
	SingleFile = "model.safetensors"
	IndexFile  = "model.safetensors.index.json"
)

// maxIndexBytes bounds the index read: a real one is some tens of KB.
const maxIndexBytes = 64 * sidefile.MiB

// Model is the weights of a Hugging Face model folder, one file or
// several shards, seen as one set of tensors. Its methods are safe for
// concurrent use; Close must not race with them.
type Model struct {
	files  []*File
	byName map[string]*File
}

// OpenDir opens the weights in dir: the shards model.safetensors.index.json
// names when it exists, model.safetensors otherwise. The index must map
// every tensor to a shard (a plain file name in dir) that holds it, and
// every shard's tensors must be in the index.
func OpenDir(dir string) (*Model, error) {
	idx, err := readIndex(filepath.Join(dir, IndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		f, err := Open(filepath.Join(dir, SingleFile))
		if err != nil {
			return nil, err
		}
		m := &Model{files: []*File{f}, byName: map[string]*File{}}
		for _, name := range f.Names() {
			m.byName[name] = f
		}
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	m := &Model{byName: map[string]*File{}}
	shards := map[string]*File{}
	for _, name := range sortedKeys(idx) {
		shard := idx[name]
		if shard == "" || filepath.Base(shard) != shard || shard == "." || shard == ".." {
			m.Close()
			return nil, fmt.Errorf("safetensors: %s maps %q to %q, not a file name in the folder", IndexFile, name, shard)
		}
		f := shards[shard]
		if f == nil {
			if f, err = Open(filepath.Join(dir, shard)); err != nil {
				m.Close()
				return nil, err
			}
			shards[shard] = f
			m.files = append(m.files, f)
		}
		if _, ok := f.Tensor(name); !ok {
			m.Close()
			return nil, fmt.Errorf("safetensors: %s maps %q to %s, which does not hold it", IndexFile, name, shard)
		}
		m.byName[name] = f
	}
	for shard, f := range shards {
		for _, name := range f.Names() {
			if m.byName[name] != f {
				m.Close()
				return nil, fmt.Errorf("safetensors: %s holds %q, which %s does not map to it", shard, name, IndexFile)
			}
		}
	}
	return m, nil
}

// readIndex returns the weight_map of the index at path.
func readIndex(path string) (map[string]string, error) {
	data, err := sidefile.Read(path, maxIndexBytes)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("safetensors: %s has no weight_map", path)
	}
	return idx.WeightMap, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Tensor returns the named tensor and whether the model has it. Its Data
// is valid until Close.
func (m *Model) Tensor(name string) (Tensor, bool) {
	f, ok := m.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return f.Tensor(name)
}

// Names returns every tensor name, sorted.
func (m *Model) Names() []string {
	names := make([]string, 0, len(m.byName))
	for name := range m.byName {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Metadata returns the "__metadata__" of the first shard (HF writes the
// same in each, typically {"format": "pt"}).
func (m *Model) Metadata() map[string]string {
	if len(m.files) == 0 {
		return nil
	}
	return m.files[0].Metadata
}

// Resident moves every file's tensors to a copy in huge pages, as gguf's
// File.Resident does; tensors taken from m before must not be used
// afterwards.
func (m *Model) Resident() error {
	for _, f := range m.files {
		if err := f.resident(); err != nil {
			return err
		}
	}
	return nil
}

// Close unmaps every file; the first error is returned.
func (m *Model) Close() error {
	var first error
	for _, f := range m.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	m.files, m.byName = nil, nil
	return first
}
