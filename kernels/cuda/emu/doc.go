// Package emu runs prefixd's CUDA kernels (kernels/cuda/src) on the CPU:
// the same .cu files, compiled by the host C++ compiler through emu.h, a
// header that supplies CUDA's built-ins. Each thread block's threads run
// as fibers with real barriers for __syncthreads and the warp shuffles, so
// the tests here compare every kernel, its launch shapes and its indexing
// with the Go CPU kernels (kernels/cpu) on a machine without a GPU. A
// launch a GPU would refuse fails here too: Device.Launch checks it
// against launch.GPULimits and the kernel's __launch_bounds__.
//
// It needs cgo and a C++17 compiler on amd64; elsewhere the package is
// empty and its tests do not run.
package emu
