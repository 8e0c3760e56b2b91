#!/usr/bin/env bash
# How many event loops should a standalone server run on 2, 4, 8 and 16
# CPUs? For each CPU count N, the server is pinned to cores 0..N-1 and the
# load generator to other cores (GEN), and in the same run, round by round:
#
#   cellserver (default io-threads), cellserver --io-threads 1, 2, 4, 8, 16
#   redis-server answering SET, and Redis + redis-cell (CELL_MODULE)
#
# each measured with redis-benchmark at pipeline 1 and 16 (-c 200, -r
# 1000000, --threads GEN_THREADS):
#
#   CL.THROTTLE user:__rand_int__ 15 30 60   (cellserver, redis-cell)
#   SET key:__rand_int__ v                  (Redis)
#
# GOMAXPROCS follows the CPUs the server is pinned to (the Go runtime reads
# its affinity), so io-threads 0 means N/2 loops there. Prints a markdown
# table of median requests/s and p50 per (N, server, pipeline) for
# docs/performance.md and writes the raw rows to $OUT/results.csv.
#
# Meant for a machine of 16 or more cores with nothing else running; with
# N=16 on a 16-core machine the server and load generator share cores (the
# table says so).
#
# Environment:
#   CPUS="2 4 8 16"          CPU counts to measure
#   LOOPS="1 2 4 8 16"       io-threads values besides the default
#   GEN=8-15                 load-generator cores (N <= 8); GEN16 for N=16
#   GEN16=0-15
#   GEN_THREADS=8            redis-benchmark --threads
#   ROUNDS=3  SECS=5         rounds, seconds per run
#   CELLSERVER=              binary to measure (default: built static here)
#   REDIS_SERVER=redis-server REDIS_BENCHMARK=redis-benchmark REDIS_CLI=redis-cli
#   CELL_MODULE=             redis-cell's libredis_cell.so (skipped if unset)
#   OUT=/tmp/bench-loops
set -euo pipefail
cd "$(dirname "$0")/.."
CPUS=${CPUS:-2 4 8 16}
LOOPS=${LOOPS:-1 2 4 8 16}
GEN=${GEN:-8-15}
GEN16=${GEN16:-0-15}
GEN_THREADS=${GEN_THREADS:-8}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-5}
OUT=${OUT:-/tmp/bench-loops}
RS=${REDIS_SERVER:-redis-server}
RB=${REDIS_BENCHMARK:-redis-benchmark}
RC=${REDIS_CLI:-redis-cli}
mkdir -p "$OUT"
W=$(mktemp -d)
if [ -z "${CELLSERVER:-}" ]; then
	CELLSERVER=$W/cellserver
	CGO_ENABLED=0 go build -trimpath -o "$CELLSERVER" ./cmd/cellserver
fi
command -v taskset >/dev/null || { echo "taskset is needed (util-linux)" >&2; exit 1; }
RES=$OUT/results.csv
echo "cpus,server,pipeline,round,rps,p50_ms" >"$RES"
PIDS=()
stop_all() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 0.5
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	PIDS=()
}
trap 'stop_all; rm -rf "$W"' EXIT
{ uname -a; nproc; grep -m1 'model name' /proc/cpuinfo || true; "$CELLSERVER" --version; "$RS" --version; } >"$OUT/machine.txt" 2>&1
port=$((20000 + RANDOM % 20000))
wait_ping() { for _ in $(seq 150); do [ "$("$RC" -p "$1" PING 2>/dev/null)" = PONG ] && return 0; sleep 0.1; done; echo "port $1 did not answer" >&2; return 1; }

