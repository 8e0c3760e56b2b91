#!/usr/bin/env bash
# How do CL.THROTTLE decisions per second grow when the keyspace is split
# over two Raft groups instead of served by one, measured on this machine?
#
# Starts two clusters side by side on loopback, each node with default
# flags (fsync on, --bootstrap-expect 3, --join the others of its group):
#
#   one   one group of 3 nodes (3 processes), no CLUSTER command: a lone
#         group serves every slot, its leader taking every decision;
#   two   two groups of 3 nodes (6 processes), group a owning slots
#         0-8191 and group b 8192-16383 (CLUSTER ADDSLOTSRANGE, MEET):
#         two leaders, each taking the decisions of its half.
#
# and runs, for each pipeline depth P in PIPELINES, against each cluster,
#
#   redis-benchmark --cluster -c CLIENTS -P P -n REQUESTS*P -r 100000 \
#       CL.THROTTLE 'key:{tag}:__rand_int__' 15 30 60
#
# ROUNDS times, interleaved (every other round in the reverse order, so that
# a slow spell of the shared machine falls on both). redis-benchmark
# --cluster refuses a cluster of one master, so "one" is driven without
# --cluster, all CLIENTS connections on its leader (where --cluster would
# send every request too). In cluster mode
# redis-benchmark spreads its clients over the masters (the leaders) and
# replaces {tag} with a hash tag of the connected master's slots, so every
# request goes straight to the leader owning it (without {tag} half of the
# requests of "two" would be answered MOVED, which redis-benchmark counts
# as a failure). One request is one decision. The cluster not being
# measured sits idle (raft heartbeats only) meanwhile.
#
# Both clusters share this machine's cores, so "two" measures what a second
# leader gains when the two share them; the per-group figure (two's rate
# divided by two) and one group's rate are what a deployment with each group
# on machines of its own would scale by. The last lines make that estimate
# for TARGET decisions per second, assuming groups add up linearly.
#
# Environment:
#   ROUNDS=3            rounds
#   PIPELINES="1 16"    pipeline depths
#   CLIENTS=50          redis-benchmark connections
#   REQUESTS=50000      requests per run at P1 (× P at depth P)
#   NODE_FLAGS=         extra flags for every node, e.g. "--appendfsync everysec"
#   TARGET=10000000     decisions per second for the estimate
#
# A quick run: ROUNDS=1 REQUESTS=10000 scripts/bench-groups.sh
set -euo pipefail
ROUNDS=${ROUNDS:-3}
PIPELINES=${PIPELINES:-"1 16"}
CLIENTS=${CLIENTS:-50}
REQUESTS=${REQUESTS:-50000}
NODE_FLAGS=${NODE_FLAGS:-}
TARGET=${TARGET:-10000000}
KEYS=100000
CMD=(CL.THROTTLE 'key:{tag}:__rand_int__' 15 30 60)
cd "$(dirname "$0")/.."

PROG=bench-groups
# shellcheck source=lib/servers.sh
. scripts/lib/servers.sh
command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null ||
	die "needs redis-benchmark and redis-cli (Debian: apt-get install redis-tools)"
for v in ROUNDS CLIENTS REQUESTS TARGET; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v=${!v}: want a positive integer"
done
for p in $PIPELINES; do
	[[ $p =~ ^[1-9][0-9]*$ ]] || die "PIPELINES: $p is not a positive integer"
done


cluster_ok() { redis-cli -p "$1" CLUSTER INFO | tr -d '\r' | grep -qx cluster_state:ok; }
has_leader() { redis-cli -p "$1" RAFT.INFO | tr -d '\r' | grep -q '^raft_leader_resp_addr:.'; }
reply_is() { [[ $(redis-cli -p "$1" "${@:3}") == "$2" ]]; }

echo "building ./cmd/cellserver"
go build -o "$work/cellserver" ./cmd/cellserver

# start_group NAME PORTS: starts three nodes NAME1..NAME3 of group NAME,
# each listing the others in --join, and sets the array named PORTS to
# their RESP ports.
start_group() {
	local name=$1 i j join
	local -n ports=$2
	ports=()
	for i in 1 2 3; do ports+=("$(port)"); done
	for i in 0 1 2; do
		join=()
		for j in 0 1 2; do ((i == j)) || join+=("127.0.0.1:${ports[$j]}"); done
		mkdir -p "$work/$name$((i + 1))"
		# shellcheck disable=SC2086 # NODE_FLAGS is a list of flags
		"$work/cellserver" --port "${ports[$i]}" --dir "$work/$name$((i + 1))" --loglevel warning \
			--group "$name" --node-id "$name$((i + 1))" --raft-addr "127.0.0.1:$(port)" \
			--bootstrap-expect 3 --join "$(IFS=, && echo "${join[*]}")" $NODE_FLAGS 2>"$work/$name$((i + 1)).log" &
		pids+=($!)
		names+=("$name$((i + 1))")
	done
}
start_group one one
start_group a ga
start_group b gb

for p in "${one[@]}" "${ga[@]}" "${gb[@]}"; do
	wait_for "port $p to answer PING" 30 redis-cli -p "$p" PING
	wait_for "port $p to know its leader" 30 has_leader "$p"
