// Package cuda is prefixd's GPU backend on gorgonia.org/cu: a Device that
// owns one CUDA context on one locked OS thread (every CUDA call runs
// there), the kernels of kernels/cuda/src compiled with NVRTC for the
// device's architecture when it opens, KVStore (a blockstore.Storage whose
// blocks live in one device allocation, bf16 by default), and matrix
// products through cuBLAS, loaded at run time (libcublas.so.13, .12 or
// .11).
//
// Everything but this comment needs the `cuda` build tag and the CUDA SDK's
// headers and stubs (scripts/cuda-sdk.sh prints the environment):
// gorgonia.org/cu's package init exits the process where no GPU is present,
// so nothing built without the tag imports it. Without a GPU, CI builds this
// package and its test binary (go vet, go build, go test -c with -tags
// cuda), compiles every kernel with NVRTC (kernels/cuda/src, -tags nvrtc)
// and runs every kernel on the CPU emulator (kernels/cuda/emu).
//
// On a machine with a GPU, scripts/gpu-check.sh runs this package's tests
// (every kernel against the CPU reference, KVStore round trips and block
// copies, no device memory left after Close, cuBLAS products), the same
// under compute-sanitizer memcheck and racecheck, and the decode-attention
// bandwidth benchmark, and writes a JSON and Markdown report:
//
//	scripts/gpu-check.sh build          # here: build and pack into .gpu-check/
//	scripts/gpu-check.sh run            # there: run, report to $REPORT_DIR or $OUT
package cuda
