//go:build cgo && amd64

package emu

import (
	"fmt"
	"unsafe"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
)

// HostAlloc returns n bytes of host memory standing for a GPU's
// page-locked memory, the only memory ReadAsync copies into.
func (d *Device) HostAlloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("emu: host alloc of %d bytes", n)
	}
	if err := d.uncaptured("HostAlloc"); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	d.host = append(d.host, b)
	return b, nil
}

// HostFree releases memory from HostAlloc.
func (d *Device) HostFree(b []byte) error {
	if err := d.uncaptured("HostFree"); err != nil {
		return err
	}
	for i, h := range d.host {
		if len(b) > 0 && len(h) > 0 && &h[0] == &b[0] {
			d.host = append(d.host[:i], d.host[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("emu: host free of %d bytes not from HostAlloc", len(b))
}

// ReadAsync copies len(b) bytes at device address p into b, which must
// lie in memory from HostAlloc: on a GPU an asynchronous copy into
// pageable memory would not overlap anything, so the emulator refuses it
// to keep callers honest.
func (d *Device) ReadAsync(b []byte, p launch.Ptr) error {
	if len(b) == 0 {
		return nil
	}
	if err := d.uncaptured("ReadAsync"); err != nil {
		return err
	}
	if !d.pinned(b) {
		return fmt.Errorf("emu: asynchronous read of %d bytes into memory not from HostAlloc", len(b))
	}
	return d.Read(b, p)
}

// pinned says whether b lies inside one HostAlloc buffer.
func (d *Device) pinned(b []byte) bool {
	lo := uintptr(unsafe.Pointer(&b[0]))
	for _, h := range d.host {
		base := uintptr(unsafe.Pointer(&h[0]))
		if lo >= base && lo-base+uintptr(len(b)) <= uintptr(len(h)) {
			return true
		}
	}
	return false
}

// HostLive returns how many HostAlloc buffers are not yet freed.
func (d *Device) HostLive() int { return len(d.host) }
