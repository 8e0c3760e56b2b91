#!/usr/bin/env bash
# How fast does a 3-node cluster (fsync on) decide CL.THROTTLE when it is
# called the way API gateways call it (one request at a time per connection,
# from one or many connections, or pipelined), through its leader and
# through a follower, compared with one standalone server of the same build
# measured in the same run?
#
# Starts three cluster nodes on loopback (n1 bootstraps, n2 and n3 join) and
# one standalone server, then runs, for each shape (pipeline P x C
# connections),
#
#   redis-benchmark -r 100000 -c C -P P CL.THROTTLE user:__rand_int__ 15 30 60
#
# against the standalone server, the leader and a follower in turn, ROUNDS
# times (every other round in the reverse order, so that a slow spell of the
# shared machine falls on all three). Throughput and p50/p99 are as
# redis-benchmark reports them (--csv), medians over rounds; a ratio is
# cluster/standalone within one round, then the median of those. Then the
# leader's group-commit figures (RAFT.INFO, counted since it started, so the
# warm-up is included), the load average before and after, and a markdown
# table for docs/performance.md.
#
# Before the rounds, one warm-up run per shape and target (20 requests per
# connection and pipeline slot) measures the rate that sets each run's
# request count: DURATION seconds' worth (at least the warm-up's count).
#
# Environment:
#   ROUNDS=3       rounds
#   SHAPES="p1x1 p1x50 p16x50 p16x200"
#                  shapes to run, pPIPELINE x CONNECTIONS
#   DURATION=5     seconds per run (from the warm-up's rate)
#   REQUESTS=      requests per run instead of DURATION (e.g. 100000)
#   NODE_FLAGS=    extra flags for the cluster nodes only,
#                  e.g. "--appendfsync everysec --raft-log-store wal"
#   NODE_ENV=      environment for the cluster nodes only, e.g. "GOMAXPROCS=1"
#   BENCH=1        also run the project's load generator (bench/) at P16 x 50,
#                  leader against standalone, as a second opinion; extra
#                  arguments go to it (e.g. -d 10s -rounds 5)
#   REDIS=1        also measure Debian's redis-server (SET user:__rand_int__ v)
#                  in the same rounds, when redis-server is installed
#                  (REDIS=0: skip); the table then gives cluster / SET too
#   RUN_TIMEOUT=   seconds after which one redis-benchmark run is a failure
#                  (default 60 + 10 x DURATION, or 600 with REQUESTS); a
#                  redis-benchmark whose server died mid-run spins until then
#
# A quick run (well under a minute): ROUNDS=1 DURATION=1 scripts/bench-cluster.sh
set -euo pipefail
ROUNDS=${ROUNDS:-3}
SHAPES=${SHAPES:-"p1x1 p1x50 p16x50 p16x200"}
DURATION=${DURATION:-5}
REQUESTS=${REQUESTS:-}
NODE_FLAGS=${NODE_FLAGS:-}
NODE_ENV=${NODE_ENV:-}
BENCH=${BENCH:-}
KEYS=100000
CMD=(CL.THROTTLE 'user:__rand_int__' 15 30 60)
SET_CMD=(SET 'user:__rand_int__' v) # the reference command on redis-server
REDIS=${REDIS:-1}
command -v redis-server >/dev/null || REDIS=0
cd "$(dirname "$0")/.."

PROG=bench-cluster
# shellcheck source=lib/servers.sh
. scripts/lib/servers.sh
command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null ||
	die "needs redis-benchmark and redis-cli (Debian: apt-get install redis-tools)"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS=$ROUNDS: want a positive integer"
