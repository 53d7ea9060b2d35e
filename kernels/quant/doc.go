// Package quant holds ggml's tensor types as GGUF files store them (F32,
// F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, and Q8_K, the
// activation format of the K-quant products) and the CPU kernels that
// multiply by weights kept in those types, so a model needs no float32
// copy of its weights and decode streams the file's bytes.
//
// Layouts are ggml's (ggml-common.h), all little-endian: a block of 32
// values (Q4_0 ... Q8_0) or 256 (the K-quants) holds one or two float16
// scales and packed quants; Dequantize and the golden tests spell each out.
//
// MatMul quantizes the activations once per call to 8 bits per block and
// takes integer dot products with the weight blocks, as llama.cpp does;
// F16 and BF16 weights are converted on the fly. On amd64 CPUs with AVX2,
// FMA and F16C every type has an assembly kernel; with AVX-512 (F, BW,
// VL, VNNI and VBMI, as on Zen 4 and 5) the decode kernels of F16, BF16,
// Q8_0, Q4_0 and the K-quants, and Dequantize, run on 64-byte registers
// instead, and batches of those five quantized types go four activation
// rows at a time through kernels that unpack each weight block once for
// the four (with AVX2 only, Q8_0's and the K-quants' do, on 32-byte
// registers); elsewhere, and with -tags purego, the same drivers run
// pure-Go kernels, which the tests check each assembly set against
// (Dequantize bit for bit).
//
// Notes for callers:
//   - A matrix is out rows of in values, each row RowSize(in) bytes, as
//     GGUF stores a weight of shape [in, out].
//   - One Multiplier per model runner: it keeps the quantized activations
//     between calls and is not safe for concurrent use.
//   - MatMuls takes the products that share an input (Q, K and V; gate and
//     up) in one call: one quantization of x, one parallel loop.
//   - The products are built for decode and batched decode (a few rows of
//     activations): one row streams the weights at close to the memory
//     bandwidth. With hundreds of rows (prefill) each weight row is
//     multiplied by every activation row in turn, without a GEMM's
//     register tiling.
package quant
