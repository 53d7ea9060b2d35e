//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// ErrClosed means the Device has been closed.
var ErrClosed = errors.New("cuda: device closed")

// Config selects a GPU and the kernels' element type.
type Config struct {
	// Ordinal is the GPU's index, 0 for the first.
	Ordinal int
	// DType is the element type of K/V blocks, weights and matrix-product
	// inputs; the zero value is bf16.
	DType src.DType
}

// Device is one GPU with prefixd's kernels loaded. Its CUDA context lives
// on one OS thread, locked for the Device's life, and every CUDA call runs
// there: Do hands that thread a function. Device is safe for concurrent
// use; calls run one at a time, in the order they arrive.
type Device struct {
	mu     sync.Mutex // guards closed and sends on work
	closed bool
	work   chan *request
	done   chan struct{}

	dtype  src.DType
	arch   string
	sms    int
	limits launch.Limits // from the device's attributes
	// Owned by the device thread:
	ctx    cu.CUContext
	stream cu.Stream // every launch and product; graphs are captured from it
	mod    cu.Module
	fns    map[string]kernel
	exec   Exec
	blas   blas
	live   int // allocations made by Alloc and not yet freed
}

// kernel is a loaded kernel with what it allows at launch.
type kernel struct {
	fn cu.Function
	k  launch.Kernel
}

var _ launch.Device = (*Device)(nil)

// Open creates a context on the GPU, compiles the kernels for its
// architecture with NVRTC and loads them. The GPU needs compute capability
// 8.0 or later (bf16 conversions).
func Open(cfg Config) (*Device, error) {
	if _, err := src.ParseDType(cfg.DType.String()); err != nil {
		return nil, err
	}
	d := &Device{work: make(chan *request), done: make(chan struct{}), dtype: cfg.DType, fns: map[string]kernel{}}
	d.exec.d = d
	started := make(chan error)
	go d.loop(cfg.Ordinal, started)
	if err := <-started; err != nil {
		return nil, err
	}
	return d, nil
}

// loop is the device thread: it creates the context, runs work until
// Close, then destroys the context. The thread stays locked, so Go
// retires it when loop returns and no other goroutine inherits its CUDA
// state.
func (d *Device) loop(ordinal int, started chan<- error) {
	runtime.LockOSThread()
	defer close(d.done)
	if err := d.init(ordinal); err != nil {
		d.teardown()
		started <- err
		return
	}
	started <- nil
	for r := range d.work {
		r.res <- r.f(&d.exec)
	}
	d.teardown()
}

func (d *Device) init(ordinal int) error {
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return fmt.Errorf("cuda: GPU %d: %w", ordinal, err)
	}
	attrs := []cu.DeviceAttribute{cu.ComputeCapabilityMajor, cu.ComputeCapabilityMinor, cu.MultiprocessorCount,
		cu.MaxThreadsPerBlock, cu.MaxBlockDimX, cu.MaxBlockDimY, cu.MaxBlockDimZ, cu.MaxGridDimX, cu.MaxGridDimY,
		cu.MaxGridDimZ, cu.MaxRegistersPerBlock}
	v := make([]int, len(attrs))
	for i, a := range attrs {
		if v[i], err = dev.Attribute(a); err != nil {
			return fmt.Errorf("cuda: GPU %d attribute %d: %w", ordinal, a, err)
		}
	}
	major, minor, sms := v[0], v[1], v[2]
	d.limits = launch.Limits{MaxThreads: v[3], MaxBlock: launch.Dim3{X: v[4], Y: v[5], Z: v[6]},
		MaxGrid: launch.Dim3{X: v[7], Y: v[8], Z: v[9]}, MaxRegisters: v[10]}
	cc := 10*major + minor
	if cc < 80 {
		return fmt.Errorf("cuda: GPU %d has compute capability %d.%d; prefixd needs 8.0 or later", ordinal, major, minor)
	}
	// NVRTC 11.8 knows architectures up to compute_90; the driver JIT-
	// compiles that PTX for later GPUs.
	d.arch, d.sms = fmt.Sprintf("compute_%d", min(cc, 90)), sms
	if d.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
		return fmt.Errorf("cuda: context on GPU %d: %w", ordinal, err)
	}
	// A stream of the Device's own, since a graph cannot be captured from
	// the legacy default stream. It must stay a blocking stream (not
	// NonBlocking, and no per-thread default stream): the copies, which
	// stay on the legacy default stream, are ordered with its work only
	// by the legacy stream's implicit synchronisation.
	if d.stream, err = cu.MakeStream(cu.DefaultStream); err != nil {
		return fmt.Errorf("cuda: stream on GPU %d: %w", ordinal, err)
	}
	ptx, err := src.Compile(d.dtype, d.arch)
	if err != nil {
		return err
	}
	if d.mod, err = cu.LoadData(ptx); err != nil {
		return fmt.Errorf("cuda: loading the kernels' PTX: %w", err)
	}
	for _, name := range src.Kernels {
		fn, err := d.mod.Function(name)
		if err != nil {
			return fmt.Errorf("cuda: kernel %s: %w", name, err)
		}
		threads, err1 := fn.Attribute(cu.FnMaxThreadsPerBlock)
		regs, err2 := fn.Attribute(cu.NumRegs)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("cuda: kernel %s attributes: %w", name, err)
		}
		d.fns[name] = kernel{fn, launch.Kernel{MaxThreads: threads, Registers: regs}}
	}
	return nil
}

