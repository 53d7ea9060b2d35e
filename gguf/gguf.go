// Package gguf reads GGUF files (versions 2 and 3) as llama.cpp writes
// them, keeping every tensor in its file type: a tensor is its ggml type,
// its shape and a slice of the read-only file mapping, which the kernels
// in kernels/quant multiply directly. Everything is validated before use:
// counts and lengths against the bytes left, metadata types, tensor
// types, shapes and names, the alignment, and each tensor's offset (ggml
// requires tensors in info order, each at the padded end of the one
// before, which rules out overlaps).
package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/prefixd/prefixd/internal/mmap"
	"github.com/prefixd/prefixd/kernels/quant"
)

// Magic is the first four bytes of a GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data alignment when the file does not set
// general.alignment.
const DefaultAlignment = 32

// MaxDims and MaxNameLen are ggml's limits (GGML_MAX_DIMS, and
// GGML_MAX_NAME less the terminating zero).
const (
	MaxDims    = 4
	MaxNameLen = 63
)

// maxDim bounds each dimension, far above any real tensor's, so that a
// row's bytes cannot overflow before the shape's product is checked.
const maxDim = 1 << 40

// maxArrayDepth bounds arrays of arrays: llama.cpp writes none nested;
// the bound stops a hostile file from recursing deep.
const maxArrayDepth = 3

// ValueType is a metadata value's type, numbered as GGUF numbers them.
type ValueType uint32

// The metadata value types.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

// scalarSize is the encoded size of each fixed-size value type.
var scalarSize = map[ValueType]uint64{TypeUint8: 1, TypeInt8: 1, TypeBool: 1, TypeUint16: 2, TypeInt16: 2,
	TypeUint32: 4, TypeInt32: 4, TypeFloat32: 4, TypeUint64: 8, TypeInt64: 8, TypeFloat64: 8}

// Tensor is one tensor of a file.
type Tensor struct {
	Name string
	Type quant.Type
	// Shape is ggml's ne: the innermost (contiguous) dimension first, so
	// a weight matrix of out rows of in values is [in, out].
	Shape []int
	// Data is the tensor's bytes: Rows() rows of Shape[0] values of Type.
	// Opened from a file, it is part of the read-only mapping: it must not
	// be written, and is valid only until Close.
	Data []byte
}

// Rows is the product of every dimension but the first (1 for a vector).
func (t *Tensor) Rows() int {
	n := 1
	for _, d := range t.Shape[1:] {
		n *= d
	}
	return n
}

// File is an open GGUF file. Its methods are safe for concurrent use;
// Close must not race with them.
type File struct {
	Version uint32
	// Metadata holds each key's value as a Go value of its GGUF type:
	// uint8, int8, uint16, int16, uint32, int32, float32, bool, string,
	// uint64, int64, float64, or for an array a slice of the element type
	// ([]string, []float32, []int32, ...; []any for arrays of arrays).
	Metadata map[string]any
	// Keys lists the metadata keys in file order.
	Keys []string
	// Alignment is the data alignment, general.alignment or 32.
	Alignment int

	tensors []Tensor
	byName  map[string]int
	mapping []byte
	unmap   func([]byte) error
	// pendingOffsets holds the infos' offsets from readTensorInfos until
	// placeTensors checks them.
	pendingOffsets []uint64
}

