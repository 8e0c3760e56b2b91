#!/usr/bin/env bash
# How fast does a standalone server decide CL.THROTTLE, with default flags,
# against Debian's redis-server answering SET, measured in the same run?
#
# Starts the server under test (default flags, nothing pinned), the same
# build with each variant of VARIANTS, and redis-server, then runs, for each
# shape (pipeline P x C connections),
#
#   redis-benchmark -r 100000 -c C -P P -n N CL.THROTTLE user:__rand_int__ 15 30 60
#   redis-benchmark -r 100000 -c C -P P -n N SET user:__rand_int__ v
#
# against each server in turn, ROUNDS times (every other round in the
# reverse order). Throughput, p50 and p99 are redis-benchmark's (--csv); the
# CPU per request is the server process's user + system time (/proc) over
# the run divided by the requests. Each figure is the median over rounds; a
# ratio is taken within a round, then the median of those. Prints a
# markdown table for docs/performance.md.
#
# Environment:
#   ROUNDS=5            rounds
#   SHAPES="p1x50 p16x50"
#   REQUESTS_P1=150000  requests per run at pipeline 1
#   REQUESTS=1500000    requests per run with a pipeline
#   VARIANTS="--io-event-loops=no"
#                       other configurations of the same build, each a
#                       space-free list of flags and environment settings
#                       joined by commas (e.g. "--io-threads=2
#                       GOMAXPROCS=1,--io-event-loops=no")
#   CELL_MODULE=        path of redis-cell's module (libredis_cell.so): also
#                       measure Redis + redis-cell answering CL.THROTTLE
#
# A quick run: ROUNDS=1 REQUESTS_P1=20000 REQUESTS=200000 scripts/bench-standalone.sh
set -euo pipefail
ROUNDS=${ROUNDS:-5}
SHAPES=${SHAPES:-"p1x50 p16x50"}
REQUESTS_P1=${REQUESTS_P1:-150000}
REQUESTS=${REQUESTS:-1500000}
VARIANTS=${VARIANTS:-"--io-event-loops=no"}
CELL_MODULE=${CELL_MODULE:-}
cd "$(dirname "$0")/.."

die() {
	echo "bench-standalone: $*" >&2
	exit 1
}
command -v redis-benchmark >/dev/null && command -v redis-server >/dev/null ||
	die "needs redis-benchmark and redis-server (Debian: apt-get install redis-server redis-tools)"

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/cellserver" ./cmd/cellserver

# Targets: name, port, command to benchmark, pid.
names=() ports=() cmds=() tpids=()
port=17400
start() { # name cmd... -- server argv...
	local name=$1 cmd=$2
	shift 2
	port=$((port + 1))
	"$@" --port "$port" >"$work/$name.log" 2>&1 &
	local pid=$!
	pids+=("$pid")
	names+=("$name") ports+=("$port") cmds+=("$cmd") tpids+=("$pid")
}
throttle="CL.THROTTLE user:__rand_int__ 15 30 60"
start cellserver "$throttle" "$work/cellserver" --save "" --dir "$work"
for v in $VARIANTS; do
	flags=() envs=()
	for item in ${v//,/ }; do
		if [[ $item == --* ]]; then flags+=("$item"); else envs+=("$item"); fi
	done
	start "cellserver ${v//,/ }" "$throttle" env "${envs[@]}" "$work/cellserver" --save "" --dir "$work" "${flags[@]}"
done
start "redis SET" "SET user:__rand_int__ v" redis-server --save "" --appendonly no
if [[ -n $CELL_MODULE ]]; then
	start "redis-cell" "$throttle" redis-server --save "" --appendonly no --loadmodule "$CELL_MODULE"
fi
for p in "${ports[@]}"; do
	for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done

cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # clock ticks
hz=$(getconf CLK_TCK)

# run target shape → "rps p50 p99 cpu_us_per_request"
run() {
	local i=$1 shape=$2 p c n
	[[ $shape =~ ^p([0-9]+)x([0-9]+)$ ]] || die "shape $shape"
	p=${BASH_REMATCH[1]} c=${BASH_REMATCH[2]}
	n=$REQUESTS
	((p > 1)) || n=$REQUESTS_P1
	local t0 t1 out
	t0=$(cpu "${tpids[$i]}")
	# shellcheck disable=SC2086
	out=$(redis-benchmark -p "${ports[$i]}" -r 100000 -c "$c" -P "$p" -n "$n" --csv ${cmds[$i]} | tail -1)
	t1=$(cpu "${tpids[$i]}")
	# "name","rps","avg","min","p50","p95","p99","max"
	echo "$out" | tr -d '"' | awk -F, -v t="$((t1 - t0))" -v hz="$hz" -v n="$n" \
		'{ printf "%s %s %s %.3f\n", $2, $5, $7, t / hz * 1e6 / n }'
}

declare -A res
for shape in $SHAPES; do
	for r in $(seq "$ROUNDS"); do
		order=$(seq 0 $((${#names[@]} - 1)))
		((r % 2)) || order=$(echo "$order" | tac)
		for i in $order; do
			res[$shape,$r,$i]=$(run "$i" "$shape")
			echo "$shape round $r ${names[$i]}: ${res[$shape,$r,$i]}" >&2
		done
	done
done

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
field() { echo "${res[$1]}" | awk -v f="$2" '{ print $f }'; }
set_i=-1 cell_i=-1
for i in "${!names[@]}"; do
	[[ ${names[$i]} == "redis SET" ]] && set_i=$i
	[[ ${names[$i]} == "redis-cell" ]] && cell_i=$i
done
echo
echo "| shape | server | requests/s | p50 ms | p99 ms | CPU µs/request | / redis SET | / redis-cell |"
echo "|---|---|---|---|---|---|---|---|"
for shape in $SHAPES; do
	for i in "${!names[@]}"; do
		row="| $shape | ${names[$i]}"
		for f in 1 2 3 4; do
			row+=" | $(for r in $(seq "$ROUNDS"); do field "$shape,$r,$i" "$f"; done | median)"
		done
		for ref in $set_i $cell_i; do
			if ((ref < 0)) || ((ref == i)); then
				row+=" | "
				continue
			fi
			row+=" | $(for r in $(seq "$ROUNDS"); do
				awk -v a="$(field "$shape,$r,$i" 1)" -v b="$(field "$shape,$r,$ref" 1)" 'BEGIN { printf "%.3f\n", a / b }'
			done | median)×"
		done
		echo "$row |"
	done
done
echo
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); nproc $(nproc)"
