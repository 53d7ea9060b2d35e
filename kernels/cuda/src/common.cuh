// common.cuh: what every prefixd kernel shares. It is compiled two ways:
// by NVRTC for the GPU, and by the host C++ compiler with PREFIXD_EMU
// defined (kernels/cuda/emu), where emu.h provides the CUDA built-ins.
//
// PREFIXD_KV_BF16, PREFIXD_KV_F16 or PREFIXD_KV_F32 picks elem_t, the
// element type of K/V blocks, weights and matrix-product inputs; the
// residual stream and matrix-product outputs are always float.

// Every kernel is defined as `KERNEL void __launch_bounds__(N) name(`
// (or `__launch_bounds__(N, B)`: B blocks per multiprocessor), N a
// literal: the most threads a launch of it may have, which caps its
// registers so that N threads fit a block, and which src.MaxThreads reads
// for the emulator's launch checks.
#ifndef PREFIXD_EMU
#define KERNEL extern "C" __global__
#define DEV static __device__ __forceinline__
#define PREFIXD_INF __int_as_float(0x7f800000)
#else
#define KERNEL
#define DEV static inline
#define PREFIXD_INF __builtin_huge_valf()
#endif

// ATTN_MAX_HEAD_DIM bounds the head size: each lane of a warp keeps
// ATTN_MAX_HEAD_DIM/32 elements of a query and of its output in registers.
#define ATTN_MAX_HEAD_DIM 256
#define ATTN_DPL (ATTN_MAX_HEAD_DIM / 32)

// bf16 is the top half of a float: the conversion rounds to nearest even,
// as the hardware's cvt.rn.bf16.f32 does, and keeps NaN a NaN.
DEV float bf16_to_f(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
DEV unsigned short f_to_bf16(float f) {
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}

#ifndef PREFIXD_EMU
DEV float f16_to_f(unsigned short h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}
DEV unsigned short f_to_f16(float f) {
	unsigned short h;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
	return h;
}
#endif

#if defined(PREFIXD_KV_BF16)
typedef unsigned short elem_t;
DEV float to_f(elem_t x) { return bf16_to_f(x); }
DEV elem_t from_f(float f) { return f_to_bf16(f); }
#elif defined(PREFIXD_KV_F16)
typedef unsigned short elem_t;
DEV float to_f(elem_t x) { return f16_to_f(x); }
DEV elem_t from_f(float f) { return f_to_f16(f); }
#elif defined(PREFIXD_KV_F32)
typedef float elem_t;
DEV float to_f(elem_t x) { return x; }
DEV elem_t from_f(float f) { return f; }
#else
#error "define PREFIXD_KV_BF16, PREFIXD_KV_F16 or PREFIXD_KV_F32"
#endif

// store writes f to *p as a float or, narrowed, as an elem_t.
DEV void store(float *p, float f) { *p = f; }
#if !defined(PREFIXD_KV_F32)
DEV void store(elem_t *p, float f) { *p = from_f(f); }
#endif

// warp_sum reduces over a full warp: every launch of a kernel that uses
// it has a block size that is a multiple of 32.
template <typename T> DEV T warp_sum(T v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// block_sum reduces v over the whole block through sh (32 values of
// shared memory) and returns the total to every thread.
template <typename T> DEV T block_sum(T v, T *sh) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	v = warp_sum(v);
	if (lane == 0) sh[w] = v;
	__syncthreads();
	if (w == 0) {
		v = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : (T)0;
		v = warp_sum(v);
		if (lane == 0) sh[0] = v;
	}
	__syncthreads();
	v = sh[0];
	__syncthreads(); // nobody overwrites sh before every thread has read it
	return v;
}
