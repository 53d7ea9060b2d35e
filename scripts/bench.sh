#!/bin/sh
# Regenerates BENCHMARKS.md's measured section and docs/bench/*.png with the
# full benchmark suite on the built-in model (a few minutes on 2 cores).
# Extra arguments go to `prefixd bench` (e.g. --workloads skew-seed).
# The JSON report and the plots also land in bench-out/ (git-ignored); the
# TTL simulation's table and curves on a synthetic trace go to
# bench-out/ttl-sim.txt (spliced into BENCHMARKS.md) and docs/bench/ttl-*.png, the
# replica routing simulation's to bench-out/route-sim.txt and docs/bench/route-sim.png.
set -eu
cd "$(dirname "$0")/.."
go build -o bench-out/prefixd ./cmd/prefixd
bench-out/prefixd bench --out bench-out --markdown BENCHMARKS.md --plot-dir docs/bench "$@"
bench-out/prefixd ttl-sim --synth --out bench-out > bench-out/ttl-sim.txt
cp bench-out/ttl-hit.png bench-out/ttl-memory.png docs/bench/
cat bench-out/ttl-sim.txt
bench-out/prefixd route-sim --synth --out bench-out > bench-out/route-sim.txt
cp bench-out/route-sim.png docs/bench/
cat bench-out/route-sim.txt
# splice MARK TABLE CMD: put TABLE, the output of CMD, between BENCHMARKS.md's MARK markers.
splice() {
	awk -v table="$2" -v begin="<!-- $1:begin" -v end="<!-- $1:end -->" -v cmd="$3" '
		index($0, begin) == 1 { print; print ""; print "    " cmd; print "";
			while ((getline line < table) > 0) print (line == "" ? "" : "    " line); print ""; skip = 1; next }
		index($0, end) == 1 { skip = 0 }
		!skip { print }
	' BENCHMARKS.md > bench-out/BENCHMARKS.md.new && mv bench-out/BENCHMARKS.md.new BENCHMARKS.md
}
splice ttl bench-out/ttl-sim.txt "prefixd ttl-sim --synth"
splice routesim bench-out/route-sim.txt "prefixd route-sim --synth"
