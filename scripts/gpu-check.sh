#!/usr/bin/env bash
# Builds and runs prefixd's GPU checks.
#
#   scripts/gpu-check.sh build   here, with Go and scripts/cuda-sdk.sh's kit:
#                                builds the `cuda` test binary of kernels/cuda
#                                and packs it with NVRTC into .gpu-check/
#                                (git-ignored, about 20 MB)
#   scripts/gpu-check.sh run     on the GPU machine (no Go needed), from the
#                                repository root with .gpu-check/ beside it:
#                                runs every GPU test (kernels, then the model
#                                runner and the engine on it), the kernel tests under
#                                compute-sanitizer memcheck and racecheck, and
#                                the decode-attention benchmark, and writes
#                                report.json and report.md (plus each log) to
#                                $REPORT_DIR, else $OUT, else ./gpu-report
#
# With the device tool: build here, then run with carry [".gpu-check"] and
# the command `scripts/gpu-check.sh run`. The run exits non-zero if a test or
# a sanitizer check failed; the report is written either way.
set -euo pipefail
cd "$(dirname "$0")/.."
pack=.gpu-check

build() {
	eval "$(scripts/cuda-sdk.sh)"
	rm -rf "$pack"
	mkdir -p "$pack"
	go test -c -tags cuda -o "$pack/cuda.test" ./kernels/cuda/
	go test -c -tags cuda -o "$pack/gpu.test" ./kernels/cuda/gpu/
	# The model runner's greedy test reads stories260K (1 MB).
	cp ../shared/models/stories260K.bin "$pack/"
	lib="$PREFIXD_CUDA_SDK/root/usr/lib/x86_64-linux-gnu"
	# NVRTC is 60 MB unpacked; xz brings it to a fifth.
	tar -C "$lib" -cJf "$pack/nvrtc.tar.xz" libnvrtc.so.11.2 libnvrtc.so.11.8.89 \
		libnvrtc-builtins.so.11.8 libnvrtc-builtins.so.11.8.89
	git rev-parse HEAD >"$pack/commit" 2>/dev/null || echo unknown >"$pack/commit"
	du -sh "$pack" >&2
}

