#!/usr/bin/env bash
# How much CPU does one CL.THROTTLE decision cost a group's leader and each
# of its followers, against a standalone server taking the same load on the
# same machine?
#
# Starts, on loopback, one standalone server (default flags) and one group
# of three nodes (default flags, --bootstrap-expect 3, --join the others,
# plus NODE_FLAGS), then runs ROUNDS times, interleaved (every other round
# the group first, so that a slow spell of the shared machine falls on
# both),
#
#   redis-benchmark -c CLIENTS -P PIPELINE -n REQUESTS -r 100000 \
#       CL.THROTTLE key:__rand_int__ 15 30 60
#
# against the standalone server and against the group's leader. Each
# process's CPU time (user + system, /proc/PID/stat) is read before and
# after a run; divided by the run's decisions (one request is one
# decision) it gives CPU µs per decision, for the standalone server, the
# leader and each follower (which apply the same decisions from the log).
# The last lines are the medians of the rounds and the ratios
# leader ÷ standalone and worst follower ÷ standalone (ratios taken within
# each round, then the median), which are what compare across machines and
# loads; the absolute figures move with whatever else the machine runs.
#
# Environment:
#   ROUNDS=3          rounds
#   CLIENTS=50        redis-benchmark connections
#   PIPELINE=16       redis-benchmark pipeline depth
#   REQUESTS=400000   requests (decisions) per run
#   NODE_FLAGS=       extra flags for the group's nodes, e.g.
#                     "--raft-log-store wal" or "--appendfsync everysec"
#   STANDALONE_FLAGS= extra flags for the standalone server
#   PPROF=            a directory: also take a 10 s CPU profile of the
#                     leader and of one follower during the first group
#                     run (each node runs with --pprof-addr), saved there
#                     with the binary, and print each profile split into
#                     the parts of a decision's path (lib/cpu-buckets.py);
#                     profiling costs that run a little CPU of its own
#
# A quick run: ROUNDS=1 REQUESTS=100000 scripts/cpu-per-decision.sh
set -euo pipefail
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
PIPELINE=${PIPELINE:-16}
REQUESTS=${REQUESTS:-400000}
NODE_FLAGS=${NODE_FLAGS:-}
STANDALONE_FLAGS=${STANDALONE_FLAGS:-}
PPROF=${PPROF:-}
KEYS=100000
CMD=(CL.THROTTLE 'key:__rand_int__' 15 30 60)
cd "$(dirname "$0")/.."

PROG=cpu-per-decision
# shellcheck source=lib/servers.sh
. scripts/lib/servers.sh
command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null ||
	die "needs redis-benchmark and redis-cli (Debian: apt-get install redis-tools)"
for v in ROUNDS CLIENTS PIPELINE REQUESTS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v=${!v}: want a positive integer"
done
if [[ -n $PPROF ]]; then
	mkdir -p "$PPROF" || die "PPROF=$PPROF: cannot create the directory"
	PPROF=$(cd "$PPROF" && pwd)
fi
tck=$(getconf CLK_TCK)

has_leader() { redis-cli -p "$1" RAFT.INFO | tr -d '\r' | grep -q '^raft_leader_resp_addr:.'; }
is_ready() { redis-cli -p "$1" RAFT.INFO | tr -d '\r' | grep -qx raft_ready:1; }
applied() { redis-cli -p "$1" RAFT.INFO | tr -d '\r' | sed -n 's/^raft_applied_index://p'; }
applied_at_least() { (($(applied "$1") >= $2)); }

echo "building ./cmd/cellserver"
go build -o "$work/cellserver" ./cmd/cellserver
[[ -z $PPROF ]] || cp "$work/cellserver" "$PPROF/cellserver"

sa_port=$(port)
mkdir -p "$work/standalone"
# shellcheck disable=SC2086 # STANDALONE_FLAGS is a list of flags
"$work/cellserver" --port "$sa_port" --dir "$work/standalone" --loglevel warning $STANDALONE_FLAGS \
	2>"$work/standalone.log" &
pids+=($!)
names+=(standalone)
sa_pid=$!

gports=() gpids=() pprofs=()
for i in 0 1 2; do
	gports+=("$(port)")
	pprofs+=("$(port)")
