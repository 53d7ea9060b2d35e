// emu.h: enough of CUDA C's device side for prefixd's kernels to compile
// with the host C++ compiler and run on the CPU. A launch runs the grid's
// thread blocks one after another, in the thread schedule's order
// (forward, reversed or shuffled), as a GPU keeps no order between its
// blocks; a block's threads are fibers (one stack
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

// CpAsync is one cp.async copy in flight: 16 bytes read from global
// memory when it was issued, written to dst when a wait covers its group.
struct CpAsync {
	void *dst;
	unsigned char data[16];
	int group;
};

// cp_async_max bounds a thread's copies in flight.
const int cp_async_max = 64;

// Thread is the state of the fiber running now.
struct Thread {
	dim3 idx;
	int tid; // linear index in the block
	// cp.async: the copies issued and not yet waited for, and the groups
	// committed so far (a copy issued after the last commit has group
	// committed, which no wait covers).
	CpAsync pend[cp_async_max];
	int npend, committed;
};

extern thread_local Thread *cur;
extern thread_local dim3 block_idx, block_dim, grid_dim;

void syncthreads();
// syncwarp is __syncwarp: a barrier of the calling thread's warp.
void syncwarp();
uint64_t warp_exchange(uint64_t v, int src_lane);
// warp_gather gives every lane of the warp all 32 lanes' bytes bytes
// (at most 32) of mine, in lane order, in all.
void warp_gather(const void *mine, int bytes, void *all);

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

// The tensor-core operations (PTX ISA, "Warp-level matrix instructions"):
// each lane holds fragments of the operands in registers, laid out as
// PTX defines; the emulator gathers the warp's fragments and computes
// what the instruction computes. groupID is lane/4, tig lane%4; the
// lower 16 bits of a register hold the element of lower index.

// half_to_f widens a 16-bit element: bf16 if bf, else IEEE half.
inline float half_to_f(unsigned short h, bool bf) { return bf ? uint_as_float((unsigned)h << 16) : f16_to_f(h); }

// mma_16816 is mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: d += a·b,
// A 16x16 and B 16x8 (k x n) of 16-bit elements, D 16x8 of float.
// Lane fragments: a[0] (row g, k 2t..2t+1), a[1] (row g+8, same k),
// a[2] (row g, k 2t+8..2t+9), a[3] (row g+8, k 2t+8..); b[0] (k 2t..2t+1,
// col g), b[1] (k 2t+8..2t+9, col g); d[0..1] (row g, cols 2t, 2t+1),
// d[2..3] (row g+8, same cols).
inline void mma_16816(float *d, const unsigned *a, const unsigned *b, bool bf) {
	struct Frag {
		unsigned a[4], b[2];
	} mine, all[32];
	memcpy(mine.a, a, sizeof mine.a);
	memcpy(mine.b, b, sizeof mine.b);
	warp_gather(&mine, sizeof mine, all);
	int lane = cur->tid & 31, g = lane >> 2, t = lane & 3;
	for (int i = 0; i < 4; i++) {
		int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
		float s = 0.0f;
		for (int k = 0; k < 16; k++) {
			// A[row][k] is in lane (row%8)*4 + (k%8)/2, register (row/8) + 2*(k/8).
			unsigned aw = all[(row & 7) * 4 + ((k & 7) >> 1)].a[(row >> 3) + 2 * (k >> 3)];
			// B[k][col] is in lane col*4 + (k%8)/2, register k/8.
			unsigned bw = all[col * 4 + ((k & 7) >> 1)].b[k >> 3];
			unsigned short ah = (unsigned short)((k & 1) ? aw >> 16 : aw & 0xffffu);
			unsigned short bh = (unsigned short)((k & 1) ? bw >> 16 : bw & 0xffffu);
			s += half_to_f(ah, bf) * half_to_f(bh, bf);
		}
		d[i] += s;
	}
}

// ldmatrix is ldmatrix.sync.aligned.m8n8.x{n}{.trans}.shared.b16: n 8x8
// matrices of 16-bit elements whose rows lanes 8i..8i+7 address (row j of
// matrix i at lane 8i+j's p). Register i of each lane gets matrix i's
// row lane/4, columns 2(lane%4) and 2(lane%4)+1; with trans, the
// transpose's (rows 2(lane%4) and 2(lane%4)+1 of column lane/4).
inline void ldmatrix(unsigned *r, int n, bool trans, const void *p) {
	const unsigned short *rows[32];
	warp_gather(&p, sizeof p, rows);
	int lane = cur->tid & 31;
	for (int i = 0; i < n; i++) {
		unsigned short lo, hi;
		if (!trans) {
			const unsigned short *row = rows[8 * i + lane / 4];
			lo = row[2 * (lane % 4)], hi = row[2 * (lane % 4) + 1];
		} else {
			lo = rows[8 * i + 2 * (lane % 4)][lane / 4], hi = rows[8 * i + 2 * (lane % 4) + 1][lane / 4];
		}
		r[i] = (unsigned)lo | (unsigned)hi << 16;
	}
}

// cp_async16 is cp.async.cg.shared.global of 16 bytes: the bytes are read
// now and land in shared memory only when a cp_async_wait covers their
// group, so a kernel that reads them before waiting sees stale bytes.
inline void cp_async16(void *dst, const void *src) {
	if (cur->npend == cp_async_max) __builtin_trap();
	CpAsync &c = cur->pend[cur->npend++];
	c.dst = dst, c.group = cur->committed;
	memcpy(c.data, src, 16);
}

// cp_async_commit is cp.async.commit_group: the copies issued since the
// last commit form a group.
inline void cp_async_commit() { cur->committed++; }

// cp_async_wait is cp.async.wait_group n: it lands every copy of the
// groups before the n most recent committed ones.
inline void cp_async_wait(int n) {
	int k = 0;
	for (int i = 0; i < cur->npend; i++) {
		CpAsync &c = cur->pend[i];
		if (c.group < cur->committed - n) memcpy(c.dst, c.data, 16);
		else cur->pend[k++] = c;
	}
	cur->npend = k;
}

} // namespace emu

#define __global__
#define __device__
#define __forceinline__ inline
// Launch bounds matter to the GPU's register allocation; the launcher
// enforces them from src.MaxThreads.
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Shared memory is per thread block. Blocks of one launch run one after
// another on one OS thread, so a static thread_local is the block's own
// while it runs (and, as on a GPU, uninitialised when it starts).
#define __shared__ static thread_local
#define threadIdx (emu::cur->idx)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define __syncthreads() emu::syncthreads()
#define __syncwarp() emu::syncwarp()
#define __shfl_xor_sync(mask, v, m) emu::shfl_xor(mask, v, m)
#define __shfl_sync(mask, v, src) emu::shfl(mask, v, src)
#define __uint_as_float(u) emu::uint_as_float(u)
#define __int_as_float(i) emu::uint_as_float((unsigned)(i))
#define __float_as_uint(f) emu::float_as_uint(f)

using emu::f16_to_f;
using emu::make_uint4;
using emu::uint4;
using emu::f_to_f16;

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
// A launch's blocks run one after another on one OS thread, so an atomic
// is a plain read-modify-write, a fence orders nothing that is not already
// ordered, and every load sees the last store.
inline int atomicAdd(int *p, int v) {
	int old = *p;
	*p = old + v;
	return old;
}
inline void __threadfence() {}
inline float __ldcg(const float *p) { return *p; }
// The round-to-nearest intrinsics the kernels use where fast math must not
// contract or approximate (the host compiler does neither here).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __longlong_as_double(long long b) {
	double d;
	memcpy(&d, &b, 8);
	return d;
}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

#endif
