#!/bin/sh
# The remote tier across a fleet of prefixd replicas behind round-robin, in
# one run, each scenario without the tier, with it, and (where requests
# arrive together) with it but without the fleet's lease:
#   2 replicas, one after another   N requests, each sent when the last is answered
#   2 replicas, all at once         N requests sent together
#   16 replicas, all at once        N requests sent together (2 per replica at N=32)
#   4 replicas join cold            a warm replica served the prefix once; N
#                                   requests sent together to 4 fresh replicas
# Every request is a PREFIX-token prompt prefix (default 2048) that they all
# share plus 32 tokens of its own, max_tokens 1 (the time is the time to first
# token). Every scenario starts fresh replicas and an empty store. Prints per
# row the prompt tokens the fleet computed and the TTFT p50/p90/max.
# Then the break-even: for prefixes of 16 to 2048 tokens, the TTFT of a
# request whose prefix a cold replica fetches (written by another) beside
# one whose prefix is computed, and the fetch rule's own break-even at the
# fetching replica's measurements.
# Usage: scripts/remote-tier-bench.sh MODEL.gguf [PREFIX] [N]
# THREADS (default 1) sets each replica's --threads.
set -eu
model=$1
prefix=${2:-2048}
n=${3:-32}
cd "$(dirname "$0")/.."
go build -o bench-out/prefixd ./cmd/prefixd
work=$(mktemp -d)
fleet=""
redis_pid=""
stop_fleet() {
	for p in $fleet; do kill "$p" 2>/dev/null || true; done
	for p in $fleet; do wait "$p" 2>/dev/null || true; done
	fleet=""
}
trap 'stop_fleet; [ -z "$redis_pid" ] || kill $redis_pid 2>/dev/null; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
rport=18379
store=redis://127.0.0.1:$rport/0
redis-server --port $rport --bind 127.0.0.1 --dir "$work" --save '' --appendonly no --maxmemory-policy volatile-lru >"$work/redis.log" 2>&1 &
redis_pid=$!
until redis-cli -p $rport ping >/dev/null 2>&1; do sleep 0.1; done
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load:$(uptime | sed 's/.*load average://')"

