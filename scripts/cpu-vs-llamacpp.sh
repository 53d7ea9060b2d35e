#!/bin/sh
# Compares prefixd's CPU decode and prompt processing with llama.cpp's on the
# same random-weight GGUF files, as issue 13 measures them: a 110M Llama (dim
# 768, 12 layers, 12 heads, hidden 2048, vocabulary 32000) as F16, BF16, Q8_0
# and F32 (written by model's TestWriteBenchModels) and Q4_K_M, Q5_K_M and
# Q6_K (llama.cpp's own llama-quantize on the F16 file); `llama-bench -p 512
# -n 128 -t 2` (and -t 1, which a loaded machine's scheduler hurts less: its
# threads spin at barriers) against model's BenchmarkPrefill512 and
# BenchmarkTG128 on 2 threads, interleaved RUNS times, medians; the read
# bandwidth of 2 threads (kernels/quant's BenchmarkMemBandwidth) and the load
# average measured in each round too, and the bandwidth again just before and
# after each file's decode, so that each decode has its own bound beside the
# one from the round's median bandwidth, and batched decode (16 sequences
# against 1, BenchmarkDecodeBatch16/1, beside llama.cpp's own
# llama-batched-bench -npp 128 -ntg 128 -npl 1,16 when LLAMA_CPP_BIN has it).
# F32 takes part in the batched comparison only. Prints two Markdown tables.
#
# usage: scripts/cpu-vs-llamacpp.sh [LLAMA_CPP_BIN] [RUNS]
#   LLAMA_CPP_BIN  folder with llama-bench and llama-quantize (a CPU Release
#                  build of llama.cpp); default /work/peer/llama.cpp/build/bin
#   RUNS           rounds (default 3)
# PREFIXD_BENCH_FILES picks the files (default: f16 bf16 q8_0 q4_k_m q5_k_m
# q6_k f32), PREFIXD_BENCH_LLAMA_THREADS llama-bench's thread counts (default
# 1,2; one of them alone halves its time, the tables then show n/a for the
# other: under a heavy load llama.cpp's 2 threads, spinning at barriers,
# can slow to a crawl), and PREFIXD_BENCH_LLAMA_BATCHED=0 skips
# llama-batched-bench, the longest of the runs. Without AVX-512: PREFIXD_CPU=avx2 caps prefixd's kernels at
# AVX2 (internal/cpufeat), and LLAMA_CPP_BIN names a llama.cpp built with
# -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
# -DGGML_AVX512=OFF; the output names the level prefixd's kernels ran at.
# PREFIXD_BENCH_PRESET=tinyllama-1.1b (a `prefixd gen-model` preset) compares
# files of that shape instead, named after it: gen-model writes the F16,
# BF16, Q8_0 and F32 ones, with the tokenizer of PREFIXD_BENCH_TOKENIZER
# (default ../shared/models/vocab/ggml-vocab-llama-spm.gguf: llama.cpp
# loads no model without one), llama-quantize the K-quant mixes from the F16.
# The files and the test binaries go to $PREFIXD_BENCH_DIR (default
# bench-out/cpu-vs-llamacpp, git-ignored); existing model files are reused.
set -eu
cd "$(dirname "$0")/.."
bin=${1:-/work/peer/llama.cpp/build/bin}
runs=${2:-3}
dir=${PREFIXD_BENCH_DIR:-bench-out/cpu-vs-llamacpp}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# K/V in F16 on both sides: llama.cpp's default and serve's.
export PREFIXD_BENCH_KV=${PREFIXD_BENCH_KV:-f16}
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The files: the 110M model's, or a gen-model preset's (PREFIXD_BENCH_PRESET).
preset=${PREFIXD_BENCH_PRESET:-}
name=${preset:-llama-110m}
if [ -z "$preset" ] && [ ! -f "$dir/$name-bf16.gguf" ]; then
	PREFIXD_WRITE_BENCH_MODELS=$dir go test -count=1 -run '^TestWriteBenchModels$' ./model/ >&2
fi
files=${PREFIXD_BENCH_FILES:-f16 bf16 q8_0 q4_k_m q5_k_m q6_k f32}
for t in f16 $files; do
	[ -f "$dir/$name-$t.gguf" ] && continue
	case $t in
	q4_k_m | q5_k_m | q6_k)
		"$bin/llama-quantize" "$dir/$name-f16.gguf" "$dir/$name-$t.gguf" \
			"$(echo "$t" | tr a-z A-Z)" >/dev/null 2>&1
		;;
	*)
		go run ./cmd/prefixd gen-model --preset "$preset" --type "$t" --out "$dir/$name-$t.gguf" \
			--tokenizer "${PREFIXD_BENCH_TOKENIZER:-../shared/models/vocab/ggml-vocab-llama-spm.gguf}" >&2
		;;
	esac
