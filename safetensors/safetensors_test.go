package safetensors_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/safetensors"
	"github.com/prefixd/prefixd/safetensors/safetensorstest"
)

// file builds a safetensors file from a JSON header and dataLen zero bytes
// of tensor data.
func file(js string, dataLen int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	return append(append(b, js...), make([]byte, dataLen)...)
}

// TestHandWritten reads a file written out by hand: a 2×2 F32 tensor then
// a BF16 scalar, with metadata, header padded with spaces.
func TestHandWritten(t *testing.T) {
	js := `{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},` +
		`"s":{"dtype":"BF16","shape":[],"data_offsets":[16,18]}}   `
	data := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	data = append(data, js...)
	data = append(data, 0, 0, 0xc0, 0x3f, 0, 0, 0, 0xc0, 0, 0, 0x80, 0x3f, 0, 0, 0x20, 0x41) // 1.5 -2 1 10
	data = append(data, 0x80, 0x3f)                                                          // bf16 1.0
	f, err := safetensors.FromBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Names(); !reflect.DeepEqual(got, []string{"s", "w"}) {
		t.Errorf("Names() = %v", got)
	}
	w, ok := f.Tensor("w")
	if !ok || w.DType != "F32" || !reflect.DeepEqual(w.Shape, []int{2, 2}) || w.Elements() != 4 ||
		!bytes.Equal(w.Data, data[8+len(js):8+len(js)+16]) {
		t.Errorf("w = %+v, %v", w, ok)
	}
	s, _ := f.Tensor("s")
	if s.DType != "BF16" || len(s.Shape) != 0 || s.Elements() != 1 || !bytes.Equal(s.Data, []byte{0x80, 0x3f}) {
		t.Errorf("s = %+v", s)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata = %v", f.Metadata)
	}
	if _, ok := f.Tensor("missing"); ok {
		t.Error("found a tensor the file does not have")
	}
}

