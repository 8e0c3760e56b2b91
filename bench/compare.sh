#!/usr/bin/env bash
# compare.sh: measure cellserver against redis-server on this machine.
#
# Starts redis-server (no persistence) and cellserver on free loopback ports,
# runs the interleaved comparisons of the performance targets with the load
# generator in this directory, prints a summary table and stops both servers.
#
#   bench/compare.sh [-d 3s] [-w 1s] [-r 3] [-c 50] [-k 100000] [-p plot.svg] [-o DIR]
#                    [-s REGEX] [-b N]
#
#   -d  measured duration of each round            (default 3s)
#   -w  warm-up before each round                  (default 1s)
#   -r  rounds per server, interleaved A, B, A, B  (default 3)
#   -c  connections                                (default 50)
#   -k  keyspace size                              (default 100000)
#   -p  also sweep connections 1,10,50,100 for CL.THROTTLE vs SET at pipeline
#       16 and write the plot (.svg or .png) there
#   -o  keep every comparison's CSV in this directory
#   -s  run only the comparisons whose name matches this extended regex
#       (e.g. 'vs-set'); the names are printed in the summary
#   -b  cross-check with redis-benchmark: N requests per run, CL.THROTTLE on
#       cellserver against SET on redis-server at pipelines 16 and 1, the
#       same number of interleaved rounds; it also prints each server's CPU
#       time per request (from /proc), which the other processes on a shared
#       machine disturb less than throughput
#
# Extra cellserver flags can be passed in CELLSERVER_ARGS. Each comparison
# takes about 2 × rounds × (duration + warm-up); the script prints its estimate.
set -euo pipefail

dur=3s warm=1s rounds=3 conns=50 keys=100000 plot="" outdir="" only="" rbn=0
while getopts "d:w:r:c:k:p:o:s:b:h" opt; do
	case $opt in
	d) dur=$OPTARG ;;
	w) warm=$OPTARG ;;
	r) rounds=$OPTARG ;;
	c) conns=$OPTARG ;;
	k) keys=$OPTARG ;;
	p) plot=$OPTARG ;;
	o) outdir=$OPTARG ;;
	s) only=$OPTARG ;;
	b) rbn=$OPTARG ;;
	*) sed -n '2,28p' "$0"; exit 2 ;;
	esac
done

