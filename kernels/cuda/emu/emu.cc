//go:build cgo && amd64

// emu.cc: the launcher. Each thread block's threads run as fibers on the
// calling OS thread; a fiber runs until it reaches a barrier
// (__syncthreads, or the warp barrier around a shuffle) or ends, then the
// scheduler resumes the next one. Which thread runs first between
// barriers is the launch's schedule (forward, reverse or shuffled), so a
// test that runs each kernel under several schedules catches a missing
// __syncthreads.
#include "emu.h"
#include "registry.h"

#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include <memory>
#include <vector>

const emu::Entry *prefixd_emu_table_bf16(int *n);
const emu::Entry *prefixd_emu_table_f16(int *n);
const emu::Entry *prefixd_emu_table_f32(int *n);

// prefixd_emu_swap saves the callee-saved registers, the SSE and x87
// control words and the stack pointer in *save, then resumes the context
// whose stack pointer is next (System V x86-64).
extern "C" void prefixd_emu_swap(void **save, void *next);
asm(R"(
	.text
	.p2align 4
	.globl prefixd_emu_swap
	.hidden prefixd_emu_swap
	.type prefixd_emu_swap, @function
prefixd_emu_swap:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	subq $8, %rsp
	stmxcsr (%rsp)
	fnstcw 4(%rsp)
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	ldmxcsr (%rsp)
	fldcw 4(%rsp)
	addq $8, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size prefixd_emu_swap, .-prefixd_emu_swap
)");

namespace emu {

thread_local Thread *cur;
thread_local dim3 block_idx, block_dim, grid_dim;

namespace {

const size_t stack_bytes = 256 << 10;

struct Fiber {
	void *sp;
	Thread t;
	bool done;
};

// Block is one thread block's run.
struct Block {
	std::vector<Fiber> fibers;
	void *sched_sp = nullptr;
	const std::function<void()> *body = nullptr;
	int n = 0;
	unsigned long steps = 0; // barrier arrivals and thread exits: progress
	int arrived = 0;
	unsigned gen = 0;
	std::vector<int> warrived;
	std::vector<unsigned> wgen;
	std::vector<uint64_t> xch;
	std::vector<unsigned char> gather; // warp_gather's 32 bytes a thread
	bool deadlock = false;
};

thread_local Block *blk;

void yield() { prefixd_emu_swap(&blk->fibers[cur->tid].sp, blk->sched_sp); }

void fiber_main() {
	(*blk->body)();
	blk->fibers[cur->tid].done = true;
	blk->steps++;
	yield();
	__builtin_trap(); // a finished fiber is never resumed
}

// barrier waits until n threads have arrived at the barrier (arrived, gen).
void barrier(int &arrived, unsigned &gen, int n) {
	blk->steps++;
	unsigned g = gen;
	if (++arrived == n) {
		arrived = 0;
		gen++;
		return;
	}
	while (gen == g) yield();
}

int warp_lanes(int warp) { return blk->n - 32 * warp < 32 ? blk->n - 32 * warp : 32; }

} // namespace

void syncthreads() { barrier(blk->arrived, blk->gen, blk->n); }

void syncwarp() {
	int w = cur->tid >> 5;
	barrier(blk->warrived[w], blk->wgen[w], warp_lanes(w));
}

uint64_t warp_exchange(uint64_t v, int src_lane) {
	int w = cur->tid >> 5;
	blk->xch[cur->tid] = v;
	barrier(blk->warrived[w], blk->wgen[w], warp_lanes(w));
	int src = 32 * w + src_lane;
	uint64_t got = src < blk->n ? blk->xch[src] : v;
	barrier(blk->warrived[w], blk->wgen[w], warp_lanes(w));
	return got;
}

void warp_gather(const void *mine, int bytes, void *all) {
	if (bytes > 32) __builtin_trap();
	int w = cur->tid >> 5, lanes = warp_lanes(w);
	memcpy(&blk->gather[32 * cur->tid], mine, bytes);
	barrier(blk->warrived[w], blk->wgen[w], lanes);
	for (int l = 0; l < 32; l++) {
		unsigned char *to = (unsigned char *)all + l * bytes;
		if (l < lanes) memcpy(to, &blk->gather[32 * (32 * w + l)], bytes);
		else memset(to, 0, bytes);
	}
	barrier(blk->warrived[w], blk->wgen[w], lanes);
}

namespace {

// Stacks are one mapping per launch, with an inaccessible guard page
// below each stack so that an overflow faults instead of corrupting a
// neighbour.
struct Stacks {
	char *base = nullptr;
	size_t len = 0, page = 0;
	int n = 0;
	explicit Stacks(int n) : n(n) {
		page = (size_t)sysconf(_SC_PAGESIZE);
		len = (size_t)n * (stack_bytes + page);
		void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) return;
		base = (char *)p;
		for (int i = 0; i < n; i++) mprotect(base + (size_t)i * (stack_bytes + page), page, PROT_NONE);
	}
	~Stacks() {
		if (base) munmap(base, len);
	}
	// top returns fiber i's initial stack pointer, laid out for
	// prefixd_emu_swap to "return" into fiber_main.
	void *top(int i) {
		uint64_t *sp = (uint64_t *)(base + (size_t)(i + 1) * (stack_bytes + page));
		*--sp = 0;                         // fiber_main's return address: it never returns
		*--sp = (uint64_t)&fiber_main;     // popped by ret
		for (int r = 0; r < 6; r++) *--sp = 0; // rbp rbx r12 r13 r14 r15
		*--sp = 0x1f80ull | (0x037full << 32); // default MXCSR, x87 control word
		return sp;
	}
};

// stacks_for returns this OS thread's stacks for at least n fibers, kept
// from launch to launch: mapping them with their guard pages and faulting
// their pages in again would cost more than a small kernel's whole run.
Stacks *stacks_for(int n) {
	static thread_local std::unique_ptr<Stacks> cache;
	if (!cache || !cache->base || cache->n < n) {
		cache.reset();
		cache.reset(new Stacks(n));
	}
	return cache.get();
}

// next_order fills order with the threads to visit in this pass.
void next_order(std::vector<int> &order, int sched, uint64_t &rng) {
	int n = (int)order.size();
	for (int i = 0; i < n; i++) order[i] = sched == 1 ? n - 1 - i : i;
	if (sched < 2) return;
	for (int i = n - 1; i > 0; i--) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		int j = (int)(rng % (uint64_t)(i + 1));
		int t = order[i];
		order[i] = order[j], order[j] = t;
	}
}