func (d *Device) teardown() {
	d.blas.close()
	if d.stream != (cu.Stream{}) {
		d.stream.Destroy()
	}
	if d.mod != (cu.Module{}) {
		d.mod.Unload()
	}
	if d.ctx != (cu.CUContext{}) {
		d.ctx.Destroy()
	}
}

// Close waits for the calls in flight, then destroys the context, which
// frees everything still allocated in it. Later calls return ErrClosed.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	d.closed = true
	close(d.work)
	d.mu.Unlock()
	<-d.done
	return nil
}

// Do runs f on the device thread and returns its error. A step of a layer
// loop runs in one Do, launching through x, so it pays the hand-over once.
// f must not call the Device's own methods (they would wait for f): it uses
// x.
func (d *Device) Do(f func(x *Exec) error) error {
	r := requests.Get().(*request)
	r.f = f
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		r.f = nil
		requests.Put(r)
		return ErrClosed
	}
	d.work <- r
	d.mu.Unlock()
	err := <-r.res
	r.f = nil
	requests.Put(r)
	return err
}

// request is one Do's hand-over to the device thread: the function and
// where its error comes back. Requests are pooled, so that a step's Do
// allocates nothing (TestStepAllocatesNothing).
type request struct {
	f   func(x *Exec) error
	res chan error
}

var requests = sync.Pool{New: func() any { return &request{res: make(chan error, 1)} }}

// DType implements launch.Device.
func (d *Device) DType() src.DType { return d.dtype }

// Arch is the virtual architecture the kernels were compiled for.
func (d *Device) Arch() string { return d.arch }

// SMs is the GPU's multiprocessor count (for launch.ChooseSplit).
func (d *Device) SMs() int { return d.sms }

// Limits returns the GPU's launch limits, from its attributes.
func (d *Device) Limits() launch.Limits { return d.limits }

// Kernel returns what the loaded kernel name allows at launch (its
// CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK and NUM_REGS), and whether
// there is such a kernel.
func (d *Device) Kernel(name string) (launch.Kernel, bool) {
	k, ok := d.fns[name] // written only before Open returns
	return k.k, ok
}

// Launch implements launch.Device on the device thread.
func (d *Device) Launch(kernel string, grid, block launch.Dim3, args ...uint64) error {
	return d.Do(func(x *Exec) error { return x.Launch(kernel, grid, block, args...) })
}

// Alloc returns n bytes of device memory.
func (d *Device) Alloc(n int) (launch.Ptr, error) {
	var p launch.Ptr
	err := d.Do(func(x *Exec) (err error) { p, err = x.Alloc(n); return err })
	return p, err
}

// Free releases device memory from Alloc.
func (d *Device) Free(p launch.Ptr) error { return d.Do(func(x *Exec) error { return x.Free(p) }) }

// Write copies b to device address p and waits for the copy.
func (d *Device) Write(p launch.Ptr, b []byte) error {
	return d.Do(func(x *Exec) error { return x.Write(p, b) })
}

