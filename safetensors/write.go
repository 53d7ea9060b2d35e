package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// Write writes tensors, in the order given, and metadata (may be nil) as
// a safetensors file: the header padded with spaces to a multiple of 8
// bytes, as the reference writer does, then the tensors' Data back to
// back. It refuses an unknown dtype, a Data whose length is not the
// shape's, and a name used twice.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	head := map[string]any{}
	if len(metadata) > 0 {
		head["__metadata__"] = metadata
	}
	var off uint64
	for _, t := range tensors {
		size := DTypeSize(t.DType)
		if size == 0 {
			return fmt.Errorf("safetensors: tensor %q has unknown dtype %q", t.Name, t.DType)
		}
		if t.Name == "__metadata__" {
			return fmt.Errorf("safetensors: %q is reserved", t.Name)
		}
		if _, dup := head[t.Name]; dup {
			return fmt.Errorf("safetensors: tensor %q given twice", t.Name)
		}
		if t.Elements()*size != len(t.Data) {
			return fmt.Errorf("safetensors: tensor %q: shape %v of %s is %d bytes, Data has %d",
				t.Name, t.Shape, t.DType, t.Elements()*size, len(t.Data))
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		head[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []uint64{off, off + uint64(len(t.Data))}}
		off += uint64(len(t.Data))
	}
	js, err := json.Marshal(head) // maps marshal in key order: the same tensors give the same bytes
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	if _, err := w.Write(append(n[:], js...)); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("safetensors: %w", err)
		}
	}
	return nil
}
