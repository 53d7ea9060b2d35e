#!/bin/sh
# Regenerates BENCHMARKS.md's measured section and docs/bench/*.png with the
# full benchmark suite on the built-in model (a few minutes on 2 cores).
# Extra arguments go to `prefixd bench` (e.g. --workloads skew-seed).
# The JSON report and the plots also land in bench-out/ (git-ignored); the
# TTL simulation's table and curves on a synthetic trace go to
# bench-out/ttl-sim.txt (spliced into BENCHMARKS.md) and docs/bench/ttl-*.png.
set -eu
cd "$(dirname "$0")/.."
go build -o bench-out/prefixd ./cmd/prefixd
bench-out/prefixd bench --out bench-out --markdown BENCHMARKS.md --plot-dir docs/bench "$@"
bench-out/prefixd ttl-sim --synth --out bench-out > bench-out/ttl-sim.txt
cp bench-out/ttl-hit.png bench-out/ttl-memory.png docs/bench/
cat bench-out/ttl-sim.txt
# Splice the TTL table between BENCHMARKS.md's ttl markers.
awk -v table=bench-out/ttl-sim.txt '
	/<!-- ttl:begin/ { print; print ""; print "    prefixd ttl-sim --synth"; print "";
		while ((getline line < table) > 0) print "    " line; print ""; skip = 1; next }
	/<!-- ttl:end -->/ { skip = 0 }
	!skip { print }
' BENCHMARKS.md > bench-out/BENCHMARKS.md.new && mv bench-out/BENCHMARKS.md.new BENCHMARKS.md
