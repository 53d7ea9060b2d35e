#!/usr/bin/env bash
# Runs the kernel, model and engine test suites as the CPUs users have,
# whatever this machine's CPU is, under QEMU user mode (Debian's qemu-user,
# installed when missing):
#   avx2    x86-64 with AVX2, FMA and F16C but no AVX-512 (`-cpu max`:
#           QEMU 7.2 implements no AVX-512, so an EVEX instruction in an
#           AVX2 kernel dies with SIGILL here as on such a CPU)
#   noavx2  x86-64 with AVX but no AVX2, FMA or F16C (`-cpu SandyBridge`):
#           the run-time fallback to the pure-Go kernels, not the purego tag
#   arm64   arm64 (qemu-aarch64), which runs the pure-Go kernels
# Each test binary asserts, through PREFIXD_EXPECT_CPU, that the kernels
# picked the instruction set the emulated CPU has. Two tests are skipped
# there: the EVEX guard, which builds and disassembles the daemon natively,
# and cpufeat's TestEnvCap, which runs its own binary again outside the
# emulator (on the host's CPU, or not at all for arm64).
#
# usage: scripts/cpu-portability.sh [avx2|noavx2|arm64]...   (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(./internal/cpufeat ./kernels ./kernels/cpu ./kernels/quant ./model ./engine)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(avx2 noavx2 arm64)

if ! command -v qemu-x86_64 >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
	echo "installing qemu-user" >&2
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user >/dev/null; then
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user >/dev/null
	fi
fi

bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
status=0
for target in "${targets[@]}"; do
	case $target in
	avx2) goarch=amd64 run=(qemu-x86_64 -cpu max) expect=avx2 ;;
	noavx2) goarch=amd64 run=(qemu-x86_64 -cpu SandyBridge) expect=generic ;;
	arm64) goarch=arm64 run=(qemu-aarch64) expect=generic ;;
	*) echo "unknown target $target (want avx2, noavx2 or arm64)" >&2; exit 2 ;;
	esac
	for pkg in "${pkgs[@]}"; do
		bin=$bindir/$target-$(basename "$pkg").test
		GOARCH=$goarch CGO_ENABLED=0 go test -c -o "$bin" "$pkg"
		start=$(date +%s)
		# Test binaries run in their package's folder, as go test runs them.
		if (cd "$pkg" && PREFIXD_EXPECT_CPU=$expect "${run[@]}" "$bin" -test.count=1 -test.skip '^(TestNoEVEXOutsideAVX512Kernels|TestEnvCap)$' >"$bin.log" 2>&1); then
			echo "ok   $target $pkg ($(($(date +%s) - start)) s)"
		else
			echo "FAIL $target $pkg ($(($(date +%s) - start)) s):"
			tail -n 40 "$bin.log"
			status=1
		fi
	done
done
exit $status
