package gguf_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/gguf/gguftest"
	"github.com/prefixd/prefixd/kernels/quant"
)

// builder assembles a GGUF file by hand, independently of gguf.Write.
type builder struct{ b []byte }

func (w *builder) u32(v uint32) *builder { w.b = binary.LittleEndian.AppendUint32(w.b, v); return w }
func (w *builder) u64(v uint64) *builder { w.b = binary.LittleEndian.AppendUint64(w.b, v); return w }
func (w *builder) str(s string) *builder { w.u64(uint64(len(s))); w.b = append(w.b, s...); return w }
func (w *builder) raw(b ...byte) *builder {
	w.b = append(w.b, b...)
	return w
}
func (w *builder) padTo(n int) *builder {
	for len(w.b)%n != 0 {
		w.b = append(w.b, 0)
	}
	return w
}

// header starts a v3 file of nt tensors and nkv keys.
func header(nt, nkv uint64) *builder {
	w := &builder{}
	return w.raw('G', 'G', 'U', 'F').u32(3).u64(nt).u64(nkv)
}

// handFile is a file written byte by byte: three metadata keys and two
// tensors, a Q8_0 [32, 2] (68 bytes, padded to 96) and an F32 [4].
func handFile() []byte {
	w := header(2, 3)
	w.str("general.architecture").u32(8).str("llama")
	w.str("llama.block_count").u32(4).u32(2)
	w.str("scores").u32(9).u32(6).u64(2).u32(math.Float32bits(0.5)).u32(math.Float32bits(-1))
	w.str("w").u32(2).u64(32).u64(2).u32(8).u64(0)
	w.str("v").u32(1).u64(4).u32(0).u64(96)
	w.padTo(32)
	for r := range 2 {
		w.raw(0x00, 0x3c) // d = 1
		for i := range 32 {
			w.raw(byte(int8(i - 16*r)))
		}
	}
	w.padTo(32)
	for _, f := range []float32{1, 2, 3, 4} {
		w.u32(math.Float32bits(f))
	}
	return w.b
}

func TestHandBuilt(t *testing.T) {
	f, err := gguf.Parse(handFile())
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := f.String("general.architecture"); s != "llama" {
		t.Errorf("architecture %q", s)
	}
	if n, ok := f.Uint("llama.block_count"); !ok || n != 2 {
		t.Errorf("block_count %d %v", n, ok)
	}
	if got := f.Metadata["scores"]; !reflect.DeepEqual(got, []float32{0.5, -1}) {
		t.Errorf("scores %#v", got)
	}
	if !reflect.DeepEqual(f.Keys, []string{"general.architecture", "llama.block_count", "scores"}) {
		t.Errorf("keys %v", f.Keys)
	}
	w, ok := f.Tensor("w")
	if !ok || w.Type != quant.Q8_0 || !reflect.DeepEqual(w.Shape, []int{32, 2}) || w.Rows() != 2 || len(w.Data) != 68 {
		t.Fatalf("w = %s %v, %d bytes", w.Type, w.Shape, len(w.Data))
	}
	vals := make([]float32, 32)
	if err := quant.Dequantize(quant.Q8_0, vals, w.Data[34:]); err != nil || vals[0] != -16 || vals[31] != 15 {
		t.Errorf("w row 1 = %v, %v", vals, err)
	}
	v, _ := f.Tensor("v")
	if v.Type != quant.F32 || !bytes.Equal(v.Data, handFile()[len(handFile())-16:]) {
		t.Errorf("v = %s %x", v.Type, v.Data)
	}
	if !reflect.DeepEqual(f.Names(), []string{"w", "v"}) {
		t.Errorf("names %v", f.Names())
	}
}

