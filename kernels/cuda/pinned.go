//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

static int prefixd_host_alloc(void **p, size_t n) { return (int)cuMemAllocHost(p, n); }
static void *prefixd_dev_ptr(unsigned long long p) { return (void *)p; }
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
)

// pinnedAlloc returns n bytes of page-locked host memory, which the GPU
// copies to and from at full speed. Call on the device thread; free with
// pinnedFree.
func pinnedAlloc(n int) ([]byte, error) {
	var p unsafe.Pointer
	if rc := C.prefixd_host_alloc(&p, C.size_t(n)); rc != 0 {
		return nil, fmt.Errorf("cuda: pinned alloc of %d bytes: CUresult %d", n, int(rc))
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func pinnedFree(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return cu.MemFreeHost(unsafe.Pointer(&b[0]))
}

// ptr turns a device address into the pointer type C calls take. The
// address is never dereferenced on the host.
func ptr(p launch.Ptr) unsafe.Pointer { return C.prefixd_dev_ptr(C.ulonglong(p)) }