done
go test -c -o "$dir/model.test" ./model/
go test -c -o "$dir/quant.test" ./kernels/quant/
# The instruction set prefixd's kernels run at, PREFIXD_CPU's cap applied.
level=$(cd kernels/quant && "$dir/quant.test" -test.run '^TestKernelLevel$' -test.v |
	sed -n 's/.*the kernels use \([a-z0-9]*\) of \([a-z0-9]*\).*/\1 (the CPU has \2)/p')
out=$dir/results.tsv
: >"$out"
# prefixd FILE TYPE BENCHES TIMES runs model's benchmarks BENCHES (a regexp
# of names without Benchmark) TIMES times on FILE and prints their tokens/s.
prefixd() {
	(cd model && PREFIXD_BENCH_MODEL=$1 "$dir/model.test" -test.run '^$' \
		-test.bench "^Benchmark($3)\$" -test.benchtime "$4x") |
		awk -v t="$2" '/^Benchmark/ { n = $1; sub(/-[0-9]+$/, "", n); sub(/^Benchmark/, "", n)
			for (i = 1; i <= NF; i++) if ($i == "tokens/s") printf "prefixd_%s\t%s\t%s\n", n, t, $(i-1) }'
}
# bandwidth prints the read bandwidth of 2 threads, MB/s.
bandwidth() {
	(cd kernels/quant && "$dir/quant.test" -test.run '^$' -test.bench '^BenchmarkMemBandwidth$' -test.benchtime 20x) |
		awk '/MemBandwidth/ { for (i = 1; i <= NF; i++) if ($i == "MB/s") print $(i-1) }'
}
for r in $(seq "$runs"); do
	printf 'bw\t-\t%s\n' "$(bandwidth)" >>"$out"
	printf 'load\t-\t%s\n' "$(cut -d' ' -f1 /proc/loadavg)" >>"$out"
	for t in $files; do
		f=$dir/$name-$t.gguf
		benches='DecodeBatch1|DecodeBatch16'
		case $t in f32) ;; *)
			benches="Prefill512|$benches"
			"$bin/llama-bench" -m "$f" -p 512 -n 128 -t "${PREFIXD_BENCH_LLAMA_THREADS:-1,2}" -r 1 -o jsonl 2>/dev/null |
				python3 -c 'import json,sys
for l in sys.stdin:
    d = json.loads(l)
    print("llama_%s_t%d\t%s\t%s" % ("pp" if d["n_prompt"] else "tg", d["n_threads"], sys.argv[1], d["avg_ts"]))' "$t" >>"$out"
			;;
		esac
		if [ -x "$bin/llama-batched-bench" ] && [ "${PREFIXD_BENCH_LLAMA_BATCHED:-1}" != 0 ]; then
			"$bin/llama-batched-bench" -m "$f" -c 4608 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,16 -t 2 \
				--output-format jsonl 2>/dev/null |
				python3 -c 'import json,sys
for l in sys.stdin:
    if l.startswith("{"):
        d = json.loads(l)
        print("llama_batch%d\t%s\t%s" % (d["pl"], sys.argv[1], d["speed_tg"]))' "$t" >>"$out"
		fi
		# Decode with the file's own bound: the bandwidth just before and
		# just after it, which the host's other tenants move by a third
		# within a round.
		case $t in f32) ;; *)
			before=$(bandwidth)
			prefixd "$f" "$t" TG128 3 >>"$out"
			printf 'bwpair\t%s\t%s\n' "$t" "$(echo "$before $(bandwidth)" | awk '{ print ($1 + $2) / 2 }')" >>"$out"
			;;
		esac
		prefixd "$f" "$t" "$benches" 2 >>"$out"
	done
	printf 'load\t-\t%s\n' "$(cut -d' ' -f1 /proc/loadavg)" >>"$out"
done
python3 - "$out" "$level" "$bin" "$name" $files <<'PY'
import os, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    k, t, v = line.split("\t")
    rows.setdefault((k, t), []).append(float(v))
