package mmap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// opens are the package's two ways into a file, which must agree on
// everything but where the bytes live.
var opens = map[string]func(string) ([]byte, func([]byte) error, error){"File": File, "Resident": Resident}

func TestOpens(t *testing.T) {
	dir := t.TempDir()
	// Over a huge page and not a multiple of the base page, so a copy
	// shows a short last page or a misplaced start.
	want := bytes.Repeat([]byte("prefixd"), 300_001)
	for name, open := range opens {
		for file, content := range map[string][]byte{"data": want, "empty": nil} {
			path := filepath.Join(dir, file)
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			got, unmap, err := open(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, content) {
				t.Errorf("%s %s: read %d bytes, want %d", name, file, len(got), len(content))
			}
			if err := unmap(got); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := open(filepath.Join(dir, "missing")); err == nil {
			t.Errorf("%s opened a missing file", name)
		}
		if _, _, err := open(dir); err == nil {
			t.Errorf("%s opened a folder", name)
		}
	}
}