// badFiles are headers every reader must refuse, each with the words its
// error must contain.
var badFiles = []struct {
	name string
	data []byte
	want string
}{
	{"empty", nil, "shorter than"},
	{"length past end", binary.LittleEndian.AppendUint64(nil, 100), "past the end"},
	{"length over limit", binary.LittleEndian.AppendUint64(nil, 1<<40), "over the"},
	{"not JSON", file(`nope`, 0), "not a JSON object"},
	{"array", file(`[1]`, 0), "not a JSON object"},
	{"truncated JSON", file(`{"a":{"dtype":"F32"`, 0), "unexpected EOF"},
	{"trailing JSON", file(`{} {}`, 0), "after the header"},
	{"unknown dtype", file(`{"a":{"dtype":"F17","shape":[1],"data_offsets":[0,4]}}`, 4), `unknown dtype "F17"`},
	{"no dtype", file(`{"a":{"shape":[1],"data_offsets":[0,4]}}`, 4), "no dtype"},
	{"null tensor", file(`{"a":null}`, 0), "no dtype"},
	{"no shape", file(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, 4), "no shape"},
	{"unknown field", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, 4), "unknown field"},
	{"size mismatch", file(`{"a":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}}`, 4), "is 6 bytes, data_offsets give 4"},
	{"negative dim", file(`{"a":{"dtype":"F16","shape":[-1],"data_offsets":[0,0]}}`, 0), "negative dimension"},
	{"overflow", file(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0), "overflows"},
	{"offsets reversed", file(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`, 4), "outside"},
	{"offsets past data", file(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, 4), "outside the 4-byte"},
	{"three offsets", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, 2), "[begin, end]"},
	{"overlap", file(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}`, 6), "overlaps"},
	{"hole", file(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`, 4), "unclaimed"},
	{"short cover", file(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 4), "cover 2 bytes of the 4"},
	{"duplicate", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), `names "a" twice`},
	{"metadata not strings", file(`{"__metadata__":{"n":1}}`, 0), "__metadata__"},
}

func TestBadFiles(t *testing.T) {
	for _, c := range badFiles {
		t.Run(c.name, func(t *testing.T) {
			_, err := safetensors.FromBytes(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// FuzzHeader feeds arbitrary files to the reader: it must return an error
// or tensors whose Data is exactly their shape's bytes, inside the file.
func FuzzHeader(f *testing.F) {
	for _, c := range badFiles {
		f.Add(c.data)
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, []safetensors.Tensor{
		safetensorstest.Random(1, "a", "BF16", 1, 2, 3), safetensorstest.Random(2, "b", "F32", 1, 4),
	}, map[string]string{"format": "pt"}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := safetensors.FromBytes(data)
		if err != nil {
			return
		}
		total := 0
		for _, name := range file.Names() {
			tn, _ := file.Tensor(name)
			if len(tn.Data) != tn.Elements()*safetensors.DTypeSize(tn.DType) {
				t.Fatalf("%s: %d bytes for shape %v of %s", name, len(tn.Data), tn.Shape, tn.DType)
			}
			total += len(tn.Data)
		}
		if total > len(data) {
			t.Fatalf("tensors hold %d bytes of a %d-byte file", total, len(data))
		}
	})
}

func randomTensors() []safetensors.Tensor {
	return []safetensors.Tensor{
		safetensorstest.Random(1, "model.embed_tokens.weight", "BF16", 0.02, 64, 16),
		safetensorstest.Random(2, "model.layers.0.self_attn.q_proj.weight", "F16", 0.1, 16, 16),
		safetensorstest.Random(3, "model.layers.0.input_layernorm.weight", "F32", 1, 16),
		safetensorstest.Random(4, "model.norm.weight", "BF16", 1, 16),
		safetensorstest.Random(5, "lm_head.weight", "F16", 0.02, 64, 16),
	}
}

func checkTensors(t *testing.T, want []safetensors.Tensor, get func(string) (safetensors.Tensor, bool), names []string) {
	t.Helper()
	if len(names) != len(want) {
		t.Fatalf("%d tensors, want %d", len(names), len(want))
	}
	for _, w := range want {
		g, ok := get(w.Name)
		if !ok || g.DType != w.DType || !reflect.DeepEqual(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%s: got %s %v (%d bytes, found %v), want %s %v", w.Name, g.DType, g.Shape, len(g.Data), ok, w.DType, w.Shape)
		}
	}
}

func TestRoundTripFile(t *testing.T) {
	want := randomTensors()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := safetensorstest.WriteFile(path, want, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	checkTensors(t, want, f.Tensor, f.Names())
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", f.Metadata)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// The same seed gives the same bytes.
	if a, b := safetensorstest.Random(7, "x", "BF16", 1, 8), safetensorstest.Random(7, "x", "BF16", 1, 8); !bytes.Equal(a.Data, b.Data) {
		t.Error("Random is not deterministic")
	}
}

func TestOpenDir(t *testing.T) {
	want := randomTensors()
	single := t.TempDir()
	if err := safetensorstest.WriteFile(filepath.Join(single, safetensors.SingleFile), want, nil); err != nil {
		t.Fatal(err)
	}
	sharded := t.TempDir()
	if err := safetensorstest.WriteSharded(sharded, want, 2); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{single, sharded} {
		m, err := safetensors.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		checkTensors(t, want, m.Tensor, m.Names())
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if m, _ := safetensors.OpenDir(sharded); m.Metadata()["format"] != "pt" {
		t.Errorf("sharded metadata %v", m.Metadata())
	}
}

func TestOpenDirErrors(t *testing.T) {
	want := randomTensors()
	for _, c := range []struct {
		name, index, err string
	}{
		{"missing tensor", `{"weight_map":{"nope":"model-00001-of-00003.safetensors"}}`, "does not hold it"},
		{"unlisted tensor", `{"weight_map":{"model.embed_tokens.weight":"model-00001-of-00003.safetensors"}}`, "does not map to it"},
		{"escape", `{"weight_map":{"a":"../model-00001-of-00003.safetensors"}}`, "not a file name"},
		{"missing shard", `{"weight_map":{"a":"gone.safetensors"}}`, "gone.safetensors"},
		{"no weight_map", `{"metadata":{}}`, "no weight_map"},
		{"bad JSON", `{"weight_map":`, "index.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := safetensorstest.WriteSharded(dir, want, 2); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, safetensors.IndexFile), []byte(c.index), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := safetensors.OpenDir(dir); err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want one containing %q", err, c.err)
			}
		})
	}
	if _, err := safetensors.OpenDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("empty folder: %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	var buf bytes.Buffer
	for name, ts := range map[string][]safetensors.Tensor{
		"bad dtype": {{Name: "a", DType: "F7", Shape: []int{1}, Data: []byte{0}}},
		"bad size":  {{Name: "a", DType: "F32", Shape: []int{2}, Data: []byte{0, 0, 0, 0}}},
		"twice":     {{Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{0}}, {Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{0}}},
		"reserved":  {{Name: "__metadata__", DType: "U8", Shape: []int{1}, Data: []byte{0}}},
	} {
		if err := safetensors.Write(&buf, ts, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
