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

// TestResidentMove: Resident's copy holds the bytes, and Move carries
// views of a mapping over to it before unmapping the mapping.
func TestResidentMove(t *testing.T) {
	// Over a huge page and not a multiple of the base page, so a copy
	// shows a short last page or a misplaced start.
	data := bytes.Repeat([]byte("prefixd!"), 300_001)
	for i := range data {
		data[i] += byte(i / 4096)
	}
	cp, release, err := Resident(data)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if !bytes.Equal(cp, data) {
		t.Fatalf("the copy of %d bytes differs (%d bytes)", len(data), len(cp))
	}
	ranges := [][2]int{{0, 10}, {4093, 4099}, {100_000, 2_400_008}, {77, 77}}
	views := make([][]byte, len(ranges))
	for i, r := range ranges {
		views[i] = data[r[0]:r[1]]
	}
	unmapped := false
	moved, unmap, err := Move(data, func(b []byte) error { unmapped = &b[0] == &data[0]; return nil }, func(carry func([]byte) []byte) {
		for i := range views {
			views[i] = carry(views[i])
		}
	})
	if err != nil || !unmapped {
		t.Fatalf("Move: %v; the old bytes unmapped: %v", err, unmapped)
	}
	defer unmap(moved)
	for i, r := range ranges {
		v := views[i]
		if !bytes.Equal(v, data[r[0]:r[1]]) || cap(v) != len(v) || len(v) > 0 && &v[0] != &moved[r[0]] {
			t.Errorf("[%d:%d] moved to %d bytes (cap %d), not the same bytes of the copy", r[0], r[1], len(v), cap(v))
		}
	}
	if empty, release, err := Resident(nil); err != nil || len(empty) != 0 || release() != nil {
		t.Errorf("Resident(nil): %d bytes, %v", len(empty), err)
	}
}
