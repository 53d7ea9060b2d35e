//go:build cuda

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <cublas_v2.h>

// The v2 API's signatures are those of CUDA 11.8's header, which CUDA 12
// and 13 keep: only the library's file name and symbol versions differ,
// which is why it is opened at run time rather than linked.
typedef struct {
	void *lib;
	__typeof__(cublasCreate_v2) *create;
	__typeof__(cublasDestroy_v2) *destroy;
	__typeof__(cublasSetStream_v2) *set_stream;
	__typeof__(cublasGemmEx) *gemm_ex;
	__typeof__(cublasSgemm_v2) *sgemm;
	__typeof__(cublasSetWorkspace_v2) *set_workspace; // NULL before cuBLAS 11.4
} prefixd_cublas_lib;

// prefixd_lib is the library in use: the first that made a handle.
static prefixd_cublas_lib prefixd_lib;

// prefixd_cublas_try opens the library at path, resolves the API and
// makes a handle on the current context with it, its work queued on
// stream; on success the library becomes the one in use. It returns NULL, or what failed (with the
// status of a failing cuBLAS call in *status). A library whose
// cublasCreate ran stays loaded even when it failed: it may have set up
// state in the CUDA runtime that unloading would leave dangling.
static const char *prefixd_cublas_try(const char *path, cublasHandle_t *h, int *status, cudaStream_t stream) {
	prefixd_cublas_lib l;
	*status = 0;
	l.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!l.lib) return dlerror();
	l.create = (__typeof__(l.create))dlsym(l.lib, "cublasCreate_v2");
	l.destroy = (__typeof__(l.destroy))dlsym(l.lib, "cublasDestroy_v2");
	l.set_stream = (__typeof__(l.set_stream))dlsym(l.lib, "cublasSetStream_v2");
	l.gemm_ex = (__typeof__(l.gemm_ex))dlsym(l.lib, "cublasGemmEx");
	l.sgemm = (__typeof__(l.sgemm))dlsym(l.lib, "cublasSgemm_v2");
	l.set_workspace = (__typeof__(l.set_workspace))dlsym(l.lib, "cublasSetWorkspace_v2");
	if (!l.create || !l.destroy || !l.set_stream || !l.gemm_ex || !l.sgemm) {
		dlclose(l.lib);
		return "lacks one of cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2, cublasGemmEx, cublasSgemm_v2";
	}
	if ((*status = l.create(h)) != 0) return "cublasCreate failed";
	if ((*status = l.set_stream(*h, stream)) != 0) {
		l.destroy(*h);
		return "cublasSetStream failed";
	}
	prefixd_lib = l;
	return NULL;
}

static int prefixd_blas_create(cublasHandle_t *h, cudaStream_t stream) {
	int rc = prefixd_lib.create(h);
	if (rc == 0 && (rc = prefixd_lib.set_stream(*h, stream)) != 0) prefixd_lib.destroy(*h);
	return rc;
}

static int prefixd_blas_destroy(cublasHandle_t h) { return prefixd_lib.destroy(h); }

// prefixd_blas_set_workspace gives h the device memory at ws; -1 where
// the library cannot take one.
static int prefixd_blas_set_workspace(cublasHandle_t h, void *ws, size_t n) {
	if (!prefixd_lib.set_workspace) return -1;
	return prefixd_lib.set_workspace(h, ws, n);
}
static int prefixd_blas_has_workspace(void) { return prefixd_lib.set_workspace != NULL; }

// prefixd_matmul_t sets y (float, m x n row-major) = a (m x k) * w^T
// (w n x k, row-major) + beta*y. Row-major y is column-major y^T = w a^T:
// w's row-major buffer read column-major is w^T, hence op T; a's is a^T.
static int prefixd_matmul_t(cublasHandle_t h, int dtype, float *y, const void *a, const void *w, int m, int n,
			    int k, float beta) {
	float alpha = 1.0f;
	if (dtype < 0)
		return prefixd_lib.sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, (const float *)w, k, (const float *)a, k,
				     &beta, y, n);
	return prefixd_lib.gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, (cudaDataType)dtype, k, a,
			       (cudaDataType)dtype, k, &beta, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

static int prefixd_type_bf16(void) { return CUDA_R_16BF; }
static int prefixd_type_f16(void) { return CUDA_R_16F; }
*/
import "C"

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// blas is the device's cuBLAS handle, made on first use on the device
// thread, its products queued on the device's stream, with a workspace
// of the device's where the library takes one.
type blas struct {
	h  C.cublasHandle_t
	ok bool
	ws cu.DevicePtr
}