done
for i in 0 1 2; do
	join=()
	for j in 0 1 2; do ((i == j)) || join+=("127.0.0.1:${gports[$j]}"); done
	mkdir -p "$work/g$((i + 1))"
	extra=()
	[[ -z $PPROF ]] || extra=(--pprof-addr "127.0.0.1:${pprofs[$i]}")
	# shellcheck disable=SC2086 # NODE_FLAGS is a list of flags
	"$work/cellserver" --port "${gports[$i]}" --dir "$work/g$((i + 1))" --loglevel warning \
		--group g --node-id "g$((i + 1))" --raft-addr "127.0.0.1:$(port)" \
		--bootstrap-expect 3 --join "$(IFS=, && echo "${join[*]}")" "${extra[@]}" $NODE_FLAGS \
		2>"$work/g$((i + 1)).log" &
	pids+=($!)
	gpids+=($!)
	names+=("g$((i + 1))")
done

wait_for "the standalone server to answer PING" 30 redis-cli -p "$sa_port" PING
for p in "${gports[@]}"; do
	wait_for "port $p to answer PING" 30 redis-cli -p "$p" PING
	wait_for "port $p to know its leader" 30 has_leader "$p"
done
leader=-1
end=$((SECONDS + 30))
while ((leader < 0 && SECONDS < end)); do
	for i in 0 1 2; do
		if is_ready "${gports[$i]}"; then leader=$i && break; fi
	done
	((leader >= 0)) || sleep 0.1
done
((leader >= 0)) || fail "the group has no ready leader"
followers=()
for i in 0 1 2; do ((i == leader)) || followers+=("$i"); done