done
wait_for "group a to take slots 0-8191" 20 reply_is "${ga[1]}" OK CLUSTER ADDSLOTSRANGE 0 8191
wait_for "group b to take slots 8192-16383" 20 reply_is "${gb[1]}" OK CLUSTER ADDSLOTSRANGE 8192 16383
wait_for "group a to meet group b" 20 reply_is "${ga[0]}" OK CLUSTER MEET 127.0.0.1 "${gb[0]}"
for p in "${one[@]}" "${ga[@]}" "${gb[@]}"; do
	wait_for "port $p to report cluster_state:ok" 30 cluster_ok "$p"
done
wait_for "redis-cli --cluster check of two groups" 30 redis-cli --cluster check "127.0.0.1:${ga[0]}"

leader_of() { # ports...: the port of the ready leader among them
	local p
	for p in "$@"; do
		redis-cli -p "$p" RAFT.INFO | tr -d '\r' | grep -qx raft_ready:1 && echo "$p" && return 0
	done
	return 1
}
one_leader=$(leader_of "${one[@]}") || fail "group one has no ready leader"
declare -A seed=([one]=$one_leader [two]=${ga[0]})
echo "one: 1 group of 3, ports ${one[*]} (leader $one_leader); two: groups a (${ga[*]}) and b (${gb[*]})${NODE_FLAGS:+; NODE_FLAGS=$NODE_FLAGS}"
echo "command: redis-benchmark [--cluster for two] -c $CLIENTS -r $KEYS ${CMD[*]}; ROUNDS=$ROUNDS"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average before: $load_before"

# rb CLUSTER PIPELINE REQUESTS: prints the decisions per second.
rb() {
	local out rc=0 mode=(--cluster)
	# redis-benchmark --cluster wants two masters at least: one group is
	# driven through its leader directly, which is where --cluster would
	# send every request anyway.
	[[ $1 != one ]] || mode=()
	out=$(timeout --foreground 600 redis-benchmark "${mode[@]}" -h 127.0.0.1 -p "${seed[$1]}" -c "$CLIENTS" -P "$2" \
		-n "$3" -r "$KEYS" --csv "${CMD[@]}" 2>&1) || rc=$?
	((rc <= 128 || rc == 124)) || exit "$rc" # killed by a signal (Ctrl-C): no report
	if ((rc != 0)) || grep -qi error <<<"$out"; then
		printf '%s\n' "$out" | tail -n 5 >&2
		fail "redis-benchmark --cluster against $1 -P $2 -n $3 failed (status $rc)"
	fi
	printf '%s\n' "$out" | tail -n 1 | tr -d '"' | awk -F, 'NF == 8 && $2 > 0 { print $2; ok = 1 } END { exit !ok }' ||
		fail "unexpected redis-benchmark output: $out"
}

results=$work/results.tsv
for ((r = 1; r <= ROUNDS; r++)); do
	order=(one two)
	((r % 2)) || order=(two one)
	for p in $PIPELINES; do
		for c in "${order[@]}"; do
			rps=$(rb "$c" "$p" $((REQUESTS * p)))
			printf '%s\t%s\t%s\t%s\n' "$r" "$p" "$c" "$rps" >>"$results"
			printf 'round %d/%d P%-3s %-3s %10.0f decisions/s\n' "$r" "$ROUNDS" "$p" "$c" "$rps"
		done
	done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average after: $load_after"
echo
python3 - "$results" "$TARGET" "Medians of $ROUNDS interleaved round(s); redis-benchmark (two: --cluster) -c $CLIENTS -r $KEYS ${CMD[*]}; load average $load_before → $load_after." <<'EOF'
import collections, math, statistics, sys
runs = collections.defaultdict(dict)  # (pipeline, cluster) -> round -> rps
for line in open(sys.argv[1]):
    r, p, c, rps = line.split()
    runs[p, c][r] = float(rps)
target = int(sys.argv[2])
def num(x):
    return f"{x:,.0f}".replace(",", " ")
print("| pipeline | 1 group × 3 (3 processes) | 2 groups × 3 (6 processes) | two ÷ one | per group of two |")
print("|---|---|---|---|---|")
per_group = {}
for p in sorted({p for p, _ in runs}, key=int):
    one, two = runs[p, "one"], runs[p, "two"]
    ratio = statistics.median(two[r] / one[r] for r in two)
    m1, m2 = statistics.median(one.values()), statistics.median(two.values())
    per_group[p] = (m1, m2 / 2)
    print(f"| P{p} | {num(m1)} | {num(m2)} | {ratio:.2f} | {num(m2 / 2)} |")
print()
print(sys.argv[3])
print()
for p, (alone, shared) in per_group.items():
    print(f"P{p}: {num(target)} decisions/s needs {math.ceil(target / alone)} groups at one group's rate here "
          f"({num(alone)}/s), {math.ceil(target / shared)} at the per-group rate of two sharing the machine; "
          f"3 nodes each, assuming each group has machines of its own and groups add up linearly.")
EOF
