#!/usr/bin/env bash
# Builds and runs prefixd's GPU checks.
#
#   scripts/gpu-check.sh build   here, with Go and scripts/cuda-sdk.sh's kit:
#                                builds the `cuda` test binaries of
#                                kernels/cuda and kernels/cuda/gpu and packs
#                                them with NVRTC and stories260K into
#                                .gpu-check/ (git-ignored, about 40 MB)
#   scripts/gpu-check.sh run [STEP...]
#                                on the GPU machine (no Go needed), from the
#                                repository root with .gpu-check/ beside it:
#                                runs the plan below, or only the steps named
#
# The plan puts the headline figures first, then the tests, then the
# sanitizers. Each step has its own timeout, and the whole plan fits
# PREFIXD_GPU_BUDGET seconds (540: one device call is at most 600): a step
# gets what is left when its own timeout would overrun, and none starts
# with less than 10 s left. The report is rewritten before and after every
# step, so a run killed midway still leaves one: report.json (a `steps`
# list, each with name, status and exit code, plus the figures and test
# results) and report.md, with each step's log, in $REPORT_DIR, else
# ./gpu-report. Where $OUT is set instead (the device tool, which brings
# back at most 8 files), the steps write to a temporary folder and $OUT
# gets report.json, report.md and logs.tgz (every log, the state file and
# e2e's CPU profile of the host), rewritten after every step.
#
#   step              timeout  what
#   e2e                 150 s  engine end to end, TinyLlama-1.1B's shape in bf16:
#                              64 x (1,056 prompt + 128 generated), gen tok/s,
#                              steps, those run from a CUDA graph, seconds in
#                              the device's hand-overs (launches and GPU
#                              waits; the rest is host work); the distinct
#                              prompts again without graphs
#   decode-attention     25 s  decode attention's GB/s at several splits
#                              (attn_decode; attn and attn_decode_tc for
#                              comparison) vs a device-to-device copy
#   kernel-benchmarks    30 s  prefill attention's TFLOP/s, 8 x 1,056 tokens
#                              (attn_prefill on tensor cores, and attn);
#                              sampling 64 rows of 32,000 on the device vs
#                              reading their logits back
#   kernel-tests         50 s  every kernel against the CPU, KVStore, cuBLAS,
#                              a captured graph, launch limits, memory after
#                              Close
#   runner-tests         80 s  the model runner against the CPU runner,
#                              stories260K greedy, greedy rows' argmax on
#                              the device, the engine on the GPU
#   memcheck             60 s  kernel tests under memcheck with the leak check
#   memcheck-cublas      25 s  cuBLAS products, alone and in a graph, under
#                              memcheck (no leak check:
#                              cuBLAS keeps memory for the process by design)
#   runner-memcheck      60 s  the runner's forward pass and its device
#                              argmax under memcheck
#   racecheck            45 s  kernel tests under racecheck
#   profile              40 s  Nsight Compute's view of one decode-attention
#                              launch (speed of light, occupancy, memory,
#                              warp stalls): its log, for the next kernel work
#
# PREFIXD_GPU_EMULATE=1 scripts/gpu-check.sh run rehearses the same plan
# on the CPU emulator (kernels/cuda/emu), which CI does: it builds the
# test binaries without the cuda tag (so it needs Go, not .gpu-check/),
# runs the benchmarks at tiny shapes and a few tests of each step (the
# sanitizer steps run theirs without a sanitizer, the profile step its
# benchmark without Nsight Compute; the emulator's shuffled thread
# schedule stands in for racecheck), and writes the same report.
#
# With the device tool: build here, then one call with carry [".gpu-check"]
# and the command `scripts/gpu-check.sh run`. The run exits non-zero unless
# every step passed; the report is written either way.
set -euo pipefail
cd "$(dirname "$0")/.."
pack=.gpu-check
budget=${PREFIXD_GPU_BUDGET:-540}

# plan is the steps in order with their timeouts in seconds.
plan=(
	"e2e 150"
	"decode-attention 25"
	"kernel-benchmarks 30"
	"kernel-tests 50"
	"runner-tests 80"
	"memcheck 60"
	"memcheck-cublas 25"
	"runner-memcheck 60"
	"racecheck 45"
	"profile 40"
)

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