// Open maps the GGUF file at path and validates it.
func Open(path string) (*File, error) {
	data, unmap, err := mmap.File(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		_ = unmap(data)
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	f.unmap = unmap
	return f, nil
}

// Parse reads a GGUF file held in memory; the tensors' Data are slices of
// data.
func Parse(data []byte) (*File, error) {
	r := &reader{b: data}
	magic, err := r.take(4)
	if err != nil || string(magic) != Magic {
		return nil, errors.New("gguf: not a GGUF file (bad magic)")
	}
	f := &File{Metadata: map[string]any{}, byName: map[string]int{}, Alignment: DefaultAlignment, mapping: data}
	if f.Version, err = r.u32(); err != nil {
		return nil, err
	}
	if f.Version != 2 && f.Version != 3 {
		return nil, fmt.Errorf("gguf: version %d not supported (2 or 3)", f.Version)
	}
	nTensors, err := r.u64()
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64()
	if err != nil {
		return nil, err
	}
	// Each KV takes at least 12 bytes (key length, type), each tensor
	// info at least 24 (name length, dims, type, offset).
	if nKV > r.left()/12 || nTensors > r.left()/24 {
		return nil, fmt.Errorf("gguf: %d metadata keys and %d tensors cannot fit in %d bytes", nKV, nTensors, len(data))
	}
	if err := f.readMetadata(r, nKV); err != nil {
		return nil, err
	}
	if err := f.readTensorInfos(r, nTensors); err != nil {
		return nil, err
	}
	return f, f.placeTensors(data, r.off)
}

func (f *File) readMetadata(r *reader, n uint64) error {
	for range n {
		key, err := r.str()
		if err != nil {
			return err
		}
		if _, dup := f.Metadata[key]; dup {
			return fmt.Errorf("gguf: metadata key %q given twice", key)
		}
		t, err := r.u32()
		if err != nil {
			return err
		}
		v, err := r.value(ValueType(t), 0)
		if err != nil {
			return fmt.Errorf("gguf: metadata %q: %w", key, err)
		}
		f.Metadata[key] = v
		f.Keys = append(f.Keys, key)
	}
	if v, ok := f.Metadata["general.alignment"]; ok {
		a, ok := v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf: general.alignment %v is not a power of two (uint32)", v)
		}
		f.Alignment = int(a)
	}
	return nil
}

func (f *File) readTensorInfos(r *reader, n uint64) error {
	offs := make([]uint64, 0, n)
	for range n {
		name, err := r.str()
		if err != nil {
			return err
		}
		if name == "" || len(name) > MaxNameLen {
			return fmt.Errorf("gguf: tensor name %q is empty or over %d bytes", name, MaxNameLen)
		}
		if _, dup := f.byName[name]; dup {
			return fmt.Errorf("gguf: tensor %q given twice", name)
		}
		nd, err := r.u32()
		if err != nil {
			return err
		}
		if nd == 0 || nd > MaxDims {
			return fmt.Errorf("gguf: tensor %q has %d dimensions (1 to %d)", name, nd, MaxDims)
		}
		shape := make([]int, nd)
		for i := range shape {
			d, err := r.u64()
			if err != nil {
				return err
			}
			if d > maxDim {
				return fmt.Errorf("gguf: tensor %q dimension %d is %d, over %d", name, i, d, uint64(maxDim))
			}
			shape[i] = int(d)
		}
		typ, err := r.u32()
		if err != nil {
			return err
		}
		off, err := r.u64()
		if err != nil {
			return err
		}
		t := Tensor{Name: name, Type: quant.Type(typ), Shape: shape}
		if err := checkType(&t); err != nil {
			return err
		}
		f.byName[name] = len(f.tensors)
		f.tensors = append(f.tensors, t)
		offs = append(offs, off)
	}
	f.tensors = slices.Clip(f.tensors)
	f.pendingOffsets = offs
	return nil
}

// placeTensors checks each tensor's size and offset, as ggml does: the
// data section starts at the first aligned position after the infos, and
// tensor i sits where the padded sizes of tensors 0..i−1 end. It then
// points each Data into data.
func (f *File) placeTensors(data []byte, infoEnd int) error {
	align := uint64(f.Alignment)
	start := (uint64(infoEnd) + align - 1) / align * align
	var pos uint64
	for i := range f.tensors {
		t := &f.tensors[i]
		size, err := tensorBytes(t)
		if err != nil {
			return err
		}
		if off := f.pendingOffsets[i]; off != pos {
			return fmt.Errorf("gguf: tensor %q at offset %d, expected %d (tensors follow each other, %d-aligned)", t.Name, off, pos, align)
		}
		if start+pos+size > uint64(len(data)) || start+pos+size < start {
			return fmt.Errorf("gguf: tensor %q (%d bytes at %d) runs past the end of the %d-byte file", t.Name, size, start+pos, len(data))
		}
		b := start + pos
		t.Data = data[b : b+size : b+size]
		pos = (pos + size + align - 1) / align * align
	}
	f.pendingOffsets = nil
	return nil
}