// Read copies len(b) bytes from device address p into b, after the work
// launched before it.
func (d *Device) Read(b []byte, p launch.Ptr) error {
	return d.Do(func(x *Exec) error { return x.Read(b, p) })
}

// MemInfo returns the GPU's free and total memory in bytes.
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.Do(func(*Exec) (err error) { free, total, err = cu.MemInfo(); return err })
	return free, total, err
}

// Exec makes CUDA calls on the device thread; it is valid only inside
// Device.Do. It implements launch.Device.
type Exec struct {
	d      *Device
	params []unsafe.Pointer
}

var _ launch.Device = (*Exec)(nil)

// DType implements launch.Device.
func (x *Exec) DType() src.DType { return x.d.dtype }

// Launch implements launch.Device: it checks the launch against the GPU's
// limits and the kernel's (an error wrapping launch.ErrLimits, which
// names the limit), queues the kernel on the device's stream and
// returns; a fault inside it shows at the next synchronising call.
func (x *Exec) Launch(kernel string, grid, block launch.Dim3, args ...uint64) error {
	k, ok := x.d.fns[kernel]
	if !ok {
		return fmt.Errorf("cuda: no kernel %q", kernel)
	}
	if err := x.d.limits.Check(kernel, k.k, grid, block); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	x.params = x.params[:0]
	for i := range args {
		x.params = append(x.params, unsafe.Pointer(&args[i]))
	}
	if err := k.fn.Launch(grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, 0, x.d.stream, x.params); err != nil {
		return fmt.Errorf("cuda: launch %s grid %v block %v: %w", kernel, grid, block, err)
	}
	return nil
}

// Alloc returns n bytes of device memory.
func (x *Exec) Alloc(n int) (launch.Ptr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("cuda: alloc of %d bytes", n)
	}
	p, err := cu.MemAlloc(int64(n))
	if err != nil {
		return 0, fmt.Errorf("cuda: alloc of %d bytes: %w", n, err)
	}
	x.d.live++
	return launch.Ptr(p), nil
}

// Free releases device memory.
func (x *Exec) Free(p launch.Ptr) error {
	if err := cu.MemFree(cu.DevicePtr(p)); err != nil {
		return err
	}
	x.d.live--
	return nil
}

// Live returns how many allocations made by Alloc are not yet freed: what
// the Device's own users hold, whatever cuBLAS or the driver keep.
func (x *Exec) Live() int { return x.d.live }

// Write copies b to device address p.
func (x *Exec) Write(p launch.Ptr, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return cu.MemcpyHtoD(cu.DevicePtr(p), unsafe.Pointer(&b[0]), int64(len(b)))
}

// Read copies len(b) bytes from device address p into b.
func (x *Exec) Read(b []byte, p launch.Ptr) error {
	if len(b) == 0 {
		return nil
	}
	return cu.MemcpyDtoH(unsafe.Pointer(&b[0]), cu.DevicePtr(p), int64(len(b)))
}

// HostAlloc returns n bytes of page-locked host memory, which ReadAsync
// copies into at full speed without staging; free it with HostFree.
func (x *Exec) HostAlloc(n int) ([]byte, error) { return pinnedAlloc(n) }

// HostFree releases memory from HostAlloc.
func (x *Exec) HostFree(b []byte) error { return pinnedFree(b) }

// ReadAsync queues a copy of len(b) bytes from device address p into b
// (page-locked, from HostAlloc) on the legacy default stream, which waits
// for the kernels queued before it on the device's (blocking) stream; b
// holds the bytes once Synchronize returns.
func (x *Exec) ReadAsync(b []byte, p launch.Ptr) error {
	if len(b) == 0 {
		return nil
	}
	return cu.MemcpyDtoHAsync(unsafe.Pointer(&b[0]), cu.DevicePtr(p), int64(len(b)), cu.NoStream)
}

// Copy copies n bytes between device addresses.
func (x *Exec) Copy(dst, src launch.Ptr, n int) error {
	return cu.MemcpyDtoD(cu.DevicePtr(dst), cu.DevicePtr(src), int64(n))
}

// Synchronize waits for everything launched so far and returns the first
// fault.
func (x *Exec) Synchronize() error { return cu.Synchronize() }
