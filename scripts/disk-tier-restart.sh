#!/bin/sh
# Measures the disk tier across a restart, side by side in one run:
# the time to first token of a long prompt recomputed vs served from the
# disk tier after a restart (the same server, another prompt of the same
# length as the recomputed baseline), and the disk tier's read throughput
# (BenchmarkGet) beside a sequential read of a file of the same size on
# the same disk (both from the page cache: the records were just written);
# then `bench --http`'s chat workload on the built-in model (hit rates do
# not depend on the model) run, the server restarted, and run again: with
# the disk tier, and as the baseline without it.
# Usage: scripts/disk-tier-restart.sh MODEL.gguf [PROMPT_TOKENS]
set -eu
model=$1
n=${2:-2000}
cd "$(dirname "$0")/.."
go build -o bench-out/prefixd ./cmd/prefixd
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
addr=127.0.0.1:18180
serve() { # serve [FLAGS]: the model of the first part unless FLAGS say otherwise
	bench-out/prefixd serve ${1:---model $model} --addr $addr --threads "${THREADS:-2}" --max-running 2 \
		--admin-token t ${DISK:---disk-tier-dir $work/disk --disk-tier-bytes 4GiB} >>"$work/log" 2>&1 &
	pid=$!
	until grep -q "msg=listening" "$work/log" 2>/dev/null && curl -s http://$addr/v1/stats | grep -qv '"scanning":true'; do sleep 0.2; done
}
stop() { kill -TERM $pid; wait $pid || true; : >"$work/log"; }
prompt() { # prompt SEED: n token ids
	awk -v n="$n" -v s="$1" 'BEGIN { srand(s); printf "["; for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), 100 + int(rand() * 30000); printf "]" }'
}
ttft() { # ttft SEED: seconds for the request and its cached tokens (max_tokens 1: the prefill)
	prompt "$1" >"$work/p$1"
	printf '{"prompt_ids": %s, "max_tokens": 1, "ignore_eos": true}' "$(cat "$work/p$1")" >"$work/b$1"
	curl -s -o "$work/r$1" -w '%{time_total}' -H 'Content-Type: application/json' --data @"$work/b$1" http://$addr/generate
	printf ' %s\n' "$(grep -o '"cached_tokens":[0-9]*' "$work/r$1")"
}
serve
echo "run 1: prompt A cold: $(ttft 1)"
stop
serve
echo "run 2 (restarted): prompt B cold (recomputed): $(ttft 2)"
echo "run 2 (restarted): prompt A from the disk tier: $(ttft 1)"
curl -s http://$addr/v1/stats | grep -o '"disk_tier":{[^}]*}'
stop
go test -run '^$' -bench BenchmarkGet -benchtime 2s ./disktier | grep Benchmark
dd if=/dev/urandom of="$work/seq" bs=1M count=256 2>/dev/null
dd if="$work/seq" of=/dev/null bs=1M 2>&1 | tail -1
chat() { bench-out/prefixd bench --http http://$addr --workload chat --admin-token t --out "$work/chat" | grep -E '^(cache|turns)'; }
rm -rf "$work/disk"
for mode in disk none; do
	[ $mode = none ] && export DISK=" "
	serve " "
	echo "chat, $mode: before the restart"
	chat
	stop
	serve " "
	echo "chat, $mode: after the restart"
	chat
	stop
done
