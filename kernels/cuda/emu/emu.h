// emu.h: enough of CUDA C's device side for prefixd's kernels to compile
// with the host C++ compiler and run on the CPU. A launch runs the grid's
// thread blocks one after another; a block's threads are fibers (one stack
// each) on the calling OS thread, switched at every barrier, so
// __syncthreads is a real barrier and the warp shuffles exchange values
// through a per-warp buffer between two warp barriers. A barrier that not
// every thread of the block (or warp) reaches fails the launch, as it
// would hang or misbehave on a GPU.
#ifndef PREFIXD_EMU_H
#define PREFIXD_EMU_H

#define PREFIXD_EMU 1

#include <math.h>
#include <stdint.h>
#include <string.h>

namespace emu {

struct dim3 {
	unsigned x, y, z;
};

// Thread is the state of the fiber running now.
struct Thread {
	dim3 idx;
	int tid; // linear index in the block
};

extern thread_local Thread *cur;
extern thread_local dim3 block_idx, block_dim, grid_dim;

void syncthreads();
uint64_t warp_exchange(uint64_t v, int src_lane);

template <typename V> V shfl_xor(unsigned mask, V v, int lane_mask) {
	(void)mask;
	static_assert(sizeof(V) <= 8, "shuffle of more than 8 bytes");
	uint64_t bits = 0;
	memcpy(&bits, &v, sizeof v);
	int lane = cur->tid & 31;
	bits = warp_exchange(bits, lane ^ lane_mask);
	memcpy(&v, &bits, sizeof v);
	return v;
}

template <typename V> V shfl(unsigned mask, V v, int src_lane) {
	(void)mask;
	static_assert(sizeof(V) <= 8, "shuffle of more than 8 bytes");
	uint64_t bits = 0;
	memcpy(&bits, &v, sizeof v);
	bits = warp_exchange(bits, src_lane & 31);
	memcpy(&v, &bits, sizeof v);
	return v;
}

// uint4 is CUDA's 16-byte vector, which the kernels load and store whole.
struct alignas(16) uint4 {
	unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

inline float uint_as_float(unsigned u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}
inline unsigned float_as_uint(float f) {
	unsigned u;
	memcpy(&u, &f, 4);
	return u;
}

// f16_to_f and f_to_f16 do in software what the GPU's cvt.f32.f16 and
// cvt.rn.f16.f32 do: exact widening, and narrowing that rounds to nearest
// even, overflows to infinity and keeps subnormals.
inline float f16_to_f(unsigned short h) {
	unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0x1f) return uint_as_float(sign | 0x7f800000u | (m << 13));
	if (e == 0) {
		float v = (float)m * 5.9604644775390625e-8f; // m * 2^-24, exact
		return sign ? -v : v;
	}
	return uint_as_float(sign | ((e + 112) << 23) | (m << 13));
}

inline unsigned short f_to_f16(float f) {
	unsigned x = float_as_uint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
	if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);
	if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u); // >= 65520 rounds to infinity
	if (ax < 0x38800000u) {                                          // below 2^-14: subnormal or zero
		int e = (int)(ax >> 23);
		if (e < 102) return (unsigned short)sign; // below 2^-25
		unsigned m = (ax & 0x7fffffu) | 0x800000u, shift = (unsigned)(126 - e);
		unsigned q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (q & 1))) q++;
		return (unsigned short)(sign | q);
	}
	unsigned r = ax - 0x38000000u; // rebias the exponent from 127 to 15
	r += 0xfffu + ((r >> 13) & 1u);
	return (unsigned short)(sign | (r >> 13));
}

} // namespace emu

#define __global__
#define __device__
#define __forceinline__ inline
// Launch bounds matter to the GPU's register allocation; the launcher
// enforces them from src.MaxThreads.
#define __launch_bounds__(...)
// Shared memory is per thread block. Blocks of one launch run one after
// another on one OS thread, so a static thread_local is the block's own
// while it runs (and, as on a GPU, uninitialised when it starts).
#define __shared__ static thread_local
#define threadIdx (emu::cur->idx)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define __syncthreads() emu::syncthreads()
#define __shfl_xor_sync(mask, v, m) emu::shfl_xor(mask, v, m)
#define __shfl_sync(mask, v, src) emu::shfl(mask, v, src)
#define __uint_as_float(u) emu::uint_as_float(u)
#define __float_as_uint(f) emu::float_as_uint(f)

using emu::f16_to_f;
using emu::make_uint4;
using emu::uint4;
using emu::f_to_f16;

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

#endif