# step_command NAME SECONDS sets cmd to step NAME's command, given the
# seconds it may take (the test binary's own timeout is 5 s shorter, so
# that a hung test prints its goroutines before the step is killed).
step_command() {
	local name=$1 t=$2 san=() prof=()
	local kern=("$kernels_bin") runner=(env PREFIXD_TEST_MODELS="$models" "$bins/gpu.test")
	if [ "$emulate" = 0 ]; then
		san=("$sanitizer" --error-exitcode 1 --tool)
		# Nsight Compute on the clocks as they run (the device tool's
		# machines must keep theirs), the first decode-attention launch.
		prof=("$ncu" --clock-control none --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis
			--section WarpStateStats --section SchedulerStats -k regex:attn_decode -c 1)
	fi
	case "$name" in
	e2e) cmd=("${runner[@]}" -test.run '^$' -test.bench EndToEnd -test.benchtime 1x -test.cpuprofile "$out/e2e-cpu.pprof") ;;
	decode-attention) cmd=("${kern[@]}" -test.run '^$' -test.bench DecodeAttention -test.benchtime "$attn_iters") ;;
	kernel-benchmarks) cmd=("${kern[@]}" -test.run '^$' -test.bench 'PrefillAttention|DeviceSampling' -test.benchtime "$prefill_iters") ;;
	kernel-tests) cmd=("${kern[@]}" -test.v -test.run "${sel_kernel_tests:-.}") ;;
	runner-tests) cmd=("${runner[@]}" -test.v -test.run "${sel_runner_tests:-.}" -test.skip "${skip_runner_tests:-^$}") ;;
	memcheck) cmd=(${san[@]+"${san[@]}" memcheck --leak-check full} "${kern[@]}" -test.run "$sel_memcheck") ;;
	memcheck-cublas) cmd=(${san[@]+"${san[@]}" memcheck} "${kern[@]}" -test.run 'TestMatMulT|TestGraph') ;;
	runner-memcheck) cmd=(${san[@]+"${san[@]}" memcheck} "${runner[@]}" -test.run "$sel_runner_memcheck") ;;
	racecheck) cmd=(${san[@]+"${san[@]}" racecheck} "${kern[@]}" -test.run "$sel_racecheck" -test.skip "${skip_racecheck:-^$}") ;;
	profile) cmd=(${prof[@]+"${prof[@]}"} "${kern[@]}" -test.run '^$' -test.bench 'DecodeAttention/^attention$/split=auto' -test.benchtime 1x) ;;
	*)
		echo "gpu-check: no step $name" >&2
		return 1
		;;
	esac
	cmd+=(-test.count=1 "-test.timeout=$((t > 10 ? t - 5 : t))s")
}