# run N label port pipe round cmd...: one calibrated redis-benchmark run
run() {
	local n=$1 label=$2 p=$3 pipe=$4 round=$5; shift 5
	local gen=$GEN; [ "$n" -gt 8 ] && gen=$GEN16
	local n0=$((200 * pipe * 50)) out rps total
	out=$(taskset -c "$gen" "$RB" -h 127.0.0.1 -p "$p" -c 200 -P "$pipe" --threads "$GEN_THREADS" -n "$n0" -r 1000000 --csv "$@" 2>/dev/null | tail -n 1)
	rps=$(echo "$out" | awk -F'","' '{gsub(/"/,"",$2); print int($2)}')
	total=$(( ${rps:-1000} * SECS )); [ "$total" -lt "$n0" ] && total=$n0
	out=$(taskset -c "$gen" "$RB" -h 127.0.0.1 -p "$p" -c 200 -P "$pipe" --threads "$GEN_THREADS" -n "$total" -r 1000000 --csv "$@" 2>/dev/null | tail -n 1)
	echo "$out" | awk -F'","' -v n="$n" -v s="$label" -v P="$pipe" -v r="$round" \
		'{gsub(/"/,"",$2); gsub(/"/,"",$5); print n","s",P"P","r","int($2)","$5}' | tee -a "$RES"
}

THR=(CL.THROTTLE 'user:__rand_int__' 15 30 60)
SETC=(SET 'key:__rand_int__' v)
for n in $CPUS; do
	cores=0-$((n - 1))
	declare -A port_of=()
	labels=()
	start_cell() { # label flags...
		local label=$1; shift
		port=$((port + 1)); mkdir -p "$W/$label-$n"
		taskset -c "$cores" "$CELLSERVER" --bind 127.0.0.1 --port "$port" --dir "$W/$label-$n" --save "" --loglevel warning "$@" >"$W/$label-$n.log" 2>&1 &
		PIDS+=($!); wait_ping "$port"; port_of[$label]=$port; labels+=("$label")
	}
	start_redis() { # label flags...
		local label=$1; shift
		port=$((port + 1))
		taskset -c "$cores" "$RS" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$W" "$@" >"$W/$label-$n.log" 2>&1 &
		PIDS+=($!); wait_ping "$port"; port_of[$label]=$port; labels+=("$label")
	}
	start_cell "cellserver-default"
	for l in $LOOPS; do start_cell "cellserver-io$l" --io-threads "$l"; done
	start_redis "redis-set"
	[ -n "${CELL_MODULE:-}" ] && start_redis "redis-cell" --loadmodule "$CELL_MODULE"
	for r in $(seq "$ROUNDS"); do
		order=("${labels[@]}")
		# Every other round in reverse, so no server always runs first.
		if [ $((r % 2)) = 0 ]; then mapfile -t order < <(printf '%s\n' "${labels[@]}" | tac); fi
		for pipe in 1 16; do
			for label in "${order[@]}"; do
				if [ "$label" = redis-set ]; then run "$n" "$label" "${port_of[$label]}" "$pipe" "$r" "${SETC[@]}"
				else run "$n" "$label" "${port_of[$label]}" "$pipe" "$r" "${THR[@]}"; fi
			done
		done
	done
	stop_all
done

python3 - "$RES" "$GEN" "$GEN16" <<'PY' | tee "$OUT/table.md"
import csv, sys, statistics
rows = {}
for r in csv.DictReader(open(sys.argv[1])):
    try: rows.setdefault((int(r["cpus"]), r["server"], r["pipeline"]), []).append((float(r["rps"]), float(r["p50_ms"])))
    except ValueError: pass
cpus = sorted({k[0] for k in rows}); servers = sorted({k[1] for k in rows}, key=lambda s: (not s.startswith("cellserver"), s))
print("| CPUs | server | P1 req/s | P1 p50 ms | P16 req/s | P16 p50 ms |")
print("|---|---|---|---|---|---|")
for n in cpus:
    for s in servers:
        cells = []
        for p in ("P1", "P16"):
            v = rows.get((n, s, p))
            cells += ["%d" % statistics.median(x[0] for x in v), "%.2f" % statistics.median(x[1] for x in v)] if v else ["", ""]
        print("| %d%s | %s | %s |" % (n, " (shared with the load)" if n > 8 else "", s, " | ".join(cells)))
print("\nServer on cores 0..N-1; load generator on %s (N <= 8) or %s (N = 16); medians over rounds." % (sys.argv[2], sys.argv[3]))
PY
