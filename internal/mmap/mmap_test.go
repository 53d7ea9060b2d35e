package mmap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestFile(t *testing.T) {
	dir := t.TempDir()
	want := bytes.Repeat([]byte("prefixd"), 3000)
	for name, content := range map[string][]byte{"data": want, "empty": nil} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		got, unmap, err := File(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, content) {
			t.Errorf("%s: mapped %d bytes, want %d", name, len(got), len(content))
		}
		if err := unmap(got); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := File(filepath.Join(dir, "missing")); err == nil {
		t.Error("mapped a missing file")
	}
}
