#!/usr/bin/env bash
# Builds and runs prefixd's GPU checks.
#
#   scripts/gpu-check.sh build   here, with Go and scripts/cuda-sdk.sh's kit:
#                                builds the `cuda` test binary of kernels/cuda
#                                and packs it with NVRTC into .gpu-check/
#                                (git-ignored, about 20 MB)
#   scripts/gpu-check.sh run     on the GPU machine (no Go needed), from the
#                                repository root with .gpu-check/ beside it:
#                                runs every GPU test, the kernel tests under
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
	sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
	step memcheck memcheck.log "$sanitizer" --tool memcheck --error-exitcode 1 --leak-check full \
		"$bin" -test.run 'TestKernels|TestKVStore|TestMatMulT' -test.count=1
	step racecheck racecheck.log "$sanitizer" --tool racecheck --error-exitcode 1 \
		"$bin" -test.run 'TestKernels' -test.count=1
	step bench bench.log "$bin" -test.run '^$' -test.bench DecodeAttention -test.benchtime 200x -test.count=1
	python3 - "$out" "$(cat "$pack/commit")" "${status[@]}" <<'PY'
import json, re, sys, datetime, pathlib
out, commit, statuses = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
steps = {s.split("=")[0]: int(s.split("=")[1]) for s in statuses}
tests = {}
for line in (out / "tests.log").read_text(errors="replace").splitlines():
    m = re.match(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(([\d.]+)s\)", line)
    if m:
        tests[m.group(2)] = m.group(1)
bench = {}
for line in (out / "bench.log").read_text(errors="replace").splitlines():
    m = re.match(r"^BenchmarkDecodeAttention/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) GB/s", line)
    if m:
        bench[m.group(1)] = {"ns_per_op": float(m.group(2)), "GB_per_s": float(m.group(3))}
copy = bench.get("copy", {}).get("GB_per_s")
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
