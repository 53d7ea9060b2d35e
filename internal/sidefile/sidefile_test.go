package sidefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadDevZero: a side file linked to /dev/zero is refused at once,
// not read until memory runs out.
func TestReadDevZero(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	link := filepath.Join(t.TempDir(), "config.json")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Skip(err)
	}
	_, err := Read(link, MiB)
	if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("err %v: want a refusal naming %s", err, link)
	}
}

// TestReadPipe: a named pipe is refused without waiting for a writer.
func TestReadPipe(t *testing.T) {
	pipe := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Skip(err)
	}
	if _, err := Read(pipe, MiB); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("err %v", err)
	}
}

func TestReadLimit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	os.WriteFile(path, make([]byte, 2*KiB+1), 0o600)
	_, err := Read(path, 2*KiB)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "larger than 2 KiB") {
		t.Fatalf("err %v", err)
	}
	if b, err := Read(path, 2*KiB+1); err != nil || len(b) != 2*KiB+1 {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	if _, err := Read(filepath.Join(dir, "none"), 1); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := Read(dir, MiB); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{64 * MiB: "64 MiB", KiB: "1 KiB", 100: "100 bytes", MiB + 1: "1048577 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