// run_block runs one thread block to the end; false if its threads
// deadlocked at a barrier.
bool run_block(Block &b, Stacks &st, int sched, uint64_t &rng) {
	for (int i = 0; i < b.n; i++) {
		Fiber &f = b.fibers[i];
		f.sp = st.top(i);
		f.done = false;
		f.t.tid = i;
		f.t.npend = f.t.committed = 0;
		f.t.idx = dim3{(unsigned)i % block_dim.x, (unsigned)i / block_dim.x % block_dim.y,
			       (unsigned)i / (block_dim.x * block_dim.y)};
	}
	b.arrived = 0;
	for (auto &a : b.warrived) a = 0;
	std::vector<int> order(b.n);
	for (int live = b.n; live > 0;) {
		unsigned long before = b.steps;
		next_order(order, sched, rng);
		live = 0;
		for (int i : order) {
			Fiber &f = b.fibers[i];
			if (f.done) continue;
			cur = &f.t;
			prefixd_emu_swap(&b.sched_sp, f.sp);
			live += !f.done;
		}
		if (live > 0 && b.steps == before) return false;
	}
	return true;
}

} // namespace
} // namespace emu

extern "C" {

// prefixd_emu_kernels returns the number of kernels and, for i < that,
// prefixd_emu_kernel_name their names.
int prefixd_emu_kernels(void) {
	int n;
	prefixd_emu_table_f32(&n);
	return n;
}

const char *prefixd_emu_kernel_name(int i) {
	int n;
	return prefixd_emu_table_f32(&n)[i].name;
}

// prefixd_emu_launch runs kernel name of element type dtype (0 bf16, 1
// f16, 2 f32) over grid g and block b with nargs parameters in 8-byte
// slots. sched orders the threads between barriers: 0 forward, 1 reverse,
// other values a shuffle seeded by it. It returns 0, or -1 with a message
// in err.
int prefixd_emu_launch(int dtype, const char *name, const unsigned *g, const unsigned *b, const uint64_t *args,
		       int nargs, int sched, char *err, int errlen) {
	int n = 0;
	const emu::Entry *table = dtype == 0 ? prefixd_emu_table_bf16(&n)
				  : dtype == 1 ? prefixd_emu_table_f16(&n)
					       : prefixd_emu_table_f32(&n);
	const emu::Entry *e = nullptr;
	for (int i = 0; i < n; i++)
		if (strcmp(table[i].name, name) == 0) e = &table[i];
	if (!e) return snprintf(err, errlen, "no kernel %s", name), -1;
	if (e->nargs != nargs) return snprintf(err, errlen, "%s takes %d parameters, got %d", name, e->nargs, nargs), -1;
	long threads = (long)b[0] * b[1] * b[2];
	if (threads < 1 || threads > 1024 || g[0] < 1 || g[1] < 1 || g[2] < 1 || g[1] > 65535 || g[2] > 65535)
		return snprintf(err, errlen, "%s: bad launch shape grid (%u,%u,%u) block (%u,%u,%u)", name, g[0], g[1],
				g[2], b[0], b[1], b[2]),
		       -1;
	emu::Block blk;
	blk.n = (int)threads;
	blk.fibers.resize(blk.n);
	blk.warrived.assign((blk.n + 31) / 32, 0);
	blk.wgen.assign((blk.n + 31) / 32, 0);
	blk.xch.assign(blk.n, 0);
	blk.gather.assign(32 * (size_t)blk.n, 0);
	std::function<void()> body = [e, args] { e->call(args); };
	blk.body = &body;
	emu::Stacks &st = *emu::stacks_for(blk.n);
	if (!st.base) return snprintf(err, errlen, "%s: no memory for %d stacks", name, blk.n), -1;
	emu::block_dim = emu::dim3{b[0], b[1], b[2]};
	emu::grid_dim = emu::dim3{g[0], g[1], g[2]};
	emu::blk = &blk;
	uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)sched;
	// The blocks run in the schedule's order too, as a GPU runs them in
	// no set order: forward, reversed, or shuffled (up to 2^20 blocks; a
	// larger grid runs forward).
	long nb = (long)g[0] * g[1] * g[2];
	std::vector<int> border(sched >= 2 && nb <= (1L << 20) ? nb : 0);
	if (!border.empty()) emu::next_order(border, sched, rng);
	int rc = 0;
	for (long i = 0; i < nb && rc == 0; i++) {
		long k = !border.empty() ? border[i] : sched == 1 ? nb - 1 - i : i;
		unsigned x = (unsigned)(k % g[0]), y = (unsigned)(k / g[0] % g[1]), z = (unsigned)(k / g[0] / g[1]);
		emu::block_idx = emu::dim3{x, y, z};
		if (!emu::run_block(blk, st, sched, rng))
			rc = -1, snprintf(err, errlen, "%s: block (%u,%u,%u): threads wait at a barrier that others never reach",
					  name, x, y, z);
	}
	emu::blk = nullptr;
	emu::cur = nullptr;
	return rc;
}
}