// TestRealFile opens the llama.cpp-written F16 test model.
func TestRealFile(t *testing.T) {
	f, err := gguf.Open("../../shared/models/llama-2-tiny-random.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if s, _ := f.String("general.architecture"); s != "llama" {
		t.Errorf("architecture %q", s)
	}
	tokens, _ := f.Metadata["tokenizer.ggml.tokens"].([]string)
	if len(tokens) != 32000 {
		t.Errorf("%d tokens", len(tokens))
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || emb.Type != quant.F16 || !reflect.DeepEqual(emb.Shape, []int{8, 32000}) {
		t.Errorf("token_embd.weight = %v %s %v", ok, emb.Type, emb.Shape)
	}
}

func TestRoundTrip(t *testing.T) {
	types := []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0,
		quant.Q5_1, quant.Q4_K, quant.Q5_K, quant.Q6_K}
	var tensors []gguf.Tensor
	for i, typ := range types {
		tn, err := gguftest.Random(uint64(i), "t."+typ.String(), typ, 0.5, 256, 3)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, tn)
	}
	vec, _ := gguftest.Random(99, "norm", quant.F32, 1, 7)
	tensors = append(tensors, vec)
	meta := []gguf.KV{
		{"general.architecture", "llama"}, {"general.alignment", uint32(64)},
		{"u8", uint8(1)}, {"i8", int8(-1)}, {"u16", uint16(2)}, {"i16", int16(-2)}, {"i32", int32(-3)},
		{"f32", float32(0.25)}, {"b", true}, {"u64", uint64(1 << 40)}, {"i64", int64(-1 << 40)}, {"f64", 1e-300},
		{"strs", []string{"a", "", "ccc"}}, {"ints", []int32{1, -2}}, {"bytes", []uint8{9, 8}}, {"bools", []bool{true, false}},
		{"i8s", []int8{-128, 127}}, {"u16s", []uint16{65535, 1}}, {"i16s", []int16{-32768, 3}}, {"u32s", []uint32{1 << 31, 5}},
		{"f32s", []float32{-0.5, 3e38}}, {"u64s", []uint64{1 << 63, 7}}, {"i64s", []int64{-1 << 62, 9}}, {"f64s", []float64{1e300, -2}},
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguftest.WriteFile(path, meta, tensors); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Alignment != 64 {
		t.Errorf("alignment %d", f.Alignment)
	}
	for _, kv := range meta {
		if got := f.Metadata[kv.Key]; !reflect.DeepEqual(got, kv.Value) {
			t.Errorf("%s = %#v, want %#v", kv.Key, got, kv.Value)
		}
	}
	for _, want := range tensors {
		got, ok := f.Tensor(want.Name)
		if !ok || got.Type != want.Type || !reflect.DeepEqual(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("%s: got %s %v, want %s %v", want.Name, got.Type, got.Shape, want.Type, want.Shape)
		}
		if uintptr(len(got.Data)) > 0 && (uintptr(bytes.Index(mustRead(t, path), got.Data))%64 != 0) {
			t.Errorf("%s not 64-aligned in the file", want.Name)
		}
	}
	if _, ok := f.Tensor("nope"); ok {
		t.Error("found a tensor the file does not have")
	}
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// badFiles must be refused, each with the words its error must contain.
func badFiles() []struct {
	name string
	data []byte
	want string
} {
	oneTensor := func(nd uint32, dims []uint64, typ uint32, off uint64, data int) []byte {
		w := header(1, 0).str("t").u32(nd)
		for _, d := range dims {
			w.u64(d)
		}
		w.u32(typ).u64(off).padTo(32)
		return append(w.b, make([]byte, data)...)
	}
	return []struct {
		name string
		data []byte
		want string
	}{
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), "bad magic"},
		{"version 1", (&builder{}).raw('G', 'G', 'U', 'F').u32(1).b, "version 1"},
		{"truncated", handFile()[:90], "truncated"},
		{"huge counts", header(1<<40, 1<<40).b, "cannot fit"},
		{"duplicate key", header(0, 2).str("a").u32(4).u32(1).str("a").u32(4).u32(1).b, "given twice"},
		{"unknown value type", header(0, 1).str("a").u32(13).u32(1).b, "unknown value type 13"},
		{"array of unknown", header(0, 1).str("a").u32(9).u32(77).u64(1).b, "unknown value type 77"},
		{"array too long", header(0, 1).str("a").u32(9).u32(4).u64(1 << 60).b, "truncated"},
		{"nested arrays", header(0, 1).str("a").u32(9).u32(9).u64(1).u32(9).u64(1).u32(9).u64(1).u32(4).u64(0).b, "nested too deep"},
		{"bad alignment", header(0, 1).str("general.alignment").u32(4).u32(24).b, "power of two"},
		{"alignment type", header(0, 1).str("general.alignment").u32(5).u32(32).b, "power of two"},
		{"Q8_K tensor", oneTensor(1, []uint64{256}, 15, 0, 292), "type Q8_K"},
		{"removed type", oneTensor(1, []uint64{32}, 4, 0, 20), "type(4)"},
		{"no dims", oneTensor(0, nil, 0, 0, 0), "0 dimensions"},
		{"five dims", oneTensor(5, []uint64{1, 1, 1, 1, 1}, 0, 0, 4), "5 dimensions"},
		{"partial block", oneTensor(1, []uint64{33}, 8, 0, 68), "whole blocks"},
		{"wrong offset", oneTensor(1, []uint64{4}, 0, 32, 64), "expected 0"},
		{"past end", oneTensor(2, []uint64{4, 4}, 0, 0, 63), "past the end"},
		{"huge dim", oneTensor(2, []uint64{4, 1 << 50}, 0, 0, 0), "over"},
		{"overflow", oneTensor(4, []uint64{1 << 39, 1 << 39, 1 << 39, 1 << 39}, 0, 0, 0), "overflows"},
		{"empty name", header(1, 0).str("").u32(1).u64(1).u32(0).u64(0).b, "empty"},
		{"duplicate tensor", header(2, 0).str("t").u32(1).u64(1).u32(0).u64(0).str("t").u32(1).u64(1).u32(0).u64(32).padTo(32).raw(make([]byte, 36)...).b, "given twice"},
	}
}

