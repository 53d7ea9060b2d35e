// Package cuda is prefixd's GPU backend on gorgonia.org/cu: a Device that
// owns one CUDA context on one locked OS thread (every CUDA call runs
// there), the kernels of kernels/cuda/src compiled with NVRTC for the
// device's architecture when it opens, KVStore (a blockstore.Storage whose
// blocks live in one device allocation, bf16 by default), and matrix
// products through cuBLAS, loaded at run time from wherever the machine
// keeps it (libcublas.so.13, .12 or .11 on the library path, in the
// ldconfig cache, in a CUDA toolkit or in a Python package; the first
// whose cublasCreate succeeds). Every launch is checked against the
// GPU's limits and the kernel's, read from their attributes
// (launch.Limits.Check).
//
// Everything but this comment needs the `cuda` build tag and the CUDA SDK's
// headers and stubs (scripts/cuda-sdk.sh prints the environment):
// gorgonia.org/cu's package init exits the process where no GPU is present,
// so nothing built without the tag imports it. Without a GPU, CI builds this
// package and its test binary (go vet, go build, go test -c with -tags
// cuda), compiles every kernel with NVRTC (kernels/cuda/src, -tags nvrtc)
// and runs every kernel on the CPU emulator (kernels/cuda/emu).
//
// On a machine with a GPU, scripts/gpu-check.sh runs a plan that fits one
// 600 s call, headline figures first: the model runner's end-to-end
// benchmark (kernels/cuda/gpu, whose OpenCUDA puts this package behind
// the runner) and the decode-attention bandwidth benchmark, then this
// package's tests (every kernel against the CPU reference, KVStore round
// trips and block copies, launch limits, no device memory left after
// Close, cuBLAS products) and the runner's, then the same under
// compute-sanitizer memcheck and racecheck. It rewrites a JSON and
// Markdown report after every step:
//
//	scripts/gpu-check.sh build          # here: build and pack into .gpu-check/
//	scripts/gpu-check.sh run            # there: run, report to $REPORT_DIR or $OUT
package cuda