# cpu PID: the process's CPU time so far (user + system), in clock ticks.
cpu() {
	local stat
	stat=$(<"/proc/$1/stat")
	stat=${stat##*) } # fields from the state on (the name may hold spaces)
	# shellcheck disable=SC2086 # split into fields
	set -- $stat
	echo $((${12} + ${13}))
}

# rb PORT: runs the load against PORT, failing on any error reply.
rb() {
	local out rc=0
	out=$(timeout --foreground 600 redis-benchmark -h 127.0.0.1 -p "$1" -c "$CLIENTS" -P "$PIPELINE" \
		-n "$REQUESTS" -r "$KEYS" --csv "${CMD[@]}" 2>&1) || rc=$?
	((rc <= 128 || rc == 124)) || exit "$rc" # killed by a signal (Ctrl-C): no report
	if ((rc != 0)) || grep -qi error <<<"$out"; then
		printf '%s\n' "$out" | tail -n 5 >&2
		fail "redis-benchmark against port $1 failed (status $rc)"
	fi
	printf '%s\n' "$out" | tail -n 1 | tr -d '"' | awk -F, 'NF == 8 && $2 > 0 { print $2; ok = 1 } END { exit !ok }' ||
		fail "unexpected redis-benchmark output: $out"
}

echo "standalone: port $sa_port${STANDALONE_FLAGS:+ ($STANDALONE_FLAGS)}; group: ports ${gports[*]}, leader ${gports[$leader]}${NODE_FLAGS:+; NODE_FLAGS=$NODE_FLAGS}"
echo "command: redis-benchmark -c $CLIENTS -P $PIPELINE -n $REQUESTS -r $KEYS ${CMD[*]}; ROUNDS=$ROUNDS"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average before: $load_before"

results=$work/results.tsv
profiled=0
for ((r = 1; r <= ROUNDS; r++)); do
	order=(standalone group)
	((r % 2)) || order=(group standalone)
	for c in "${order[@]}"; do
		if [[ $c == standalone ]]; then
			a=$(cpu "$sa_pid")
			rps=$(rb "$sa_port")
			b=$(cpu "$sa_pid")
			printf '%s\tstandalone\t%s\t%s\n' "$r" "$(((b - a)))" "$rps" >>"$results"
			printf 'round %d/%d standalone %10.0f decisions/s\n' "$r" "$ROUNDS" "$rps"
			continue
		fi
		before=()
		for i in 0 1 2; do before+=("$(cpu "${gpids[$i]}")"); done
		prof=()
		if [[ -n $PPROF ]] && ((!profiled)); then
			profiled=1
			curl -s -o "$PPROF/leader.pprof" "http://127.0.0.1:${pprofs[$leader]}/debug/pprof/profile?seconds=10" &
			prof+=($!)
			curl -s -o "$PPROF/follower.pprof" "http://127.0.0.1:${pprofs[${followers[0]}]}/debug/pprof/profile?seconds=10" &
			prof+=($!)
		fi
		rps=$(rb "${gports[$leader]}")
		# The followers apply the last entries just after the leader answers:
		# wait until each has applied what the leader has.
		want=$(applied "${gports[$leader]}")
		for i in "${followers[@]}"; do
			wait_for "follower ${gports[$i]} to apply index $want" 30 applied_at_least "${gports[$i]}" "$want"
		done
		for p in "${prof[@]}"; do wait "$p" || true; done
		printf '%s\tleader\t%s\t%s\n' "$r" "$(($(cpu "${gpids[$leader]}") - before[leader]))" "$rps" >>"$results"
		for i in "${followers[@]}"; do
			printf '%s\tfollower%s\t%s\t%s\n' "$r" "$i" "$(($(cpu "${gpids[$i]}") - before[i]))" "$rps" >>"$results"
		done
		printf 'round %d/%d group      %10.0f decisions/s\n' "$r" "$ROUNDS" "$rps"
	done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average after: $load_after"
per_entry=$(redis-cli -p "${gports[$leader]}" RAFT.INFO | tr -d '\r' | sed -n 's/^raft_ops_per_entry://p')
echo "leader: ${per_entry:-?} decisions per log entry (mean since start)"
echo
python3 - "$results" "$tck" "$REQUESTS" "Medians of $ROUNDS interleaved round(s); redis-benchmark -c $CLIENTS -P $PIPELINE -n $REQUESTS -r $KEYS ${CMD[*]}${NODE_FLAGS:+; group NODE_FLAGS=$NODE_FLAGS}; load average $load_before → $load_after." <<'EOF'
import collections, statistics, sys
ticks = collections.defaultdict(dict)  # process -> round -> CPU ticks
rate = collections.defaultdict(dict)   # standalone/group -> round -> decisions/s
for line in open(sys.argv[1]):
    r, who, t, rps = line.split()
    ticks[who][r] = int(t)
    rate["standalone" if who == "standalone" else "group"][r] = float(rps)
tck, n = int(sys.argv[2]), int(sys.argv[3])
us = {who: {r: t / tck / n * 1e6 for r, t in rounds.items()} for who, rounds in ticks.items()}
followers = sorted(w for w in us if w.startswith("follower"))
rounds = sorted(us["standalone"])
worst = {r: max(us[f][r] for f in followers) for r in rounds}
sa = us["standalone"]
med = statistics.median
print("| process | CPU µs per decision | ÷ standalone | decisions/s |")
print("|---|---|---|---|")
print(f"| standalone | {med(sa.values()):.2f} | | {med(rate['standalone'].values()):,.0f} |")
print(f"| leader | {med(us['leader'].values()):.2f} | {med(us['leader'][r] / sa[r] for r in rounds):.2f} × | {med(rate['group'].values()):,.0f} |")
for f in followers:
    print(f"| {f.replace('follower', 'follower ')} | {med(us[f].values()):.2f} | {med(us[f][r] / sa[r] for r in rounds):.2f} × | |")
print(f"| worst follower | {med(worst.values()):.2f} | {med(worst[r] / sa[r] for r in rounds):.2f} × | |")
print()
print(sys.argv[4])
print("Per round (µs per decision, standalone / leader / worst follower): " + "; ".join(
    f"{sa[r]:.2f} / {us['leader'][r]:.2f} / {worst[r]:.2f}" for r in rounds))
print()
print(f"leader/standalone {med(us['leader'][r] / sa[r] for r in rounds):.2f}  "
      f"worst-follower/standalone {med(worst[r] / sa[r] for r in rounds):.2f}")
EOF
if [[ -n $PPROF ]]; then
	for who in leader follower; do
		echo
		echo "$who, CPU profile of the first group run split by part ($PPROF/$who.pprof):"
		python3 scripts/lib/cpu-buckets.py "$PPROF/cellserver" "$PPROF/$who.pprof"
	done
fi
