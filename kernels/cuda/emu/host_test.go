//go:build cgo && amd64

package emu

import (
	"slices"
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// TestReadAsync checks that ReadAsync copies into HostAlloc's memory,
// anywhere inside a buffer, and refuses pageable memory and a buffer
// that HostFree has released, as the GPU path's contract says.
func TestReadAsync(t *testing.T) {
	d := New(src.F32, Forward)
	defer d.Close()
	p, err := d.Alloc(8)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	if err := d.Write(p, want); err != nil {
		t.Fatal(err)
	}
	h, err := d.HostAlloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.ReadAsync(h[4:12], p); err != nil || !slices.Equal(h[4:12], want) {
		t.Fatalf("ReadAsync into pinned memory: %v, %v", err, h[4:12])
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := d.ReadAsync(h[12:], p); err != nil {
		t.Errorf("ReadAsync of a buffer's last 4 bytes: %v", err)
	}
	if err := d.ReadAsync(make([]byte, 8), p); err == nil {
		t.Error("ReadAsync into pageable memory succeeded")
	}
	if err := d.HostFree(h); err != nil || d.HostLive() != 0 {
		t.Fatalf("HostFree: %v, %d left", err, d.HostLive())
	}
	if err := d.ReadAsync(h[:8], p); err == nil {
		t.Error("ReadAsync into freed host memory succeeded")
	}
	if err := d.HostFree(h); err == nil {
		t.Error("a second HostFree succeeded")
	}
}