run() {
	emulate=${PREFIXD_GPU_EMULATE:-0}
	out="${REPORT_DIR:-gpu-report}" publish=
	if [ -z "${REPORT_DIR:-}" ] && [ -n "${OUT:-}" ]; then
		out=$(mktemp -d) publish=$OUT
	fi
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	local only=" $* "
	for s in "$@"; do
		printf '%s\n' "${plan[@]}" | grep -q "^$s " || { echo "gpu-check: no step $s" >&2; exit 2; }
	done
	if [ "$emulate" = 0 ]; then
		[ -x "$pack/cuda.test" ] || { echo "gpu-check: no $pack/cuda.test; run 'scripts/gpu-check.sh build' first" >&2; exit 2; }
		# NVRTC unpacked outside the pack, which stays small enough to carry.
		nvrtc=$(mktemp -d)
		trap 'rm -rf "$nvrtc"' EXIT
		tar -C "$nvrtc" -xJf "$pack/nvrtc.tar.xz"
		export LD_LIBRARY_PATH="$nvrtc:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		bins=$PWD/$pack models=$PWD/$pack commit=$(cat "$pack/commit")
		kernels_bin=$bins/cuda.test
		sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
		ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
		nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/device.txt" 2>/dev/null ||
			echo "unknown (no nvidia-smi)" >"$out/device.txt"
		attn_iters=200x prefill_iters=20x
		sel_memcheck='TestKernels|TestKVStore'
		# A cuda-tagged binary has the emulator's target too: the GPU's
		# subtests are named cuda-TYPE, the emulator's emu-TYPE. (-test.run
		# splits at every slash, even across |: one test per pattern.)
		skip_runner_tests=/emu
		sel_runner_memcheck='TestForwardMatchesCPU|TestForwardGreedy|TestForwardSample/cuda-bf16'
		# The head norm of a whole 2,048-token step is 65,536 blocks, slow
		# under racecheck and no different in its sharing from RMSNorm's.
		sel_racecheck=TestKernels skip_racecheck=TestKernels/HeadNormQwen3Step
	else
		# The emulator's test binaries, built here: the cuda tag would make
		# them exit where there is no GPU.
		bins=$(mktemp -d)
		trap 'rm -rf "$bins"' EXIT
		go test -c -o "$bins/emu.test" ./kernels/cuda/emu/
		go test -c -o "$bins/gpu.test" ./kernels/cuda/gpu/
		kernels_bin=$bins/emu.test
		models=$PWD/../shared/models
		commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
		echo "CPU emulator (kernels/cuda/emu), $(nproc) cores" >"$out/device.txt"
		attn_iters=2x prefill_iters=1x
		# A few tests a step: CI runs all of them in go test ./... .
		sel_kernel_tests='TestKernels$/.*/bf16-sched0'
		sel_runner_tests=/emu-bf16 skip_runner_tests=TestEndToEndBenchLogic # the e2e step ran its workloads
		sel_memcheck='TestKVStore|TestMemory|TestLaunchErrors'
		sel_runner_memcheck='TestBackendRefuses/emu'
		sel_racecheck='TestKernels$/(Attention|RMSNorm|Argmax|RoPEAppendKV)/f32-sched9'
	fi
	local start=$SECONDS state="$out/steps.tsv"
	: >"$state"
	for entry in "${plan[@]}"; do
		printf '%s\tpending\t\t\t%s\t%s.log\t\n' ${entry% *} ${entry#* } ${entry% *} >>"$state"
	done
	for entry in "${plan[@]}"; do
		local name=${entry% *} limit=${entry#* } status rc=
		# 5 s of each step's budget is for killing it (below).
		local left=$((budget - (SECONDS - start) - 5))
		local t=$((limit < left ? limit : left))
		if [ "$only" != "  " ] && [[ "$only" != *" $name "* ]]; then
			set_step "$name" "not selected" "" "" "$limit" ""
			continue
		fi
		if [ "$t" -lt 10 ]; then
			set_step "$name" "skipped: $((left + 5))s left of the ${budget}s budget" "" "" "$limit" ""
			report
			continue
		fi
		step_command "$name" "$t"
		set_step "$name" running "" "" "$t" "${cmd[*]}"
		report
		echo "== $name (up to ${t}s)" >&2
		local t0=$SECONDS
		# SIGQUIT makes a Go binary print every goroutine's stack, which says
		# where a hung step was (benchmarks run without -test.timeout's
		# alarm); what does not exit 5 s later is killed.
		timeout -s QUIT -k 5 "$t" "${cmd[@]}" >"$out/$name.log" 2>&1 || rc=$?
		rc=${rc:-0}
		if [ "$rc" = 124 ] || [ "$rc" = 137 ] || grep -q '^panic: test timed out' "$out/$name.log"; then
			status=timeout
		elif [ "$rc" = 0 ]; then
			status=pass
		else
			status=fail
		fi
		tail -n 5 "$out/$name.log" >&2
		set_step "$name" "$status" "$rc" "$((SECONDS - t0))" "$t" "${cmd[*]}"
		report
	done
	report
	echo "== done in $((SECONDS - start))s of ${budget}s" >&2
	cat "$out/report.md" 2>/dev/null || cat "$out/steps.tsv"
	# As report.json's ok: every step selected passed.
	awk -F '\t' '$2 == "pass" { p++ } $2 != "pass" && $2 != "not selected" { bad++ } END { exit !(p > 0 && !bad) }' \
		"$out/steps.tsv"
}

# set_step NAME STATUS RC SECONDS TIMEOUT COMMAND rewrites NAME's line of
# the state file (tab-separated: name, status, exit code, seconds,
# timeout, log, command).
set_step() {
	local tmp="$out/steps.tsv.tmp"
	awk -F '\t' -v OFS='\t' -v n="$1" -v s="$2" -v rc="$3" -v sec="$4" -v to="$5" -v cmd="$6" \
		'$1 == n { $2 = s; $3 = rc; $4 = sec; $5 = to; $7 = cmd } { print }' "$out/steps.tsv" >"$tmp"
	mv "$tmp" "$out/steps.tsv"
}

# report writes report.json and report.md from the state file and the
# steps' logs (whatever they hold so far). A failure to write them stops
# no step: the logs and steps.tsv are there.
report() {
	python3 - "$out" "$commit" "$budget" "$emulate" <<'PY' || echo "gpu-check: could not write the report" >&2
import datetime, json, os, pathlib, re, sys
out, commit, budget, emulate = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
def log(name):
    p = out / (name + ".log")
    return p.read_text(errors="replace").splitlines() if p.exists() else []
steps = []
for line in (out / "steps.tsv").read_text().splitlines():
    name, status, rc, sec, timeout, logname, cmd = line.split("\t")
    steps.append({"name": name, "status": status, "exit_code": int(rc) if rc else None,
                  "seconds": int(sec) if sec else None, "timeout_s": int(timeout), "log": logname, "command": cmd})
tests = {}
for name in ("kernel-tests", "runner-tests"):
    for line in log(name):
        m = re.match(r"^\s*--- (PASS|FAIL|SKIP): (\S+) \(([\d.]+)s\)", line)
        if m:
            tests[m.group(2)] = m.group(1)
def figures(step, bench, unit, key):
    """The sub-benchmarks of Benchmark<bench> in step's log: ns/op and unit (as key)."""
    got = {}
    for line in log(step):
        m = re.match(r"^Benchmark" + bench + r"/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+([\d.e+-]+) " + re.escape(unit), line)
        if m:
            got[m.group(1)] = {"ns_per_op": float(m.group(2)), key: float(m.group(3))}
    return got
bench = figures("decode-attention", "DecodeAttention", "GB/s", "GB_per_s")
prefill = figures("kernel-benchmarks", "PrefillAttention", "TFLOP/s", "TFLOP_per_s")
sampling = figures("kernel-benchmarks", "DeviceSampling", "rows/s", "rows_per_s")
copy = bench.get("copy", {}).get("GB_per_s")
# The kernel launch picks and attn_decode_tc (tensor cores), which it may pick once measured.
attn = {k: v for k, v in bench.items() if k.startswith(("attention/", "attention-tc/"))}
best = max(attn.items(), key=lambda kv: kv[1]["GB_per_s"], default=None)
e2e = {}
for line in log("e2e"):
    m = re.match(r"^BenchmarkEndToEnd/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(.*)", line)
    if m:
        units = {u: float(v) for v, u in re.findall(r"([\d.e+-]+) ([\w/-]+)", m.group(3))}
        e2e[m.group(1)] = {"seconds": float(m.group(2)) / 1e9, "gen_tok_per_s": units.get("gen-tok/s", 0),
                           "hit_rate": units.get("hit-rate", 0), "steps": units.get("steps"),
                           "graph_steps": units.get("graph-steps"), "device_s": units.get("device-s")}
kernels, cublas = {}, None
for line in log("kernel-tests"):
    m = re.search(r"kernel (\w+): (\d+) registers, (\d+) threads", line)
    if m:
        kernels[m.group(1)] = {"registers": int(m.group(2)), "max_threads": int(m.group(3))}
    m = re.search(r"cuBLAS library: (\S+)", line)
    if m:
        cublas = m.group(1)
elapsed = sum(s["seconds"] or 0 for s in steps)
report = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "commit": commit,
    "mode": "emulated" if emulate else "gpu",
    "device": (out / "device.txt").read_text().strip() if (out / "device.txt").exists() else "",
    "budget_s": budget,
    "elapsed_s": elapsed,
    # Steps left out by name (run STEP...) count neither way.
    "ok": all(s["status"] in ("pass", "not selected") for s in steps) and any(s["status"] == "pass" for s in steps),
    "steps": steps,
    "end_to_end": e2e,
    "decode_attention": bench,
    "best_attention_vs_copy": (best[1]["GB_per_s"] / copy) if best and copy else None,
    "best_attention": best[0] if best else None,
    "prefill_attention": prefill,
    "device_sampling": sampling,
    "cublas": cublas,
    "kernels": kernels,
    "tests": tests,
    "tests_failed": sorted(k for k, v in tests.items() if v == "FAIL"),
}
tmp = out / "report.json.tmp"
tmp.write_text(json.dumps(report, indent=2) + "\n")
os.replace(tmp, out / "report.json")
shape = "tiny shapes on the CPU emulator" if emulate else "TinyLlama-1.1B shape, bf16, random weights"
md = ["# prefixd GPU check", "", f"- date: {report['date']}", f"- commit: {commit}",
      f"- device: {report['device']}", f"- mode: {report['mode']}", f"- cuBLAS: {cublas or 'not loaded'}",
      f"- result: {'pass' if report['ok'] else 'not all steps passed'} ({elapsed} s of {budget} s)", "",
      "| step | status | exit | seconds | timeout |", "|---|---|---|---|---|"]
md += [f"| {s['name']} | {s['status']} | {'' if s['exit_code'] is None else s['exit_code']} | "
       f"{'' if s['seconds'] is None else s['seconds']} | {s['timeout_s']} |" for s in steps]
md += ["", f"End to end, {shape} (goal on the GPU: distinct >= 7,300 generated tok/s):", "",
       "| workload/mode | seconds | generated tok/s | cache hit rate | steps | from a CUDA graph | in the device's hand-overs |",
       "|---|---|---|---|---|---|---|"]
opt = lambda v, f: "" if v is None else f.format(v)
md += [f"| {k} | {v['seconds']:.2f} | {v['gen_tok_per_s']:.0f} | {v['hit_rate']:.2f} | {opt(v['steps'], '{:.0f}')} | "
       f"{opt(v['graph_steps'], '{:.0f}')} | {opt(v['device_s'], '{:.2f} s')} |" for k, v in e2e.items()]
md += ["", "Decode attention (K+V bytes read; copy: read+write):", "", "| case | time per step | GB/s |", "|---|---|---|"]
md += [f"| {k} | {v['ns_per_op']/1e3:.1f} us | {v['GB_per_s']:.3g} |" for k, v in bench.items()]
if report["best_attention_vs_copy"]:
    md += ["", f"Best attention / copy bandwidth: {100*report['best_attention_vs_copy']:.1f}% ({best[0]}; goal 80%)."]
md += ["", "Prefill attention (causal multiply-adds x 2):", "", "| kernel | time per step | TFLOP/s |", "|---|---|---|"]
md += [f"| {k} | {v['ns_per_op']/1e3:.1f} us | {v['TFLOP_per_s']:.3g} |" for k, v in prefill.items()]
md += ["", "Sampling on the device (sample/*: restoring the logits, then sample_rows):", "", "| case | time per step |", "|---|---|"]
md += [f"| {k} | {v['ns_per_op']/1e3:.1f} us |" for k, v in sampling.items()]
md += ["", f"Tests: {sum(v == 'PASS' for v in tests.values())} passed, {len(report['tests_failed'])} failed"
       + (": " + ", ".join(report["tests_failed"]) if report["tests_failed"] else ".")]
if kernels:
    md += ["", "Kernels (registers per thread, max threads per block): " +
           ", ".join(f"{k} {v['registers']}/{v['max_threads']}" for k, v in kernels.items())]
(out / "report.md").write_text("\n".join(md) + "\n")
PY
	if [ -n "$publish" ]; then
		cp "$out/report.json" "$out/report.md" "$publish/" 2>/dev/null
		tar -C "$out" -czf "$publish/logs.tgz.tmp" . && mv "$publish/logs.tgz.tmp" "$publish/logs.tgz"
	fi
}

case "${1:-}" in
build) build ;;
run)
	shift
	run "$@"
	;;
*)
	echo "usage: scripts/gpu-check.sh build | run [STEP...]" >&2
	exit 2
	;;
esac