// checkType refuses a tensor type this package does not read: Q8_K is
// only an activation format, and ggml's other types have no kernels here.
func checkType(t *Tensor) error {
	if !t.Type.Valid() || t.Type == quant.Q8_K {
		return fmt.Errorf("gguf: tensor %q has type %s; supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K", t.Name, t.Type)
	}
	return nil
}

// tensorBytes returns t's size: rows of Shape[0] values, which must be
// whole blocks of its type.
func tensorBytes(t *Tensor) (uint64, error) {
	row, err := t.Type.RowSize(t.Shape[0])
	if err != nil {
		return 0, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	size := uint64(row)
	for _, d := range t.Shape[1:] {
		hi, lo := bits.Mul64(size, uint64(d))
		if hi != 0 || lo > math.MaxInt64/2 {
			return 0, fmt.Errorf("gguf: tensor %q: shape %v overflows", t.Name, t.Shape)
		}
		size = lo
	}
	return size, nil
}

// Names returns the tensor names in file order.
func (f *File) Names() []string {
	names := make([]string, len(f.tensors))
	for i, t := range f.tensors {
		names[i] = t.Name
	}
	return names
}

// Tensor returns the named tensor and whether the file has it. Its Data
// is valid until Close.
func (f *File) Tensor(name string) (Tensor, bool) {
	i, ok := f.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return f.tensors[i], true
}

// String returns the string value of key, and whether it is one.
func (f *File) String(key string) (string, bool) {
	s, ok := f.Metadata[key].(string)
	return s, ok
}

// Uint returns key's value if it is a non-negative integer of any GGUF
// integer type (files disagree on uint32 versus int32 for counts).
func (f *File) Uint(key string) (uint64, bool) {
	switch v := f.Metadata[key].(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	case int8:
		return uint64(v), v >= 0
	case int16:
		return uint64(v), v >= 0
	case int32:
		return uint64(v), v >= 0
	case int64:
		return uint64(v), v >= 0
	}
	return 0, false
}

// Float returns key's value if it is a float32 or float64.
func (f *File) Float(key string) (float64, bool) {
	switch v := f.Metadata[key].(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// Resident moves the tensors' bytes from the file's mapping to a copy in
// huge pages of the process's own (mmap.Resident), where decoding reads
// them faster, and unmaps the file; tensors taken from f before must not
// be used afterwards. Close releases the copy.
func (f *File) Resident() error {
	data, unmap, err := mmap.Move(f.mapping, f.unmap, func(carry func([]byte) []byte) {
		for i := range f.tensors {
			f.tensors[i].Data = carry(f.tensors[i].Data)
		}
	})
	if data == nil {
		return fmt.Errorf("gguf: %w", err)
	}
	f.mapping, f.unmap = data, unmap
	return err
}

// Close unmaps the file; no tensor Data from it may be used afterwards.
// Closing twice, or closing a File from Parse, is harmless.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap(f.mapping)
	f.unmap, f.mapping, f.tensors, f.byName = nil, nil, nil, nil
	return err
}

// reader decodes GGUF's little-endian primitives, checking every length
// against the bytes left before allocating.
type reader struct {
	b   []byte
	off int
}

var errTruncated = errors.New("gguf: file truncated")

func (r *reader) left() uint64 { return uint64(len(r.b) - r.off) }

func (r *reader) take(n uint64) ([]byte, error) {
	if n > r.left() {
		return nil, errTruncated
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s, nil
}

func (r *reader) u32() (uint32, error) {
	b, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64() (uint64, error) {
	b, err := r.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (r *reader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	b, err := r.take(n)
	return string(b), err
}

// scalar decodes a fixed-size value of type t from b.
func scalar(t ValueType, b []byte) any {
	switch t {
	case TypeUint8:
		return b[0]
	case TypeInt8:
		return int8(b[0])
	case TypeBool:
		return b[0] != 0
	case TypeUint16:
		return binary.LittleEndian.Uint16(b)
	case TypeInt16:
		return int16(binary.LittleEndian.Uint16(b))
	case TypeUint32:
		return binary.LittleEndian.Uint32(b)
	case TypeInt32:
		return int32(binary.LittleEndian.Uint32(b))
	case TypeFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	case TypeUint64:
		return binary.LittleEndian.Uint64(b)
	case TypeInt64:
		return int64(binary.LittleEndian.Uint64(b))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

// value reads a value of type t; depth counts enclosing arrays.
func (r *reader) value(t ValueType, depth int) (any, error) {
	switch t {
	case TypeString:
		return r.str()
	case TypeArray:
		if depth >= maxArrayDepth {
			return nil, errors.New("arrays nested too deep")
		}
		et, err := r.u32()
		if err != nil {
			return nil, err
		}
		n, err := r.u64()
		if err != nil {
			return nil, err
		}
		return r.array(ValueType(et), n, depth)
	}
	size, ok := scalarSize[t]
	if !ok {
		return nil, fmt.Errorf("unknown value type %d", t)
	}
	b, err := r.take(size)
	if err != nil {
		return nil, err
	}
	return scalar(t, b), nil
}

// array reads n values of type et as a typed slice.
func (r *reader) array(et ValueType, n uint64, depth int) (any, error) {
	minSize, ok := scalarSize[et]
	if et == TypeString || et == TypeArray {
		minSize, ok = 8, true // a length, or an element type and a length
	}
	if !ok {
		return nil, fmt.Errorf("array of unknown value type %d", et)
	}
	if n > r.left()/minSize {
		return nil, errTruncated
	}
	switch et {
	case TypeString:
		out := make([]string, n)
		for i := range out {
			s, err := r.str()
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case TypeArray:
		out := make([]any, n)
		for i := range out {
			v, err := r.value(TypeArray, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	b, _ := r.take(n * minSize) // checked above
	le := binary.LittleEndian
	// Each array is decoded straight into a slice of its element type:
	// one element costs its size, with no value boxed on the way (a
	// 100 MB uint8 array takes 100 MB).
	switch et {
	case TypeUint8:
		return slices.Clone(b), nil
	case TypeInt8:
		return fill(b, 1, func(b []byte) int8 { return int8(b[0]) }), nil
	case TypeBool:
		return fill(b, 1, func(b []byte) bool { return b[0] != 0 }), nil
	case TypeUint16:
		return fill(b, 2, le.Uint16), nil
	case TypeInt16:
		return fill(b, 2, func(b []byte) int16 { return int16(le.Uint16(b)) }), nil
	case TypeUint32:
		return fill(b, 4, le.Uint32), nil
	case TypeInt32:
		return fill(b, 4, func(b []byte) int32 { return int32(le.Uint32(b)) }), nil
	case TypeFloat32:
		return fill(b, 4, func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) }), nil
	case TypeUint64:
		return fill(b, 8, le.Uint64), nil
	case TypeInt64:
		return fill(b, 8, func(b []byte) int64 { return int64(le.Uint64(b)) }), nil
	}
	return fill(b, 8, func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) }), nil
}

// fill decodes b as len(b)/size values, each by decode, into a []T.
func fill[T any](b []byte, size int, decode func([]byte) T) []T {
	out := make([]T, len(b)/size)
	for i := range out {
		out[i] = decode(b[i*size:])
	}
	return out
}