ids() { # ids SEED COUNT: COUNT token ids
	awk -v n="$2" -v s="$1" 'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), 100 + int(rand() * 30000) }'
}
shared=$(ids 1 "$prefix")
ports=""
start_replica() { # start_replica PORT [FLAGS]: a fresh replica, added to $fleet and $ports
	port=$1
	shift
	rm -f "$work/log$port" # a previous replica's "listening" must not count
	bench-out/prefixd serve --model "$model" --addr 127.0.0.1:$port --threads "${THREADS:-1}" --max-running 4 \
		--kv-bytes 320MiB "$@" >"$work/log$port" 2>&1 &
	pid=$!
	fleet="$fleet $pid"
	ports="$ports $port"
	until grep -q "msg=listening" "$work/log$port" 2>/dev/null; do
		if ! kill -0 $pid 2>/dev/null; then
			echo "the replica on port $port exited:" >&2
			tail -5 "$work/log$port" >&2
			exit 1
		fi
		sleep 0.2
	done
}
start_fleet() { # start_fleet COUNT [FLAGS]: only fresh replicas, on ports 18300..
	count=$1
	shift
	stop_fleet
	ports=""
	i=0
	while [ $i -lt "$count" ]; do
		start_replica $((18300 + i)) "$@"
		i=$((i + 1))
	done
}
body() { # body SEED PREFIX_IDS OWN: a request body
	printf '{"prompt_ids": [%s,%s], "max_tokens": 1, "ignore_eos": true}' "$2" "$(ids "$1" "$3")"
}
post() { # post PORT BODY_FILE: prints the request's time; one not answered 200 prints FAIL and fails
	r=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' -H 'Content-Type: application/json' --data @"$2" http://127.0.0.1:$1/generate)
	case $r in
	"200 "*) echo "${r#200 }" ;;
	*)
		echo "FAIL"
		echo "remote-tier-bench: a request to :$1 was answered HTTP ${r%% *}, not 200 (is the model's context shorter than the prompt?)" >&2
		return 1
		;;
	esac
}
send() { # send: N requests round-robin over $ports, together or sequential by $mode
	: >"$work/ttft"
	set -- $ports
	i=0
	curls=""
	while [ $i -lt "$n" ]; do
		eval "port=\${$((i % $# + 1))}"
		body $((i + 100)) "$shared" 32 >"$work/body$i"
		if [ "$mode" = together ]; then
			post "$port" "$work/body$i" >"$work/ttft$i" &
			curls="$curls $!"
		else
			post "$port" "$work/body$i" >>"$work/ttft"
		fi
		i=$((i + 1))
	done
	if [ -n "$curls" ]; then
		wait $curls
		cat "$work"/ttft[0-9]* >"$work/ttft"
		rm -f "$work"/ttft[0-9]*
	fi
}
computed() { # prompt tokens the replicas on $ports computed
	c=0
	for port in $ports; do
		c=$((c + $(curl -s http://127.0.0.1:$port/v1/stats | grep -o '"prefill":[0-9]*' | head -1 | cut -d: -f2)))
	done
	echo $c
}
report() { # report NAME: the row of the scenario just sent (with the tier, then its leases and errors)
	if grep -q FAIL "$work/ttft"; then
		echo "remote-tier-bench: $1: requests failed" >&2
		exit 1
	fi
	c=$(computed)
	leases=""
	for port in $ports; do
		curl -s http://127.0.0.1:$port/v1/stats | grep -o '"remote_tier":{[^}]*}[^}]*}' || true
	done >"$work/remote"
	if [ -s "$work/remote" ]; then
		leases=$(awk -F'[:,{}]' '{ for (i = 1; i < NF; i++) if ($i ~ /"(leases_led|leases_followed|lease_waits_given_up|timeout|connection|writes_dropped)"/) { gsub(/"/, "", $i); s[$i] += $(i + 1) } }
			END { printf "  [leases led %d, followed %d, given up %d; writes dropped %d; errors: timeout %d, connection %d]",
				s["leases_led"], s["leases_followed"], s["lease_waits_given_up"], s["writes_dropped"], s["timeout"], s["connection"] }' "$work/remote")
	fi
	sort -n "$work/ttft" | awk -v name="$1" -v c="$c" '{ t[NR] = $1 } END {
		printf "%-48s computed %6d   TTFT p50 %6.2f s  p90 %6.2f s  max %6.2f s",
			name, c, t[int(NR * 0.5 + 0.5)], t[int(NR * 0.9 + 0.5)], t[NR] }'
	echo "$leases"
}
scenario() { # scenario NAME REPLICAS MODE [FLAGS]: one row, on fresh replicas and an empty store
	name=$1 count=$2 mode=$3
	shift 3
	redis-cli -p $rport flushall >/dev/null
	start_fleet "$count" "$@"
	send
	report "$name"
}
run_three() { # run_three LABEL REPLICAS MODE: without, with the tier, with it but no lease
	scenario "$1, without the tier" "$2" "$3"
	scenario "$1, remote tier" "$2" "$3" --remote-tier "$store"
	if [ "$3" = together ]; then
		scenario "$1, remote tier, no lease" "$2" "$3" --remote-tier "$store" --remote-tier-lease-wait 0
	fi
}
run_three "2 replicas, one after another" 2 sequential
run_three "2 replicas, all at once" 2 together
run_three "16 replicas, all at once" 16 together

# A replica that served the prefix once, then 4 that join cold and take the
# requests (the warm one's computing is not counted).
join() { # join NAME [FLAGS]
	name=$1 mode=together
	shift
	redis-cli -p $rport flushall >/dev/null
	start_fleet 1 "$@"
	body 99 "$shared" 32 >"$work/warm"
	post 18300 "$work/warm" >/dev/null
	ports=""
	for port in 18301 18302 18303 18304; do start_replica $port "$@"; done
	send
	report "$name"
}
join "4 replicas join cold, without the tier"
join "4 replicas join cold, remote tier" --remote-tier "$store"

# Break-even: a writer replica computes a fresh prefix of each length; a
# cold reader replica (its prefill rate measured first on a prompt of its
# own) then fetches it, and a replica without the tier computes another of
# the same length. Each request has 16 tokens of its own.
redis-cli -p $rport flushall >/dev/null
start_fleet 1 --remote-tier "$store"
start_replica 18301 --remote-tier "$store"
start_replica 18302
body 7 "$(ids 8 256)" 16 >"$work/b"
post 18301 "$work/b" >/dev/null
echo "prefix tokens   fetched (cold replica)   computed (no tier)"
for len in 16 32 64 128 256 512 1024 2048; do
	[ "$len" -le "$prefix" ] || break
	p=$(ids $((len + 1000)) "$len")
	body 1 "$p" 16 >"$work/b"
	post 18300 "$work/b" >/dev/null
	sleep 1 # the writer's write-through lands
	body 2 "$p" 16 >"$work/b"
	f=$(post 18301 "$work/b")
	body 3 "$(ids $((len + 2000)) "$len")" 16 >"$work/b"
	c=$(post 18302 "$work/b")
	printf '%13d   %20.3f s   %16.3f s\n' "$len" "$f" "$c"
done
r=$(curl -s http://127.0.0.1:18301/v1/stats | grep -o '"remote_tier":{[^}]*}[^}]*}')
bytes=$(echo "$r" | grep -o '"bytes_in":[0-9]*' | cut -d: -f2)
hits=$(echo "$r" | grep -o '"hit_tokens":[0-9]*' | cut -d: -f2)
awk -v r="$r" -v bytes="$bytes" -v hits="$hits" 'BEGIN {
	match(r, /"rtt_seconds":[0-9.e+-]*/); rtt = substr(r, RSTART + 14, RLENGTH - 14)
	match(r, /"bandwidth_bytes_per_second":[0-9.e+-]*/); bw = substr(r, RSTART + 29, RLENGTH - 29)
	match(r, /"prefill_tokens_per_second":[0-9.e+-]*/); pr = substr(r, RSTART + 28, RLENGTH - 28)
	bpt = hits ? bytes / hits : 0
	gain = 1 / pr - bpt / bw
	printf "the reader'"'"'s rule: rtt %.2f ms, bandwidth %.0f MB/s, prefill %.0f tokens/s, %.0f bytes/token: ", rtt * 1000, bw / 1e6, pr, bpt
	if (gain > 0) printf "break-even %d tokens\n", int(rtt / gain) + 1; else print "fetching never wins"
}'
echo "# load at the end:$(uptime | sed 's/.*load average://')"