# Paths given relative to where the script was started from.
case $plot in "" | /*) ;; *) plot=$PWD/$plot ;; esac
case $outdir in "" | /*) ;; *) outdir=$PWD/$outdir ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# 1. Tools: redis-server and redis-cli from Debian when missing.
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
	echo "installing redis-server and redis-tools" >&2
	apt-get install -y redis-server redis-tools >/dev/null || {
		apt-get update >/dev/null && apt-get install -y redis-server redis-tools >/dev/null
	}
fi

work=$(mktemp -d)
[ -n "$outdir" ] && mkdir -p "$outdir"
pids=()
cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port prints a loopback port nobody listens on.
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "no free port found" >&2
	return 1
}

# wait_ready PORT NAME polls PING until PONG or a 15 s deadline.
wait_ready() {
	local deadline=$((SECONDS + 15))
	until [ "$(redis-cli -p "$1" PING 2>/dev/null)" = "PONG" ]; do
		if [ $SECONDS -ge $deadline ]; then
			echo "$2 on port $1 did not answer PING within 15 s" >&2
			return 1
		fi
		sleep 0.1
	done
}

# 2. Build the load generator (bench/ is its own module) and cellserver.
(cd bench && go build -o "$work/bench" .)
cell_ok=1
if ! go build -o "$work/cellserver" ./cmd/cellserver 2>"$work/build.log"; then
	cell_ok=0
	echo "=================================================================" >&2
	echo "cellserver does not build (go build ./cmd/cellserver failed):" >&2
	sed 's/^/    /' "$work/build.log" >&2
	echo "Only the Redis reference (SET vs Lua GCRA) will be measured." >&2
	echo "=================================================================" >&2
fi

# 3. Servers.
redis_port=$(free_port)
(cd "$work" && exec redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
	--logfile "$work/redis.log") &
pids+=($!)
redis_pid=$!
wait_ready "$redis_port" redis-server
redis=127.0.0.1:$redis_port
echo "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on $redis" >&2

cell=""
if [ $cell_ok = 1 ]; then
	cell_port=$(free_port)
	mkdir -p "$work/cell"
	# shellcheck disable=SC2086 # CELLSERVER_ARGS is a list of flags
	# No persistence, as for redis-server: --save 0 turns automatic snapshots off.
	(cd "$work/cell" && exec "$work/cellserver" --port "$cell_port" --bind 127.0.0.1 --save 0 ${CELLSERVER_ARGS:-} >"$work/cell.log" 2>&1) &
	pids+=($!)
	cell_pid=$!
	if wait_ready "$cell_port" cellserver; then
		cell=127.0.0.1:$cell_port
		echo "cellserver on $cell" >&2
	else
		echo "cellserver started but does not answer; its log:" >&2
		sed 's/^/    /' "$work/cell.log" >&2
		cell_ok=0
	fi
fi

# 4. Comparisons: name, A address, A preset, B address, B preset, pipeline, target.
comparisons=()
if [ $cell_ok = 1 ]; then
	comparisons+=(
		"gcra-vs-set-P16|$cell|gcra|$redis|set|16|>= 1.0 (and p99 ratio <= 1.0)"
		"gcra-vs-set-P1|$cell|gcra|$redis|set|1|>= 1.0"
		"gcra-vs-lua-P16|$cell|gcra|$redis|lua-gcra|16|"
	)
fi
comparisons+=("lua-vs-set-P16|$redis|lua-gcra|$redis|set|16|reference (about 0.13)")
if [ $cell_ok = 1 ]; then
	for p in gcra-all tb lb fw sw; do
		comparisons+=("$p-vs-gcra-P16|$cell|$p|$cell|gcra|16|>= 0.67 (within 1.5x)")
	done
	comparisons+=("sl-vs-gcra-P16|$cell|sl|$cell|gcra|16|>= 0.33 (within 3x, limit 100)")
fi
if [ -n "$only" ]; then
	selected=()
	for c in "${comparisons[@]}"; do
		if [[ ${c%%|*} =~ $only ]]; then
			selected+=("$c")
		fi
	done
	comparisons=(${selected[@]+"${selected[@]}"})
fi

secs() { # seconds in a Go duration like 3s, 500ms, 1m
	case $1 in
	*ms) echo $(( ${1%ms} / 1000 )) ;;
	*m) echo $(( ${1%m} * 60 )) ;;
	*s) echo "${1%s}" ;;
	*) echo "$1" ;;
	esac
}
per=$(( 2 * rounds * ($(secs "$dur") + $(secs "$warm")) + 2 ))
echo "${#comparisons[@]} comparisons, about $((per * ${#comparisons[@]})) s" >&2

summary="$work/summary.txt"
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' comparison P "A req/s" "B req/s" "A/B req/s" "A p99 µs" "B p99 µs" "A/B p99" errors target >"$summary"
status=0
for c in "${comparisons[@]}"; do
	IFS='|' read -r name addr_a preset_a addr_b preset_b pipe target <<<"$c"
	echo >&2
	echo "== $name: A $preset_a @ $addr_a vs B $preset_b @ $addr_b, pipeline $pipe" >&2
	csv="$work/$name.csv"
	# Empty keyspaces for every comparison, and distinct key prefixes for A and
	# B, since both may be one server running two kinds of limiter.
	for a in "$addr_a" "$addr_b"; do
		redis-cli -h "${a%:*}" -p "${a##*:}" FLUSHALL >/dev/null || true
	done
	if ! "$work/bench" -q -format csv -addr "$addr_a" -preset "$preset_a" -compare "$addr_b" -compare-preset "$preset_b" \
		-key-prefix a: -compare-key-prefix b: \
		-c "$conns" -P "$pipe" -keys "$keys" -d "$dur" -warmup "$warm" -rounds "$rounds" >"$csv"; then
		status=1
	fi
	awk -F, '{ printf "  %-6s %-7s %10s %7s %11s %10s %10s %10s %10s\n", $3, $4, $6, $7, $9, $10, $11, $12, $13 }' "$csv" >&2
	[ -n "$outdir" ] && cp "$csv" "$outdir/"
	awk -F, -v name="$name" -v pipe="$pipe" -v target="$target" '
		$4 == "median" && $3 == "A" { ar = $9; ap = $11; ae = $7 }
		$4 == "median" && $3 == "B" { br = $9; bp = $11; be = $7 }
		$4 == "ratio" { rr = $9; rp = $11 }
		END { printf "%s\t%s\t%.0f\t%.0f\t%.3f\t%.1f\t%.1f\t%.3f\t%d\t%s\n", name, pipe, ar, br, rr, ap, bp, rp, ae + be, target }
	' "$csv" >>"$summary"
done

if [ -n "$plot" ] && [ $cell_ok = 1 ]; then
	echo >&2
	echo "== sweep for $plot: CL.THROTTLE vs SET, pipeline 16, connections 1,10,50,100" >&2
	"$work/bench" -q -addr "$cell" -preset gcra -compare "$redis" -compare-preset set -P 16 -keys "$keys" \
		-d "$dur" -warmup "$warm" -rounds "$rounds" -sweep-c 1,10,50,100 -plot "$plot" >&2 || status=1
fi

# 5. The cross-check with redis-benchmark: the same loads from another
# client, and each server's CPU time per request.
rb_summary="$work/rb.txt"
if [ "$rbn" -gt 0 ] && [ $cell_ok = 1 ]; then
	cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
	hz=$(getconf CLK_TCK)
	# rb_run PORT PID PIPELINE COMMAND... prints "req/s p99_ms cpu_us_per_request".
	rb_run() {
		local port=$1 pid=$2 pipe=$3 t0 t1 line
		shift 3
		t0=$(cpu_ticks "$pid")
		line=$(redis-benchmark -p "$port" -n "$rbn" -r "$keys" -c "$conns" -P "$pipe" --csv "$@" 2>/dev/null | tail -1)
		t1=$(cpu_ticks "$pid")
		# --csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
		awk -F'","' -v cpu=$((t1 - t0)) -v hz="$hz" -v n="$rbn" '{ printf "%s %s %.3f\n", $2, $7, cpu / hz / n * 1e6 }' <<<"$line"
	}
	median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' P "cell req/s" "SET req/s" "cell/SET req/s" "cell p99 ms" "SET p99 ms" "cell/SET p99" "cell CPU µs/req" "SET CPU µs/req" >"$rb_summary"
	for pipe in 16 1; do
		echo >&2
		echo "== redis-benchmark: CL.THROTTLE on cellserver vs SET on redis-server, pipeline $pipe, $rounds interleaved rounds of $rbn requests" >&2
		: >"$work/rb-cell" && : >"$work/rb-set"
		for _ in $(seq "$rounds"); do
			rb_run "${cell##*:}" "$cell_pid" "$pipe" CL.THROTTLE k:__rand_int__ 15 30 60 | tee -a "$work/rb-cell" | sed 's/^/  cell /' >&2
			rb_run "$redis_port" "$redis_pid" "$pipe" SET k:__rand_int__ v | tee -a "$work/rb-set" | sed 's/^/  SET  /' >&2
		done
		cr=$(cut -d' ' -f1 "$work/rb-cell" | median) sr=$(cut -d' ' -f1 "$work/rb-set" | median)
		cp=$(cut -d' ' -f2 "$work/rb-cell" | median) sp=$(cut -d' ' -f2 "$work/rb-set" | median)
		cc=$(cut -d' ' -f3 "$work/rb-cell" | median) sc=$(cut -d' ' -f3 "$work/rb-set" | median)
		awk -v p="$pipe" -v cr="$cr" -v sr="$sr" -v cp="$cp" -v sp="$sp" -v cc="$cc" -v sc="$sc" \
			'BEGIN { printf "%s\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f\t%.2f\n", p, cr, sr, cr / sr, cp, sp, cp / sp, cc, sc }' >>"$rb_summary"
	done
fi

echo
echo "Summary: medians of $rounds interleaved rounds, $conns connections, $keys uniform keys, $dur per round"
column -s $'\t' -t <"$summary"
if [ -s "$rb_summary" ]; then
	echo
	echo "redis-benchmark cross-check: medians of $rounds interleaved rounds of $rbn requests; CPU is each server's user+system time per request"
	column -s $'\t' -t <"$rb_summary"
fi
if [ $cell_ok = 0 ]; then
	echo
	echo "cellserver was not measured: it does not build or does not start (see above)."
	exit 1
fi
exit $status