func TestBadFiles(t *testing.T) {
	for _, c := range badFiles() {
		t.Run(c.name, func(t *testing.T) {
			_, err := gguf.Parse(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	var buf bytes.Buffer
	ok := gguf.Tensor{Name: "t", Type: quant.F32, Shape: []int{1}, Data: make([]byte, 4)}
	for name, c := range map[string]struct {
		meta []gguf.KV
		ts   []gguf.Tensor
	}{
		"value type":  {[]gguf.KV{{"a", struct{}{}}}, nil},
		"alignment":   {[]gguf.KV{{"general.alignment", uint32(3)}}, nil},
		"short data":  {nil, []gguf.Tensor{{Name: "t", Type: quant.F32, Shape: []int{2}, Data: make([]byte, 4)}}},
		"no shape":    {nil, []gguf.Tensor{{Name: "t", Type: quant.F32, Data: make([]byte, 4)}}},
		"bad block":   {nil, []gguf.Tensor{{Name: "t", Type: quant.Q4_K, Shape: []int{32}, Data: make([]byte, 18)}}},
		"Q8_K":        {nil, []gguf.Tensor{{Name: "t", Type: quant.Q8_K, Shape: []int{256}, Data: make([]byte, 292)}}},
		"fine (ctrl)": {nil, []gguf.Tensor{ok}},
	} {
		err := gguf.Write(&buf, c.meta, c.ts)
		if (err == nil) != (name == "fine (ctrl)") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

// FuzzParse feeds arbitrary files to the parser: it must return an error
// or tensors whose Data is exactly their shape's bytes.
func FuzzParse(f *testing.F) {
	f.Add(handFile())
	for _, c := range badFiles() {
		f.Add(c.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.Parse(data)
		if err != nil {
			return
		}
		for _, name := range file.Names() {
			tn, _ := file.Tensor(name)
			rs, err := tn.Type.RowSize(tn.Shape[0])
			if err != nil || len(tn.Data) != rs*tn.Rows() {
				t.Fatalf("%s: %d bytes for %s %v (%v)", name, len(tn.Data), tn.Type, tn.Shape, err)
			}
		}
	})
}

// TestMatMulOnMappedTensors multiplies by weights straight from the file
// mapping, in every type: the reader's tensors are what kernels/quant
// takes (a [in, out] tensor is out rows of in values), with no copy.
func TestMatMulOnMappedTensors(t *testing.T) {
	const in, out = 512, 3
	var tensors []gguf.Tensor
	for i, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1,
		quant.Q5_0, quant.Q5_1, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		tn, err := gguftest.Random(uint64(100+i), typ.String(), typ, 1, in, out)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, tn)
	}
	path := filepath.Join(t.TempDir(), "w.gguf")
	if err := gguftest.WriteFile(path, nil, tensors); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x := make([]float32, in)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	m := quant.NewMultiplier(nil)
	for _, name := range f.Names() {
		tn, _ := f.Tensor(name)
		got := make([]float32, out)
		if err := m.MatMul(got, x, tn.Data, tn.Type, 1, tn.Shape[1], tn.Shape[0]); err != nil {
			t.Fatal(err)
		}
		rs, _ := tn.Type.RowSize(in)
		row := make([]float32, in)
		for o := range out {
			if err := quant.Dequantize(tn.Type, row, tn.Data[o*rs:(o+1)*rs]); err != nil {
				t.Fatal(err)
			}
			var want, mag float64
			for i := range row {
				want += float64(row[i]) * float64(x[i])
				mag += math.Abs(float64(row[i]))
			}
			// x's values are integers within ±3: the 8-bit activation
			// blocks hold them to within 3/254 each.
			if math.Abs(float64(got[o])-want) > mag*3/254+1e-3 {
				t.Errorf("%s row %d: %v, want %v", name, o, got[o], want)
			}
		}
	}
}

// TestArrayHeap: a metadata array costs its elements' size on the heap.
// Each element used to be decoded through an interface value (an array of
// float32 allocated a box per element); a 100 MB array must not cost GBs.
// The bound is on bytes allocated while parsing, which bounds the peak.
func TestArrayHeap(t *testing.T) {
	const n = 10 << 20
	big := make([]uint8, n)
	for i := range big {
		big[i] = uint8(i*7 + i>>9)
	}
	floats := make([]float32, n/4)
	for i := range floats {
		floats[i] = float32(i) + 0.5
	}
	var buf bytes.Buffer
	meta := []gguf.KV{{"general.architecture", "llama"}, {"junk.bytes", big}, {"junk.floats", floats}}
	if err := gguf.Write(&buf, meta, nil); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f, err := gguf.Parse(data)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	elements := uint64(len(big) + len(floats))
	payload := uint64(len(big) + 4*len(floats))
	if got := after.TotalAlloc - before.TotalAlloc; got > payload+payload/4 {
		t.Errorf("parsing %d array elements (%d bytes) allocated %d bytes, %.2f per element", elements, payload, got, float64(got)/float64(elements))
	}
	if !reflect.DeepEqual(f.Metadata["junk.bytes"], big) || !reflect.DeepEqual(f.Metadata["junk.floats"], floats) {
		t.Error("arrays do not round-trip")
	}
}
