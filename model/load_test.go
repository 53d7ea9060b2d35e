package model

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// TestLoadWhereWeightsLive: Load copies a GGUF file unless the CPU reads
// the bulk of it from packed copies of its own (Q8_0 under AVX-512 VNNI),
// and a Hugging Face folder (sharded here); LoadMapped always maps them;
// both give the same weights.
func TestLoadWhereWeightsLive(t *testing.T) {
	c := Config{Dim: 64, Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 40, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1}
	for _, typ := range []kernels.DType{kernels.F16, kernels.Q8_0} {
		path := filepath.Join(t.TempDir(), "m.gguf")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteGGUF(f, Random(c, 5), typ); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		copied, mapped := loadBoth(t, path)
		packs := typ == kernels.Q8_0 && quant.PacksQ8_0()
		checkMapped(t, typ.String()+" Load", copied, packs, path)
		checkMapped(t, typ.String()+" LoadMapped", mapped, true, path)
		if err := sameWeights(copied, mapped); err != nil {
			t.Errorf("%v: Load and LoadMapped: %v", typ, err)
		}
	}
	dir := writeHF(t, Random(c, 6), "LlamaForCausalLM", "BF16", true, nil)
	copied, mapped := loadBoth(t, dir)
	checkMapped(t, "folder Load", copied, false, dir)
	checkMapped(t, "folder LoadMapped", mapped, true, dir)
	if err := sameWeights(copied, mapped); err != nil {
		t.Errorf("folder: Load and LoadMapped: %v", err)
	}
}

// loadBoth loads path with Load and with LoadMapped, closing both when
// the test ends.
func loadBoth(t *testing.T, path string) (copied, mapped *Model) {
	t.Helper()
	var err error
	if copied, err = Load(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { copied.Close() })
	if mapped, err = LoadMapped(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mapped.Close() })
	return copied, mapped
}

// checkMapped fails the test unless m reports want from Mapped and, on
// Linux, its embedding's bytes lie in a mapping of a file under path when
// mapped, in anonymous memory (the copy) when not.
func checkMapped(t *testing.T, what string, m *Model, want bool, path string) {
	t.Helper()
	if m.Mapped() != want {
		t.Errorf("%s: Mapped %v, want %v", what, m.Mapped(), want)
	}
	if runtime.GOOS != "linux" {
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	addr := uint64(uintptr(unsafe.Pointer(&m.Embedding.Data[0])))
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		lo, hi, ok := strings.Cut(f[0], "-")
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || addr < l || addr >= h {
			continue
		}
		file := len(f) >= 6 && strings.HasPrefix(f[5], path)
		if file != want {
			t.Errorf("%s: the embedding lies in %q, want a mapping of %s: %v", what, line, path, want)
		}
		return
	}
	t.Errorf("%s: no mapping holds the embedding", what)
}
