//go:build cuda

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <cublas_v2.h>

// The v2 API's signatures are those of CUDA 11.8's header, which CUDA 12
// and 13 keep: only the library's file name and symbol versions differ,
// which is why it is opened at run time rather than linked.
static void *prefixd_cublas;
static __typeof__(cublasCreate_v2) *prefixd_create;
static __typeof__(cublasDestroy_v2) *prefixd_destroy;
static __typeof__(cublasSetStream_v2) *prefixd_set_stream;
static __typeof__(cublasGemmEx) *prefixd_gemm_ex;
static __typeof__(cublasSgemm_v2) *prefixd_sgemm;

// prefixd_cublas_open loads cuBLAS once; it returns NULL or what failed.
static const char *prefixd_cublas_open(void) {
	static const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"};
	if (prefixd_cublas) return NULL;
	for (int i = 0; i < 3 && !prefixd_cublas; i++) prefixd_cublas = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!prefixd_cublas) return "no libcublas.so.13, .12 or .11 on the library path";
	prefixd_create = (__typeof__(prefixd_create))dlsym(prefixd_cublas, "cublasCreate_v2");
	prefixd_destroy = (__typeof__(prefixd_destroy))dlsym(prefixd_cublas, "cublasDestroy_v2");
	prefixd_set_stream = (__typeof__(prefixd_set_stream))dlsym(prefixd_cublas, "cublasSetStream_v2");
	prefixd_gemm_ex = (__typeof__(prefixd_gemm_ex))dlsym(prefixd_cublas, "cublasGemmEx");
	prefixd_sgemm = (__typeof__(prefixd_sgemm))dlsym(prefixd_cublas, "cublasSgemm_v2");
	if (!prefixd_create || !prefixd_destroy || !prefixd_set_stream || !prefixd_gemm_ex || !prefixd_sgemm) {
		dlclose(prefixd_cublas);
		prefixd_cublas = NULL;
		return "libcublas lacks one of cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2, cublasGemmEx, cublasSgemm_v2";
	}
	return NULL;
}

static int prefixd_blas_create(cublasHandle_t *h) {
	int rc = prefixd_create(h);
	if (rc == 0) rc = prefixd_set_stream(*h, 0);
	return rc;
}

static int prefixd_blas_destroy(cublasHandle_t h) { return prefixd_destroy(h); }

// prefixd_matmul_t sets y (float, m x n row-major) = a (m x k) * w^T
// (w n x k, row-major) + beta*y. Row-major y is column-major y^T = w a^T:
// w's row-major buffer read column-major is w^T, hence op T; a's is a^T.
static int prefixd_matmul_t(cublasHandle_t h, int dtype, float *y, const void *a, const void *w, int m, int n,
			    int k, float beta) {
	float alpha = 1.0f;
	if (dtype < 0)
		return prefixd_sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, (const float *)w, k, (const float *)a, k,
				     &beta, y, n);
	return prefixd_gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, (cudaDataType)dtype, k, a,
			       (cudaDataType)dtype, k, &beta, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

static int prefixd_type_bf16(void) { return CUDA_R_16BF; }
static int prefixd_type_f16(void) { return CUDA_R_16F; }
*/
import "C"

import (
	"errors"
	"fmt"
	"math"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// blas is the device's cuBLAS handle, made on first use on the device
// thread.
type blas struct {
	h  C.cublasHandle_t
	ok bool
}

func (b *blas) close() {
	if b.ok {
		C.prefixd_blas_destroy(b.h)
		b.ok = false
	}
}

func (b *blas) handle() error {
	if b.ok {
		return nil
	}
	if msg := C.prefixd_cublas_open(); msg != nil {
		return errors.New("cuda: cuBLAS: " + C.GoString(msg))
	}
	if rc := C.prefixd_blas_create(&b.h); rc != 0 {
		return fmt.Errorf("cuda: cublasCreate: status %d", int(rc))
	}
	b.ok = true
	return nil
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
	if err := x.d.blas.handle(); err != nil {
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
