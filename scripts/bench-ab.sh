#!/bin/bash
# bench-ab.sh — one build against another on a many-core machine, servers
# pinned to cores 0-3, redis-benchmark (8 threads, 200 connections) on 8-15,
# interleaved rounds at P16 and P1. Uses .devbin/ as scripts/devbench.sh
# does, with the earlier build as .devbin/cellserver-old. Servers: old and
# new with --io-threads 4, new without the hot-key summaries
# (--hotkeys-capacity 0), new without the key classes
# (--metrics-class-limit 0), new with default flags, and redis-server (SET).
# Env: ROUNDS (3), SERVERS (all six), N16 and N1 (requests per run).
B=$(cd "$(dirname "$0")/.." && pwd)/.devbin; L=$B/lib
ld() { "$L/ld-linux-x86-64.so.2" --library-path "$L" "$@"; }
W=/tmp/ab; rm -rf $W; mkdir -p $W; OUT=${OUT:-/tmp}
p=31000; PIDS=()
start() { local name=$1 bin=$2; shift 2; p=$((p+1)); mkdir -p $W/$name; taskset -c 0-3 $B/$bin --port $p --dir $W/$name --save "" --loglevel warning "$@" >$W/$name.log 2>&1 & PIDS+=($!); eval "P_$name=$p"; }
start old cellserver-old --io-threads 4
start new cellserver --io-threads 4
start newnohot cellserver --io-threads 4 --hotkeys-capacity 0
start newnocls cellserver --io-threads 4 --metrics-class-limit 0
start newdef cellserver
p=$((p+1)); taskset -c 0-3 "$L/ld-linux-x86-64.so.2" --library-path "$L" $B/redis-server --port $p --save "" --appendonly no >$W/redis.log 2>&1 & PIDS+=($!); P_redis=$p
sleep 1
for n in old new newnohot newnocls newdef redis; do eval pp=\$P_$n; ld $B/redis-cli -p $pp PING >/dev/null || echo "$n not up"; done
echo "server,shape,round,rps,p50"
for r in $(seq ${ROUNDS:-3}); do for sh in "16 200" "1 200"; do set -- $sh
 for n in ${SERVERS:-old new newnohot newnocls newdef redis}; do eval pp=\$P_$n
  if [ $n = redis ]; then C=(SET 'k:__rand_int__' v); else C=(CL.THROTTLE 'user:__rand_int__' 15 30 60); fi
  nn=$(( $1 == 16 ? ${N16:-2000000} : ${N1:-400000} ))
  o=$(taskset -c 8-15 "$L/ld-linux-x86-64.so.2" --library-path "$L" $B/redis-benchmark -p $pp -c $2 -P $1 --threads 8 -n $nn -r 1000000 --csv "${C[@]}" 2>/dev/null | tail -1)
  echo "$o" | awk -F'","' -v s=$n -v sh="p$1x$2" -v r=$r '{gsub(/"/,"",$2); gsub(/"/,"",$5); print s","sh","r","$2","$5}'
 done; done; done | tee $OUT/ab.csv
kill ${PIDS[@]}