run() {
	[ -x "$pack/cuda.test" ] || { echo "gpu-check: no $pack/cuda.test; run 'scripts/gpu-check.sh build' first" >&2; exit 2; }
	out="${REPORT_DIR:-${OUT:-gpu-report}}"
	mkdir -p "$out" "$pack/lib"
	tar -C "$pack/lib" -xJf "$pack/nvrtc.tar.xz"
	export LD_LIBRARY_PATH="$PWD/$pack/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	bin="$PWD/$pack/cuda.test"
	status=()
	step() { # step NAME LOG COMMAND...: runs and records the exit status
		local name=$1 log=$2
		shift 2
		echo "== $name" >&2
		local rc=0
		"$@" >"$out/$log" 2>&1 || rc=$?
		tail -n 5 "$out/$log" >&2
		status+=("$name=$rc")
	}
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/device.txt" 2>/dev/null ||
		echo "unknown (no nvidia-smi)" >"$out/device.txt"
	step tests tests.log "$bin" -test.v -test.count=1 -test.timeout=300s
	# The model runner (kernels/cuda/gpu) on the GPU and the emulator:
	# logits against the CPU runner, 256 greedy tokens of stories260K,
	# the engine end to end, no allocation left after Close.
	step runner runner.log env PREFIXD_TEST_MODELS="$PWD/$pack" "$PWD/$pack/gpu.test" -test.v -test.count=1 -test.timeout=600s
	sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
	step memcheck memcheck.log "$sanitizer" --tool memcheck --error-exitcode 1 --leak-check full \
		"$bin" -test.run 'TestKernels|TestKVStore|TestMatMulT' -test.count=1
	step runner-memcheck runner-memcheck.log "$sanitizer" --tool memcheck --error-exitcode 1 \
		"$PWD/$pack/gpu.test" -test.run 'TestForwardMatchesCPU/cuda|TestBackendRefuses/cuda' -test.count=1
	step racecheck racecheck.log "$sanitizer" --tool racecheck --error-exitcode 1 \
		"$bin" -test.run 'TestKernels' -test.count=1
	step bench bench.log "$bin" -test.run '^$' -test.bench DecodeAttention -test.benchtime 200x -test.count=1
	# End to end: the engine on the GPU runner, TinyLlama-1.1B's shape in
	# bf16 (random weights): 64 x (1,056 prompt + 128 generated), a shared
	# 1,024-token prefix with the cache on and off, skewed lengths under
	# continuous and static batching.
	step e2e e2e.log "$PWD/$pack/gpu.test" -test.run '^$' -test.bench EndToEnd -test.benchtime 1x -test.count=1 -test.timeout=900s
	python3 - "$out" "$(cat "$pack/commit")" "${status[@]}" <<'PY'
import json, re, sys, datetime, pathlib
out, commit, statuses = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
steps = {s.split("=")[0]: int(s.split("=")[1]) for s in statuses}
tests = {}
for line in (out / "tests.log").read_text(errors="replace").splitlines() + (out / "runner.log").read_text(errors="replace").splitlines():
    m = re.match(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(([\d.]+)s\)", line)
    if m:
        tests[m.group(2)] = m.group(1)
bench = {}
for line in (out / "bench.log").read_text(errors="replace").splitlines():
    m = re.match(r"^BenchmarkDecodeAttention/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) GB/s", line)
    if m:
        bench[m.group(1)] = {"ns_per_op": float(m.group(2)), "GB_per_s": float(m.group(3))}
copy = bench.get("copy", {}).get("GB_per_s")
e2e = {}
e2e_log = out / "e2e.log"
for line in (e2e_log.read_text(errors="replace").splitlines() if e2e_log.exists() else []):
    m = re.match(r"^BenchmarkEndToEnd/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) gen-tok/s\s+([\d.]+) hit-rate", line)
    if m:
        e2e[m.group(1)] = {"seconds": float(m.group(2)) / 1e9, "gen_tok_per_s": float(m.group(3)), "hit_rate": float(m.group(4))}
attn = {k: v for k, v in bench.items() if k.startswith("attention/")}
best = max(attn.items(), key=lambda kv: kv[1]["GB_per_s"], default=None)
report = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": commit,
    "device": (out / "device.txt").read_text().strip() if (out / "device.txt").exists() else "",
    "steps": steps,
    "ok": all(rc == 0 for rc in steps.values()),
    "tests": tests,
    "tests_failed": sorted(k for k, v in tests.items() if v == "FAIL"),
    "decode_attention": bench,
    "best_attention_vs_copy": (best[1]["GB_per_s"] / copy) if best and copy else None,
    "end_to_end": e2e,
}
(out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
md = [f"# prefixd GPU check", "", f"- date: {report['date']}", f"- commit: {commit}",
      f"- device: {report['device']}", f"- result: {'pass' if report['ok'] else 'FAIL'}", "",
      "| step | exit status |", "|---|---|"]
md += [f"| {k} | {v} |" for k, v in steps.items()]
md += ["", f"Tests: {sum(v == 'PASS' for v in tests.values())} passed, {len(report['tests_failed'])} failed"
       + (": " + ", ".join(report["tests_failed"]) if report["tests_failed"] else "."), "",
       "Decode attention, 64 sequences x 1,024 tokens, 32/4 heads of 64, bf16 (K+V bytes read; copy: read+write):", "",
       "| case | time per step | GB/s |", "|---|---|---|"]
md += [f"| {k} | {v['ns_per_op']/1e3:.1f} us | {v['GB_per_s']:.0f} |" for k, v in bench.items()]
if report["best_attention_vs_copy"]:
    md += ["", f"Best attention / copy bandwidth: {100*report['best_attention_vs_copy']:.0f}% (goal 80%)."]
md += ["", "End to end, TinyLlama-1.1B shape, bf16, random weights (goal: distinct >= 7,300 generated tok/s):", "",
       "| workload/mode | seconds | generated tok/s | cache hit rate |", "|---|---|---|---|"]
md += [f"| {k} | {v['seconds']:.1f} | {v['gen_tok_per_s']:.0f} | {v['hit_rate']:.2f} |" for k, v in e2e.items()]
(out / "report.md").write_text("\n".join(md) + "\n")
print("\n".join(md))
PY
	for s in "${status[@]}"; do
		[ "${s#*=}" = 0 ] || exit 1
	done
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
	echo "usage: scripts/gpu-check.sh build|run" >&2
	exit 2
	;;
esac
