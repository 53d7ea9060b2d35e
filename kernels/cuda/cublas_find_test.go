package cuda

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCuBLASCandidates lays out cuBLAS files where machines keep them (a
// CUDA toolkit, the ldconfig cache, pip's nvidia-cublas wheel, torch's
// lib, a virtual environment) and checks the order they are tried in:
// newest major version first, each version's bare name before its files,
// and a file reached twice listed once.
func TestCuBLASCandidates(t *testing.T) {
	root := t.TempDir()
	files := []string{
		"usr/local/cuda-13.0/lib64/libcublas.so.13.0.0",
		"usr/local/lib/python3.12/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		"usr/local/lib/python3.12/dist-packages/torch/lib/libcublas.so.12",
		"venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.11",
		"usr/lib/x86_64-linux-gnu/libcublas.so.11.11.3.6",
		"usr/local/cuda-13.0/lib64/libcublasLt.so.13", // not cuBLAS itself
	}
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The toolkit's soname link, and /usr/local/cuda pointing at it.
	if err := os.Symlink("libcublas.so.13.0.0", filepath.Join(root, "usr/local/cuda-13.0/lib64/libcublas.so.13")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("cuda-13.0", filepath.Join(root, "usr/local/cuda")); err != nil {
		t.Fatal(err)
	}
	ldconfig := "4 libs found in cache `/etc/ld.so.cache'\n" +
		"\tlibcublas.so.11 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcublas.so.11.11.3.6\n" +
		"\tlibcublasLt.so.11 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcublasLt.so.11\n" +
		"\tlibcublas.so.11 (libc6) => /usr/lib32/libcublas.so.11\n"
	env := map[string]string{"VIRTUAL_ENV": "/venv"}
	got := cublasCandidates(ldconfig, root, func(v string) string { return env[v] })
	for i := range got {
		got[i] = strings.TrimPrefix(got[i], root+"/")
	}
	want := []string{
		"libcublas.so.13",
		"usr/local/cuda/lib64/libcublas.so.13", // the toolkit's other paths are this file
		"libcublas.so.12",
		"usr/local/lib/python3.12/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		"usr/local/lib/python3.12/dist-packages/torch/lib/libcublas.so.12",
		"libcublas.so.11",
		"usr/lib/x86_64-linux-gnu/libcublas.so.11.11.3.6",
		"venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.11",
	}
	if !slices.Equal(got, want) {
		t.Errorf("candidates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
