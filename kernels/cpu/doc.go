// Package cpu holds prefixd's CPU compute kernels: matrix products, the row
// operations of a Llama block, and paged attention that reads K/V through
// block tables from KVCache, the CPU implementation of blockstore.Storage;
// Backend puts them together as the CPU's model.Backend.
//
// On amd64 CPUs with AVX2 and FMA (detected at start-up with CPUID) the
// inner loops run in assembly: a 3x4 register tile for MatMul, dot
// products, the weighted sum of V rows, the softmax exponentials and
// SwiGLU, and an F16 KVCache converts with F16C (rounding on Put;
// Attention reads it as float32 through converting loads, or 64
// positions at a time in scratch). With AVX-512F as well, MatMul and the
// products on F16, BF16 and dequantized weights run 4x6 tiles of 16-lane
// registers that prefetch the weight rows ahead of them; the tiles read
// F16 and BF16 weights as they are, converting as they load, and
// kernels/quant dequantizes the rows of the types without eight-row
// integer kernels in assembly, fast enough that batches of a few rows go
// through the GEMM too (gemmRows says from how many, per type). On other
// CPUs and architectures, and when built with -tags purego, the same
// drivers run plain-Go inner loops; the tests check every path the
// machine has.
//
// Notes for callers:
//   - Weights stay as loaded, out×in row-major (llama2.c, GGUF): MatMul
//     reads them in place and needs no packed copy.
//   - Kernels that take a *Workers use the whole pool for one call at a
//     time; a model runner shares one Workers across all its layers.
//   - MatMul and Attention allocate nothing once an AttnScratch has grown
//     to the largest batch; the row operations never allocate.
package cpu
