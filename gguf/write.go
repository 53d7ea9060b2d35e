package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// KV is one metadata entry for Write.
type KV struct {
	Key string
	// Value is a Go value of a GGUF type, as File.Metadata holds them:
	// uint8 ... float64, bool, string, or a slice of one of them.
	Value any
}

// Write writes a GGUF v3 file: metadata in the order given, then the
// tensor infos and the tensors, each padded to the alignment
// (general.alignment if meta sets it as a uint32, else 32). It refuses
// what Parse would: a value of no GGUF type, a tensor type Parse does not
// read, a tensor whose Data is not its shape's size.
func Write(w io.Writer, meta []KV, tensors []Tensor) error {
	align := uint64(DefaultAlignment)
	for _, kv := range meta {
		if a, ok := kv.Value.(uint32); ok && kv.Key == "general.alignment" {
			if a == 0 || a&(a-1) != 0 {
				return fmt.Errorf("gguf: general.alignment %d is not a power of two", a)
			}
			align = uint64(a)
		}
	}
	bw := &countWriter{w: bufio.NewWriter(w)}
	bw.raw([]byte(Magic))
	bw.u32(3)
	bw.u64(uint64(len(tensors)))
	bw.u64(uint64(len(meta)))
	for _, kv := range meta {
		bw.str(kv.Key)
		if err := bw.value(kv.Value, true); err != nil {
			return fmt.Errorf("gguf: metadata %q: %w", kv.Key, err)
		}
	}
	var off uint64
	for i := range tensors {
		t := &tensors[i]
		if len(t.Shape) == 0 || len(t.Shape) > MaxDims {
			return fmt.Errorf("gguf: tensor %q has %d dimensions", t.Name, len(t.Shape))
		}
		if err := checkType(t); err != nil {
			return err
		}
		size, err := tensorBytes(t)
		if err != nil {
			return err
		}
		if size != uint64(len(t.Data)) {
			return fmt.Errorf("gguf: tensor %q: shape %v of %s is %d bytes, Data has %d", t.Name, t.Shape, t.Type, size, len(t.Data))
		}
		bw.str(t.Name)
		bw.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			bw.u64(uint64(d))
		}
		bw.u32(uint32(t.Type))
		bw.u64(off)
		off = (off + size + align - 1) / align * align
	}
	bw.pad(align)
	for _, t := range tensors {
		bw.raw(t.Data)
		bw.pad(align)
	}
	if bw.err != nil {
		return fmt.Errorf("gguf: %w", bw.err)
	}
	if err := bw.w.Flush(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// countWriter writes little-endian primitives, counting bytes for the
// padding and keeping the first error.
type countWriter struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (c *countWriter) raw(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
		c.n += uint64(len(b))
	}
}

func (c *countWriter) u32(v uint32) { c.raw(binary.LittleEndian.AppendUint32(nil, v)) }
func (c *countWriter) u64(v uint64) { c.raw(binary.LittleEndian.AppendUint64(nil, v)) }

func (c *countWriter) str(s string) {
	c.u64(uint64(len(s)))
	c.raw([]byte(s))
}

func (c *countWriter) pad(align uint64) {
	if r := c.n % align; r != 0 {
		c.raw(make([]byte, align-r))
	}
}

// value writes v, preceded by its type when typed is set (array elements
// share the array's element type instead).
func (c *countWriter) value(v any, typed bool) error {
	tag := func(t ValueType) {
		if typed {
			c.u32(uint32(t))
		}
	}
	switch v := v.(type) {
	case uint8:
		tag(TypeUint8)
		c.raw([]byte{v})
	case int8:
		tag(TypeInt8)
		c.raw([]byte{byte(v)})
	case bool:
		tag(TypeBool)
		b := byte(0)
		if v {
			b = 1
		}
		c.raw([]byte{b})
	case uint16:
		tag(TypeUint16)
		c.raw(binary.LittleEndian.AppendUint16(nil, v))
	case int16:
		tag(TypeInt16)
		c.raw(binary.LittleEndian.AppendUint16(nil, uint16(v)))
	case uint32:
		tag(TypeUint32)
		c.u32(v)
	case int32:
		tag(TypeInt32)
		c.u32(uint32(v))
	case float32:
		tag(TypeFloat32)
		c.u32(math.Float32bits(v))
	case uint64:
		tag(TypeUint64)
		c.u64(v)
	case int64:
		tag(TypeInt64)
		c.u64(uint64(v))
	case float64:
		tag(TypeFloat64)
		c.u64(math.Float64bits(v))
	case string:
		tag(TypeString)
		c.str(v)
	case []uint8:
		return writeArray(c, typed, TypeUint8, v)
	case []int8:
		return writeArray(c, typed, TypeInt8, v)
	case []bool:
		return writeArray(c, typed, TypeBool, v)
	case []uint16:
		return writeArray(c, typed, TypeUint16, v)
	case []int16:
		return writeArray(c, typed, TypeInt16, v)
	case []uint32:
		return writeArray(c, typed, TypeUint32, v)
	case []int32:
		return writeArray(c, typed, TypeInt32, v)
	case []float32:
		return writeArray(c, typed, TypeFloat32, v)
	case []uint64:
		return writeArray(c, typed, TypeUint64, v)
	case []int64:
		return writeArray(c, typed, TypeInt64, v)
	case []float64:
		return writeArray(c, typed, TypeFloat64, v)
	case []string:
		return writeArray(c, typed, TypeString, v)
	default:
		return fmt.Errorf("%T is no GGUF value type", v)
	}
	return nil
}

func writeArray[T any](c *countWriter, typed bool, et ValueType, vs []T) error {
	if typed {
		c.u32(uint32(TypeArray))
	}
	c.u32(uint32(et))
	c.u64(uint64(len(vs)))
	for _, v := range vs {
		if err := c.value(v, false); err != nil {
			return err
		}
	}
	return nil
}
