//go:build cgo && amd64

package emu

/*
#cgo CXXFLAGS: -std=c++17 -O2 -fno-strict-aliasing
#include <stdint.h>
#include <stdlib.h>

int prefixd_emu_kernels(void);
const char *prefixd_emu_kernel_name(int i);
int prefixd_emu_launch(int dtype, const char *name, const unsigned *g, const unsigned *b, const uint64_t *args,
		       int nargs, int sched, char *err, int errlen);
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"unsafe"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// Schedule orders a thread block's threads between barriers.
type Schedule int

const (
	// Forward runs thread 0 first.
	Forward Schedule = 0
	// Reverse runs the last thread first.
	Reverse Schedule = 1
	// Shuffled (and any larger value, as a seed) shuffles the order at
	// every barrier.
	Shuffled Schedule = 2
)

// Device is an emulated GPU: kernels of one element type, memory in host
// mappings. It implements launch.Device and refuses, as a GPU would, a
// launch over launch.GPULimits or over a kernel's launch bounds. It is
// not safe for concurrent use.
type Device struct {
	dtype  src.DType
	sched  Schedule
	allocs map[launch.Ptr]mapping
	regs   map[string]int // AssumeRegisters
	host   [][]byte       // HostAlloc's buffers
	cap    capture        // BeginCapture's recording
	graphs int            // graphs made and not destroyed

	// Launch's and MatMulT's scratch, reused so that neither allocates
	// on the heap once warm (what cgo is handed escapes): the launch's
	// dimensions, its error message, and the product's float32 operands.
	dims       [6]C.uint
	msg        [256]C.char
	af, wf, yf []float32
}

// mapping is one allocation: the whole mapping, guard page included, and
// the bytes handed out.
type mapping struct{ m, buf []byte }

var _ launch.Device = (*Device)(nil)

// New returns a Device running the kernels of element type t under sched.
func New(t src.DType, sched Schedule) *Device {
	return &Device{dtype: t, sched: sched, allocs: map[launch.Ptr]mapping{}, regs: map[string]int{}}
}

// AssumeRegisters makes the Device check launches of kernel as if each
// of its threads used n registers (registers × threads must fit
// launch.GPULimits.MaxRegisters), as a GPU knows from the compiled code;
// the emulator does not compile for a GPU, so by default it checks only
// the kernel's launch bounds, which cap its registers on the GPU.
func (d *Device) AssumeRegisters(kernel string, n int) { d.regs[kernel] = n }

// DType implements launch.Device.
func (d *Device) DType() src.DType { return d.dtype }

// Kernels returns the names of the kernels the emulator was built with.
func Kernels() []string {
	var names []string
	for i := range int(C.prefixd_emu_kernels()) {
		names = append(names, C.GoString(C.prefixd_emu_kernel_name(C.int(i))))
	}
	return names
}

// Launch implements launch.Device: it checks the launch against
// launch.GPULimits and the kernel's launch bounds (an error wrapping
// launch.ErrLimits), then runs the kernel to the end on the calling
// thread, or records it while the Device captures a graph.
func (d *Device) Launch(kernel string, grid, block launch.Dim3, args ...uint64) error {
	k := launch.Kernel{MaxThreads: src.MaxThreads(kernel), Registers: d.regs[kernel]}
	if err := launch.GPULimits.Check(kernel, k, grid, block); err != nil {
		return fmt.Errorf("emu: %w", err)
	}
	if d.cap.on {
		// Checked as a launch is (the kernel exists), its parameters
		// copied as cuLaunchKernel copies them.
		if !slices.Contains(src.Kernels, kernel) {
			return fmt.Errorf("emu: no kernel %q", kernel)
		}
		d.record(call{kernel: kernel, grid: grid, block: block, args: slices.Clone(args)})
		return nil
	}
	dims, msg := &d.dims, &d.msg
	for i, v := range [...]int{grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z} {
		dims[i] = C.uint(v) // in range: Check passed
	}
	name := C.CString(kernel)
	defer C.free(unsafe.Pointer(name))
	var argp *C.uint64_t
	if len(args) > 0 {
		argp = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	if C.prefixd_emu_launch(C.int(d.dtype), name, &dims[0], &dims[3], argp, C.int(len(args)), C.int(d.sched),
		&msg[0], C.int(len(msg))) != 0 {
		return errors.New("emu: " + C.GoString(&msg[0]))
	}
	return nil
}

// Alloc returns n bytes of device memory, filled with 0xff bytes (NaN as
// floats) so that a kernel reading what nobody wrote shows it. The bytes
// end at a page that faults on access, so a kernel reading or writing past
// the end crashes the test instead of passing silently.
func (d *Device) Alloc(n int) (launch.Ptr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("emu: alloc of %d bytes", n)
	}
	if err := d.uncaptured("Alloc"); err != nil {
		return 0, err
	}
	page := os.Getpagesize()
	size := (n + page - 1) / page * page
	m, err := syscall.Mmap(-1, 0, size+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return 0, fmt.Errorf("emu: alloc of %d bytes: %w", n, err)
	}
	if err := syscall.Mprotect(m[size:], syscall.PROT_NONE); err != nil {
		syscall.Munmap(m)
		return 0, fmt.Errorf("emu: guard page: %w", err)
	}
	buf := m[size-n : size]
	for i := range buf {
		buf[i] = 0xff
	}
	p := launch.Ptr(uintptr(unsafe.Pointer(&buf[0])))
	d.allocs[p] = mapping{m, buf}
	return p, nil
}

// span returns the n bytes at p, which must lie in one allocation.
func (d *Device) span(p launch.Ptr, n int) ([]byte, error) {
	for base, a := range d.allocs {
		if p >= base && uint64(p-base)+uint64(n) <= uint64(len(a.buf)) {
			return a.buf[p-base:][:n], nil
		}
	}
	return nil, fmt.Errorf("emu: %d bytes at %#x are not in one allocation", n, uint64(p))
}

// Write copies b to device address p.
func (d *Device) Write(p launch.Ptr, b []byte) error {
	if err := d.uncaptured("Write"); err != nil {
		return err
	}
	dst, err := d.span(p, len(b))
	copy(dst, b)
	return err
}

// Read copies len(b) bytes at device address p into b.
func (d *Device) Read(b []byte, p launch.Ptr) error {
	if err := d.uncaptured("Read"); err != nil {
		return err
	}
	s, err := d.span(p, len(b))
	copy(b, s)
	return err
}

// Copy copies n bytes between device addresses, each range inside one
// allocation, as cuMemcpyDtoD does.
func (d *Device) Copy(dst, src launch.Ptr, n int) error {
	if err := d.uncaptured("Copy"); err != nil {
		return err
	}
	to, err1 := d.span(dst, n)
	from, err2 := d.span(src, n)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	copy(to, from)
	return nil
}

// Synchronize returns nil, outside a capture: every launch and copy has
// finished when its call returns.
func (d *Device) Synchronize() error { return d.uncaptured("Synchronize") }

// Free releases an allocation made by Alloc.
func (d *Device) Free(p launch.Ptr) error {
	if err := d.uncaptured("Free"); err != nil {
		return err
	}
	a, ok := d.allocs[p]
	if !ok {
		return fmt.Errorf("emu: free of %#x, not allocated", uint64(p))
	}
	delete(d.allocs, p)
	return syscall.Munmap(a.m)
}

// Close ends a capture in progress and frees every allocation still
// held.
func (d *Device) Close() error {
	d.cap = capture{}
	var errs []error
	for p := range d.allocs {
		errs = append(errs, d.Free(p))
	}
	return errors.Join(errs...)
}
