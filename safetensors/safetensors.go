// Package safetensors reads Hugging Face safetensors files: an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the tensor bytes. Files are mapped read-only
// (not copied), so a tensor's Data is a slice of the mapping, valid until
// Close. Every header is validated before use: the length bounded, each
// range inside the file and of the size its shape and dtype imply, the
// ranges neither overlapping nor leaving holes (as the reference Rust
// reader requires). A folder sharded by model.safetensors.index.json opens
// as one Model.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"sort"

	"github.com/prefixd/prefixd/internal/mmap"
)

// MaxHeaderBytes is the largest JSON header accepted, the reference
// reader's limit: a larger length is a corrupt or hostile file.
const MaxHeaderBytes = 100_000_000

// dtypeSizes gives the bytes per element of every dtype the format
// defines; the reader accepts them all so that a file with, say, an I64
// buffer still opens, and leaves it to the caller to refuse a dtype it
// cannot use.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// DTypeSize returns the bytes per element of dtype ("BF16": 2), or 0 if
// the format does not define it.
func DTypeSize(dtype string) int { return dtypeSizes[dtype] }

// Tensor is one tensor of a file.
type Tensor struct {
	Name  string
	DType string // "BF16", "F16", "F32", ...: the header's dtype
	Shape []int  // outermost first, as PyTorch orders it
	// Data holds the tensor's bytes, little-endian, row-major. Opened
	// from a file, it is part of the read-only mapping: it must not be
	// written, and is valid only until the File (or Model) is closed.
	Data []byte
}

// Elements is the product of t's shape (1 for a scalar).
func (t *Tensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// header is a parsed, validated header: the tensors in header order
// (Data not set), the byte range of each in the data section, and the
// free-form string metadata of "__metadata__".
type header struct {
	tensors  []Tensor
	ranges   [][2]int
	metadata map[string]string
}

type tensorInfo struct {
	DType       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets []uint64 `json:"data_offsets"`
}

// parseHeader validates the header at the start of file, the whole
// file's bytes, and returns it and the offset of the data section.
func parseHeader(file []byte) (*header, int, error) {
	if len(file) < 8 {
		return nil, 0, errors.New("safetensors: file shorter than its 8-byte header length")
	}
	n := binary.LittleEndian.Uint64(file)
	if n > MaxHeaderBytes {
		return nil, 0, fmt.Errorf("safetensors: header length %d over the %d-byte limit", n, MaxHeaderBytes)
	}
	if n > uint64(len(file)-8) {
		return nil, 0, fmt.Errorf("safetensors: header length %d past the end of the %d-byte file", n, len(file))
	}
	start := 8 + int(n)
	h, err := parseJSON(file[8:start], int64(len(file)-start))
	return h, start, err
}

func parseJSON(js []byte, dataLen int64) (*header, error) {
	if len(js) == 0 || js[0] != '{' {
		return nil, errors.New("safetensors: header is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	h := &header{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("safetensors: header: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("safetensors: header: %v where a tensor name belongs", tok)
		}
		if seen[name] {
			return nil, fmt.Errorf("safetensors: header names %q twice", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			if err := dec.Decode(&h.metadata); err != nil {
				return nil, fmt.Errorf("safetensors: __metadata__ is not an object of strings: %w", err)
			}
			continue
		}
		var ti tensorInfo
		if err := decodeStrict(dec, &ti); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		t, r, err := ti.check(name, dataLen)
		if err != nil {
			return nil, err
		}
		h.tensors = append(h.tensors, t)
		h.ranges = append(h.ranges, r)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimRight(rest, " \t\r\n")) != 0 {
		return nil, errors.New("safetensors: bytes after the header's JSON object")
	}
	if h.metadata == nil {
		h.metadata = map[string]string{}
	}
	return h, h.checkLayout(dataLen)
}

// decodeStrict decodes the next value into v, refusing unknown fields.
func decodeStrict(dec *json.Decoder, v *tensorInfo) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// check validates one tensor's entry against a data section of dataLen
// bytes.
func (ti *tensorInfo) check(name string, dataLen int64) (Tensor, [2]int, error) {
	size, ok := dtypeSizes[ti.DType]
	switch {
	case ti.DType == "":
		return Tensor{}, [2]int{}, fmt.Errorf("safetensors: tensor %q has no dtype", name)
	case !ok:
		return Tensor{}, [2]int{}, fmt.Errorf("safetensors: tensor %q has unknown dtype %q", name, ti.DType)
	case ti.Shape == nil:
		return Tensor{}, [2]int{}, fmt.Errorf("safetensors: tensor %q has no shape", name)
	case len(ti.DataOffsets) != 2:
		return Tensor{}, [2]int{}, fmt.Errorf("safetensors: tensor %q: data_offsets must be [begin, end]", name)
	}
	begin, end := ti.DataOffsets[0], ti.DataOffsets[1]
	if begin > end || end > uint64(dataLen) {
		return Tensor{}, [2]int{}, fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] outside the %d-byte data section",
			name, begin, end, dataLen)
	}
	want := uint64(size)
	shape := make([]int, len(ti.Shape))
	for i, d := range ti.Shape {
		if d < 0 {
			return Tensor{}, [2]int{}, fmt.Errorf("safetensors: tensor %q: negative dimension %d", name, d)
		}
		hi, lo := bits.Mul64(want, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return Tensor{}, [2]int{}, fmt.Errorf("safetensors: tensor %q: shape %v overflows", name, ti.Shape)
		}
		want, shape[i] = lo, int(d)
	}
	if want != end-begin {
		return Tensor{}, [2]int{}, fmt.Errorf("safetensors: tensor %q: shape %v of %s is %d bytes, data_offsets give %d",
			name, ti.Shape, ti.DType, want, end-begin)
	}
	return Tensor{Name: name, DType: ti.DType, Shape: shape}, [2]int{int(begin), int(end)}, nil
}