// blasWorkspace is the bytes of the handle's workspace: PyTorch's default
// on Hopper. With a workspace of its own, every graph captured with the
// handle uses it, instead of cuBLAS allocating one for each graph
// (before cuBLAS 12.2) or inside each (from 12.2): memory the start-up
// profile (gpu.ProfileStep) would not have counted.
const blasWorkspace = 32 << 20

// cublasLib is the cuBLAS file the process uses: the first of
// cublasLibraries that made a handle. Devices share it; mu guards it.
var cublasLib struct {
	sync.Mutex
	path string
}

// CuBLASLibrary returns the path or name of the cuBLAS library the
// process loaded, or "" before the first matrix product.
func CuBLASLibrary() string {
	cublasLib.Lock()
	defer cublasLib.Unlock()
	return cublasLib.path
}

// blasStream returns the device's stream as cuBLAS's C type: a cu.Stream
// holds just the CUstream, which is a cudaStream_t.
func (d *Device) blasStream() C.cudaStream_t { return *(*C.cudaStream_t)(unsafe.Pointer(&d.stream)) }

func (b *blas) close() {
	if b.ok {
		C.prefixd_blas_destroy(b.h)
		b.ok = false
	}
	if b.ws != 0 {
		cu.MemFree(b.ws)
		b.ws = 0
	}
}

// workspace gives the new handle its workspace, where the library takes
// one; on failure it closes the handle.
func (b *blas) workspace() error {
	if C.prefixd_blas_has_workspace() == 0 {
		return nil
	}
	ws, err := cu.MemAlloc(blasWorkspace)
	if err == nil {
		b.ws = ws
		if rc := C.prefixd_blas_set_workspace(b.h, ptr(launch.Ptr(ws)), blasWorkspace); rc != 0 {
			err = fmt.Errorf("status %d", int(rc))
		}
	}
	if err != nil {
		b.close()
		return fmt.Errorf("cuda: cuBLAS workspace of %d bytes: %w", blasWorkspace, err)
	}
	return nil
}

// handle makes the device's handle. The first in the process tries each
// of cublasLibraries in turn until one loads and makes a handle: a
// cuBLAS 13 that the driver cannot run fails cublasCreate, and the
// search goes on to cuBLAS 12.
func (b *blas) handle(stream C.cudaStream_t) error {
	if b.ok {
		return nil
	}
	cublasLib.Lock()
	defer cublasLib.Unlock()
	if cublasLib.path != "" {
		if rc := C.prefixd_blas_create(&b.h, stream); rc != 0 {
			return fmt.Errorf("cuda: cublasCreate (%s): status %d", cublasLib.path, int(rc))
		}
		b.ok = true
		return b.workspace()
	}
	var failed []string
	for _, path := range cublasLibraries() {
		cpath := C.CString(path)
		var status C.int
		msg := C.prefixd_cublas_try(cpath, &b.h, &status, stream)
		C.free(unsafe.Pointer(cpath))
		if msg == nil {
			cublasLib.path, b.ok = path, true
			return b.workspace()
		}
		f := path + ": " + C.GoString(msg)
		if status != 0 {
			f += fmt.Sprintf(" (status %d)", int(status))
		}
		failed = append(failed, f)
	}
	return fmt.Errorf("cuda: no usable cuBLAS (set LD_LIBRARY_PATH to a folder with libcublas.so.13, .12 or .11): %s",
		strings.Join(failed, "; "))
}

// MatMulT sets y (float32, m×n row-major) to a·wᵀ + beta·y, a being m×k and
// w n×k (a layer's weight as loaded, out×in) in the device's element type,
// accumulated in float32. beta = 1 adds the product to y: the residual
// connection for free.
func (x *Exec) MatMulT(y, a, w launch.Ptr, m, n, k int, beta float32) error {
	for _, v := range []int{m, n, k} {
		if v <= 0 || v > math.MaxInt32 {
			return fmt.Errorf("%w: product of %d×%d by %d×%d", launch.ErrShape, m, k, n, k)
		}
	}
	if err := x.d.blas.handle(x.d.blasStream()); err != nil {
		return err
	}
	dt := C.int(-1)
	switch x.d.dtype {
	case src.BF16:
		dt = C.prefixd_type_bf16()
	case src.F16:
		dt = C.prefixd_type_f16()
	}
	if rc := C.prefixd_matmul_t(x.d.blas.h, dt, (*C.float)(ptr(y)), ptr(a), ptr(w), C.int(m), C.int(n), C.int(k),
		C.float(beta)); rc != 0 {
		return fmt.Errorf("cuda: cuBLAS product %d×%d by %d×%dᵀ: status %d", m, k, n, k, int(rc))
	}
	return nil
}
