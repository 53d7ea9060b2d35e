//go:build linux || darwin

package mmap

import (
	"path/filepath"
	"syscall"
	"testing"
)

func TestOpensRefuseFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	for name, open := range opens {
		if _, _, err := open(path); err == nil { // a blocking open would hang here
			t.Errorf("%s opened a FIFO", name)
		}
	}
}
