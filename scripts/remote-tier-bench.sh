#!/bin/sh
# Two prefixd replicas behind round-robin, with and without a shared remote
# tier (a redis-server on loopback): N requests (default 32) sharing a
# PREFIX-token prompt prefix (default 2048) plus 32 tokens of their own,
# sent one after another, alternating replicas, max_tokens 1 (the time is
# the time to first token). Prints per configuration the prompt tokens the
# fleet computed and the TTFT p50/p90/max, then the fetch rule's
# measurements on the second replica and the break-even prefix length they
# give. Usage: scripts/remote-tier-bench.sh MODEL.gguf [PREFIX] [N]
set -eu
model=$1
prefix=${2:-2048}
n=${3:-32}
cd "$(dirname "$0")/.."
go build -o bench-out/prefixd ./cmd/prefixd
work=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null || true; done; rm -rf "$work"' EXIT
rport=18379
redis-server --port $rport --bind 127.0.0.1 --dir "$work" --save '' --appendonly no --maxmemory-policy volatile-lru >"$work/redis.log" 2>&1 &
pids="$pids $!"
until redis-cli -p $rport ping >/dev/null 2>&1; do sleep 0.1; done
ids() { # ids SEED COUNT: COUNT token ids
	awk -v n="$2" -v s="$1" 'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), 100 + int(rand() * 30000) }'
}
shared=$(ids 1 "$prefix")
serve() { # serve PORT [FLAGS]: starts a replica
	port=$1
	shift
	bench-out/prefixd serve --model "$model" --addr 127.0.0.1:$port --threads "${THREADS:-1}" --max-running 4 "$@" >"$work/log$port" 2>&1 &
	pids="$pids $!"
	until grep -q "msg=listening" "$work/log$port" 2>/dev/null; do sleep 0.2; done
}
run() { # run NAME PORT_A PORT_B
	: >"$work/ttft"
	i=0
	while [ $i -lt "$n" ]; do
		port=$2
		if [ $((i % 2)) -eq 1 ]; then port=$3; fi
		printf '{"prompt_ids": [%s,%s], "max_tokens": 1, "ignore_eos": true}' "$shared" "$(ids $((i + 100)) 32)" >"$work/body"
		curl -s -o /dev/null -w '%{time_total}\n' -H 'Content-Type: application/json' --data @"$work/body" http://127.0.0.1:$port/generate >>"$work/ttft"
		i=$((i + 1))
	done
	computed=0
	for port in $2 $3; do
		c=$(curl -s http://127.0.0.1:$port/v1/stats | grep -o '"prefill":[0-9]*' | head -1 | cut -d: -f2)
		computed=$((computed + c))
	done
	second=$(sed -n 2p "$work/ttft")
	sort -n "$work/ttft" | awk -v name="$1" -v c="$computed" -v second="$second" '{ t[NR] = $1 } END {
		printf "%-22s prompt tokens computed %6d   TTFT p50 %6.2f s  p90 %6.2f s  max %6.2f s  (the second replica'"'"'s first: %.2f s)\n",
			name, c, t[int(NR * 0.5 + 0.5)], t[int(NR * 0.9 + 0.5)], t[NR], second }'
}
serve 18281
serve 18282
run "without the tier" 18281 18282
serve 18283 --remote-tier redis://127.0.0.1:$rport/0
serve 18284 --remote-tier redis://127.0.0.1:$rport/0
run "with the remote tier" 18283 18284
curl -s http://127.0.0.1:18284/v1/stats | grep -o '"remote_tier":{[^}]*}[^}]*}' | tee "$work/remote"
# The break-even prefix: the round trip over what fetching saves per token
# (one token's compute time less its transfer time), at the replica's own
# measurements and the values' bytes per token.
bytes=$(grep -o '"bytes_in":[0-9]*' "$work/remote" | cut -d: -f2)
hits=$(grep -o '"hit_tokens":[0-9]*' "$work/remote" | cut -d: -f2)
awk -v r="$(cat "$work/remote")" -v bytes="$bytes" -v hits="$hits" 'BEGIN {
	match(r, /"rtt_seconds":[0-9.e+-]*/); rtt = substr(r, RSTART + 14, RLENGTH - 14)
	match(r, /"bandwidth_bytes_per_second":[0-9.e+-]*/); bw = substr(r, RSTART + 29, RLENGTH - 29)
	match(r, /"prefill_tokens_per_second":[0-9.e+-]*/); pr = substr(r, RSTART + 28, RLENGTH - 28)
	bpt = hits ? bytes / hits : 0
	gain = 1 / pr - bpt / bw
	printf "rtt %.2f ms, bandwidth %.0f MB/s, prefill %.0f tokens/s, %.0f bytes/token: ", rtt * 1000, bw / 1e6, pr, bpt
	if (gain > 0) printf "break-even %d tokens\n", int(rtt / gain) + 1; else print "fetching never wins"
}'