med = {k: statistics.median(v) for k, v in rows.items()}
bw = med[("bw", "-")] * 1e6
d = os.path.dirname(sys.argv[1])
name, files = sys.argv[4], sys.argv[5:]
size = {t: os.path.getsize(os.path.join(d, "%s-%s.gguf" % (name, t))) for t in files if t != "f32"}
n, load = len(rows[("bw", "-")]), rows[("load", "-")]
print("%s-*.gguf, medians of %d interleaved rounds; read bandwidth of 2 threads %.1f GB/s (%.1f-%.1f); load average %.1f-%.1f (start and end of each round) on %d CPUs; prefixd's kernels %s, K/V %s; llama.cpp %s." % (
    name, n, bw / 1e9, min(rows[("bw", "-")]) / 1e3, max(rows[("bw", "-")]) / 1e3, min(load), max(load), os.cpu_count(),
    sys.argv[2], os.environ["PREFIXD_BENCH_KV"], sys.argv[3]))
print()
print("| file | size | pp512 llama.cpp t2 (t1) | pp512 prefixd t2 | ratio to t2 (t1) | tg128 llama.cpp t2 (t1) | tg128 prefixd t2 | ratio to t2 (t1) | prefixd decode / bandwidth bound | the same, each round's decode / its own bound: median (range) | prefixd 16 seqs / 1 | llama.cpp 16 seqs / 1 | 16 seqs tok/s prefixd / llama.cpp |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
def fig(x, fmt):  # a llama-bench figure, absent for a thread count it did not run
    return "n/a" if x is None else fmt % x
def ratio(a, b):
    return b and a / b
for t in size:
    lp, lp1, pp = med.get(("llama_pp_t2", t)), med.get(("llama_pp_t1", t)), med[("prefixd_Prefill512", t)]
    lt, lt1, pt = med.get(("llama_tg_t2", t)), med.get(("llama_tg_t1", t)), med[("prefixd_TG128", t)]
    bound = bw / size[t]
    paired = [100 * tg * size[t] / (b * 1e6) for tg, b in zip(rows[("prefixd_TG128", t)], rows[("bwpair", t)])]
    b16, b1 = med[("prefixd_DecodeBatch16", t)], med[("prefixd_DecodeBatch1", t)]
    peer = "n/a | n/a"
    if ("llama_batch16", t) in med:
        l16, l1 = med[("llama_batch16", t)], med[("llama_batch1", t)]
        peer = "%.1fx | %.0f / %.0f (%.2fx)" % (l16 / l1, b16, l16, b16 / l16)
    print("| %s | %d MB | %s (%s) | %.1f | %s (%s) | %s (%s) | %.1f | %s (%s) | %.0f%% of %.0f tok/s | %.0f%% (%.0f-%.0f%%) | %.1fx | %s |" % (
        t.upper(), size[t] / 1e6, fig(lp, "%.1f"), fig(lp1, "%.1f"), pp, fig(ratio(pp, lp), "%.2fx"),
        fig(ratio(pp, lp1), "%.2fx"), fig(lt, "%.1f"), fig(lt1, "%.1f"), pt, fig(ratio(pt, lt), "%.2fx"),
        fig(ratio(pt, lt1), "%.2fx"), 100 * pt / bound, bound, statistics.median(paired), min(paired), max(paired),
        b16 / b1, peer))
print()
print("Batched decode, 16 sequences of 128-255 tokens against one (BenchmarkDecodeBatch16/1; llama-batched-bench -npp 128 -ntg 128 -npl 1,16):")
print()
print("| file | size | bandwidth bound, 1 seq | prefixd 1 seq tok/s | prefixd 16 seqs tok/s | prefixd 16/1 | llama.cpp 1 / 16 seqs tok/s | llama.cpp 16/1 |")
print("|---|---|---|---|---|---|---|---|")
for t in files:
    s = os.path.getsize(os.path.join(d, "%s-%s.gguf" % (name, t)))
    b16, b1 = med[("prefixd_DecodeBatch16", t)], med[("prefixd_DecodeBatch1", t)]
    peer = "n/a | n/a"
    if ("llama_batch16", t) in med:
        l16, l1 = med[("llama_batch16", t)], med[("llama_batch1", t)]
        peer = "%.0f / %.0f | %.1fx" % (l1, l16, l16 / l1)
    print("| %s | %d MB | %.0f tok/s | %.0f | %.0f | %.1fx | %s |" % (t.upper(), s / 1e6, bw / s, b1, b16, b16 / b1, peer))
PY