// checkLayout requires the ranges to tile the data section exactly: in
// offset order each begins where the previous ended, the last ends at
// dataLen. An overlap would alias two tensors; a hole is a file cut or
// patched wrongly.
func (h *header) checkLayout(dataLen int64) error {
	order := make([]int, len(h.tensors))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return h.ranges[order[a]][0] < h.ranges[order[b]][0] })
	pos := 0
	for _, i := range order {
		r := h.ranges[i]
		if r[0] < pos {
			return fmt.Errorf("safetensors: tensor %q at [%d, %d] overlaps the one before it (ending at %d)",
				h.tensors[i].Name, r[0], r[1], pos)
		}
		if r[0] > pos {
			return fmt.Errorf("safetensors: %d unclaimed bytes before tensor %q at %d", r[0]-pos, h.tensors[i].Name, r[0])
		}
		pos = r[1]
	}
	if int64(pos) != dataLen {
		return fmt.Errorf("safetensors: tensors cover %d bytes of the %d-byte data section", pos, dataLen)
	}
	return nil
}

// File is an open safetensors file. Its methods are safe for concurrent
// use; Close must not race with them.
type File struct {
	Metadata map[string]string // "__metadata__", empty when absent

	name    string
	mapping []byte
	unmap   func([]byte) error
	tensors []Tensor
	byName  map[string]int
}

// Open maps the file at path and validates its header.
func Open(path string) (*File, error) {
	data, unmap, err := mmap.File(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := fromBytes(path, data)
	if err != nil {
		_ = unmap(data)
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	f.unmap = unmap
	return f, nil
}

// FromBytes reads a safetensors file held in memory; the tensors' Data
// are slices of data.
func FromBytes(data []byte) (*File, error) { return fromBytes("", data) }

func fromBytes(name string, data []byte) (*File, error) {
	h, start, err := parseHeader(data)
	if err != nil {
		return nil, err
	}
	f := &File{Metadata: h.metadata, name: name, mapping: data, tensors: h.tensors, byName: map[string]int{}}
	for i := range f.tensors {
		r := h.ranges[i]
		f.tensors[i].Data = data[start+r[0] : start+r[1] : start+r[1]]
		f.byName[f.tensors[i].Name] = i
	}
	return f, nil
}

// resident is gguf's File.Resident for one safetensors file.
func (f *File) resident() error {
	data, unmap, err := mmap.Move(f.mapping, f.unmap, func(carry func([]byte) []byte) {
		for i := range f.tensors {
			f.tensors[i].Data = carry(f.tensors[i].Data)
		}
	})
	if data == nil {
		return fmt.Errorf("safetensors: %s: %w", f.name, err)
	}
	f.mapping, f.unmap = data, unmap
	return err
}

// Names returns the tensor names, sorted.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.tensors))
	for _, t := range f.tensors {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

// Tensor returns the named tensor and whether the file has it. The
// tensor's Data is valid until Close.
func (f *File) Tensor(name string) (Tensor, bool) {
	i, ok := f.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return f.tensors[i], true
}

// Close unmaps the file; no tensor Data from it may be used afterwards.
// Closing twice is harmless.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap(f.mapping)
	f.unmap, f.mapping, f.tensors, f.byName = nil, nil, nil, nil
	return err
}
