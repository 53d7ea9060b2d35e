// registry.h: the table of kernels each element type's translation unit
// (kernels_*.cc) exports to the launcher (emu.cc).
#ifndef PREFIXD_EMU_REGISTRY_H
#define PREFIXD_EMU_REGISTRY_H

#include <functional>
#include <stdint.h>
#include <string.h>
#include <utility>

// PREFIXD_KERNELS lists every kernel of kernels/cuda/src (the Go test
// checks it against src.Kernels).
#define PREFIXD_KERNELS(X)                                                                                   \
	X(embed)                                                                                             \
	X(rmsnorm)                                                                                           \
	X(rmsnorm_f32)                                                                                       \
	X(rope_gguf)                                                                                         \
	X(rope_halves)                                                                                       \
	X(swiglu)                                                                                            \
	X(add)                                                                                               \
	X(add_bias)                                                                                          \
	X(gather_rows)                                                                                       \
	X(argmax)                                                                                            \
	X(kv_append)                                                                                         \
	X(copy_blocks)                                                                                       \
	X(rope_kv_append)                                                                                    \
	X(attn)                                                                                              \
	X(attn_wide)                                                                                         \
	X(attn_decode8)                                                                                      \
	X(attn_decode16)                                                                                     \
	X(attn_decode32)                                                                                     \
	X(tc_check)                                                                                          \
	X(attn_prefill64)                                                                                    \
	X(attn_prefill128)                                                                                   \
	X(attn_decode_tc8)                                                                                   \
	X(attn_decode_tc16)                                                                                  \
	X(attn_decode_tc32)                                                                                  \
	X(sample_rows)

namespace emu {

// Entry calls one kernel with its parameters packed as cuLaunchKernel's
// are here: one 8-byte slot per parameter, the value in its low bytes.
struct Entry {
	const char *name;
	int nargs;
	std::function<void(const uint64_t *)> call;
};

template <typename A> A unpack(uint64_t slot) {
	static_assert(sizeof(A) <= 8, "kernel parameter larger than 8 bytes");
	A a;
	memcpy(&a, &slot, sizeof a);
	return a;
}

template <typename... A, size_t... I> void call_with(void (*f)(A...), const uint64_t *args, std::index_sequence<I...>) {
	f(unpack<A>(args[I])...);
}

template <typename... A> Entry entry(const char *name, void (*f)(A...)) {
	return Entry{name, (int)sizeof...(A), [f](const uint64_t *a) { call_with(f, a, std::index_sequence_for<A...>{}); }};
}

} // namespace emu

#endif