[[ $DURATION =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "DURATION=$DURATION: want seconds"
[[ -z $REQUESTS || $REQUESTS =~ ^[1-9][0-9]*$ ]] || die "REQUESTS=$REQUESTS: want a positive integer"
for s in $SHAPES; do
	[[ $s =~ ^p([1-9][0-9]*)x([1-9][0-9]*)$ ]] || die "shape $s: want pPIPELINE x CONNECTIONS, e.g. p16x50"
done
(($# == 0)) || [[ $BENCH == 1 ]] || die "extra arguments ($*) go to bench/, which runs only with BENCH=1"
if [[ -z ${RUN_TIMEOUT:-} ]]; then
	RUN_TIMEOUT=600
	[[ -n $REQUESTS ]] || RUN_TIMEOUT=$(awk -v d="$DURATION" 'BEGIN { print int(60 + 10 * d) }')
fi
[[ $RUN_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "RUN_TIMEOUT=$RUN_TIMEOUT: want whole seconds"


echo "building ./cmd/cellserver${BENCH:+ and bench/ (its own module)}"
go build -o "$work/cellserver" ./cmd/cellserver
[[ $BENCH != 1 ]] || (cd bench && go build -o "$work/bench" .)


# start NAME COMMAND...: each server's stderr goes to $work/NAME.log, its
# data to $work/NAME. A server that does not come up, or a run that fails,
# stops the script with every server's log tail (fail).
start() {
	local name=$1
	shift
	mkdir -p "$work/$name"
	"$@" 2>"$work/$name.log" &
	pids+=($!)
	names+=("$name")
}
raft_info() { redis-cli -p "$1" RAFT.INFO | tr -d '\r'; }
raft_field() { raft_info "$1" | sed -n "s/^$2://p"; }
has_field() { raft_info "$1" | grep -x "$2" >/dev/null; }

p1=$(port) p2=$(port) p3=$(port) ps=$(port)
node_cmd() { # name port: the cluster node's command line, less --bootstrap or --join
	echo env $NODE_ENV "$work/cellserver" --port "$2" --dir "$work/$1" --loglevel warning --node-id "$1" --raft-addr "127.0.0.1:$(port)"
}
start n1 $(node_cmd n1 "$p1") --bootstrap $NODE_FLAGS
wait_for "n1 to answer PING" 20 redis-cli -p "$p1" PING
wait_for "n1 to lead" 20 has_field "$p1" raft_ready:1
start n2 $(node_cmd n2 "$p2") --join "127.0.0.1:$p1" $NODE_FLAGS
start n3 $(node_cmd n3 "$p3") --join "127.0.0.1:$p1" $NODE_FLAGS
start standalone "$work/cellserver" --port "$ps" --dir "$work/standalone" --loglevel warning
pr=
if [[ $REDIS == 1 ]]; then
	pr=$(port)
	start redis redis-server --port "$pr" --save '' --appendonly no --dir "$work/redis" --logfile "$work/redis/redis.log"
	wait_for "redis-server to answer PING" 20 redis-cli -p "$pr" PING
fi
for p in "$p2" "$p3" "$ps"; do wait_for "port $p to answer PING" 20 redis-cli -p "$p" PING; done
wait_for "3 raft members" 30 has_field "$p1" raft_members:3
leader_port() {
	local p
	for p in "$p1" "$p2" "$p3"; do
		[[ $(raft_field "$p" raft_state | tr '[:upper:]' '[:lower:]') == leader ]] && echo "$p" && return 0
	done
	return 1
}
leader=$(leader_port) || fail "no node is the leader"
follower=$p2
[[ $follower != "$leader" ]] || follower=$p3
# The follower must know the leader before it can forward to it.
wait_for "the follower to know the leader" 20 has_field "$follower" "raft_leader_resp_addr:127.0.0.1:$leader"

declare -A port_of=([standalone]=$ps [leader]=$leader [follower]=$follower [redis]=$pr)
echo "cluster: leader 127.0.0.1:$leader, follower 127.0.0.1:$follower${NODE_FLAGS:+, NODE_FLAGS=$NODE_FLAGS}${NODE_ENV:+, NODE_ENV=$NODE_ENV}"
echo "standalone: 127.0.0.1:$ps"
echo "command: redis-benchmark -r $KEYS ${CMD[*]}; ROUNDS=$ROUNDS, ${REQUESTS:+REQUESTS=$REQUESTS}${REQUESTS:-DURATION=${DURATION}s}"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average before: $load_before"

# rb TARGET PIPELINE CONNECTIONS REQUESTS: prints "req/s p50_ms p99_ms".
# redis-benchmark stops at the first error reply.
rb() {
	local out rc=0 cmd=("${CMD[@]}")
	[[ $1 != redis ]] || cmd=("${SET_CMD[@]}")
	out=$(timeout --foreground "$RUN_TIMEOUT" redis-benchmark -p "${port_of[$1]}" -P "$2" -c "$3" -n "$4" -r "$KEYS" --csv "${cmd[@]}" 2>&1) || rc=$?
	((rc <= 128 || rc == 124)) || exit "$rc" # killed by a signal (Ctrl-C): no report
	if ((rc != 0)); then
		printf '%s\n' "$out" | tail -n 5 >&2
		fail "redis-benchmark -p ${port_of[$1]} -P $2 -c $3 -n $4 failed (status $rc; 124: RUN_TIMEOUT=$RUN_TIMEOUT passed)"
	fi
	printf '%s\n' "$out" | tail -n 1 | tr -d '"' | awk -F, 'NF == 8 && $2 > 0 { print $2, $5, $7; ok = 1 } END { exit !ok }' ||
		fail "unexpected redis-benchmark output: $out"
}
fmt_run() { # label rps p50 p99 n
	printf '%-26s %10.0f req/s   p50 %7.3f ms   p99 %7.3f ms   (%d requests)\n' "$1" "$2" "$3" "$4" "$5"
}

# Warm-up: one run per shape and target, which also sets the request count.
declare -A count
targets=(standalone leader follower)
[[ $REDIS != 1 ]] || targets+=(redis)
for s in $SHAPES; do
	[[ $s =~ ^p([0-9]+)x([0-9]+)$ ]]
	P=${BASH_REMATCH[1]} C=${BASH_REMATCH[2]}
	n0=$((20 * P * C > 200 ? 20 * P * C : 200))
	for t in "${targets[@]}"; do
		out=$(rb "$t" "$P" "$C" "$n0")
		read -r rps p50 p99 <<<"$out"
		if [[ -n $REQUESTS ]]; then
			count[$s.$t]=$REQUESTS
		else
			count[$s.$t]=$(awk -v r="$rps" -v d="$DURATION" -v m="$n0" 'BEGIN { n = int(r * d); print (n > m ? n : m) }')
		fi
		fmt_run "warm-up $s $t" "$rps" "$p50" "$p99" "$n0"
	done
done

results=$work/results.tsv
for ((r = 1; r <= ROUNDS; r++)); do
	order=("${targets[@]}")
	((r % 2)) || order=($(printf '%s\n' "${targets[@]}" | tac))
	for s in $SHAPES; do
		[[ $s =~ ^p([0-9]+)x([0-9]+)$ ]]
		P=${BASH_REMATCH[1]} C=${BASH_REMATCH[2]}
		for t in "${order[@]}"; do
			out=$(rb "$t" "$P" "$C" "${count[$s.$t]}")
			read -r rps p50 p99 <<<"$out"
			printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$s" "$t" "$rps" "$p50" "$p99" >>"$results"
			fmt_run "round $r/$ROUNDS $s $t" "$rps" "$p50" "$p99" "${count[$s.$t]}"
		done
	done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average after: $load_after"

info=$(raft_info "$leader")
ope=$(sed -n 's/^raft_ops_per_entry://p' <<<"$info")
mcl=$(sed -n 's/^raft_mean_commit_latency_us://p' <<<"$info")
grep -E '^raft_(state|entries_submitted|ops_submitted|ops_per_entry|mean_commit_latency_us):' <<<"$info" | sed 's/^/leader /'
now=$(leader_port || echo none)
[[ $now == "$leader" ]] || echo "WARNING: the leader changed during the run (127.0.0.1:$leader -> $now): leader and follower figures are mixed" >&2

# Medians over rounds; each ratio is taken within its round first.
runs=${REQUESTS:+$REQUESTS requests}
note="Medians of $ROUNDS interleaved round(s), runs of ${runs:-about $DURATION s}, \
redis-benchmark -r $KEYS ${CMD[*]}${NODE_FLAGS:+; nodes: \`$NODE_FLAGS\`}${NODE_ENV:+; \`$NODE_ENV\`}; \
leader's ops/entry $ope, mean commit ${mcl} µs; load average $load_before → $load_after."
echo
python3 - "$results" "$SHAPES" "$note" <<'EOF'
import collections, statistics, sys
rows = collections.defaultdict(dict)  # (shape, target) -> round -> (rps, p50, p99)
for line in open(sys.argv[1]):
    r, shape, target, rps, p50, p99 = line.split()
    rows[shape, target][r] = (float(rps), float(p50), float(p99))
def num(x):
    return f"{x:,.0f}".replace(",", " ")
def ms(x):
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"
redis = any(t == "redis" for _, t in rows)
head = "| shape | via | cluster req/s | standalone req/s | ratio | cluster p50 ms | cluster p99 ms |"
print(head + (" redis SET req/s | ÷ SET |" if redis else ""))
print("|---" * (7 + 2 * redis) + "|")
for shape in sys.argv[2].split():
    p, c = shape[1:].split("x")
    alone = rows[shape, "standalone"]
    for via in ("leader", "follower"):
        run = rows[shape, via]
        med = lambda i: statistics.median(v[i] for v in run.values())
        ratio = statistics.median(run[r][0] / alone[r][0] for r in run)
        line = (f"| P{p} × {c} | {via} | {num(med(0))} | {num(statistics.median(v[0] for v in alone.values()))} "
                f"| {ratio:.3f} | {ms(med(1))} | {ms(med(2))} |")
        if redis:
            ref = rows[shape, "redis"]
            vs = statistics.median(run[r][0] / ref[r][0] for r in run)
            line += f" {num(statistics.median(v[0] for v in ref.values()))} | {vs:.3f} |"
        print(line)
print()
print(sys.argv[3])
EOF

if [[ $BENCH == 1 ]]; then
	echo
	echo "bench/, P16 x 50: A = leader (127.0.0.1:$leader), B = standalone (127.0.0.1:$ps)"
	"$work/bench" -addr "127.0.0.1:$leader" -compare "127.0.0.1:$ps" \
		-cmd 'CL.THROTTLE {key} 15 30 60 1' -c 50 -P 16 -keys "$KEYS" \
		-d "${DURATION}s" -warmup 1s -rounds "$ROUNDS" -q "$@"
	echo "load average after bench/: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
