#!/bin/bash
# devbench.sh — cellserver against Redis SET and Redis + redis-cell, standalone
# and as a 3-node Raft group, on a many-core machine, each server pinned to its
# own cores and the load generator to others. Ratios are within one run.
#
# Needs .devbin/ in the folder above this script (put the script in scripts/,
# the folder at the repository root, and ignore it in git): cellserver built
# static (CGO_ENABLED=0), redis-server (a copy of redis-check-rdb named
# redis-server), redis-benchmark, redis-cli, lib/ holding every library `ldd`
# lists for them plus ld-linux-x86-64.so.2 (they run through that loader, so
# they work on another distribution), and optionally libredis_cell.so.
# Writes results to $OUT (or /tmp/devbench-out): results.csv, summary.csv.
# PARTS may also name "loops" (event loops against 2, 4, 8 cores) and
# "groups" (one group of 3 against two groups of 3).
#
# Env: SECS (seconds per run, 3), ROUNDS (2), SRV (server cores, 0-3),
# SRV8 (0-7), GEN (load-generator cores, 8-15), GEN_THREADS (4),
# NODE1/NODE2/NODE3/REF (cluster cores: 0-1, 2-3, 4-5, 6-7),
# PARTS ("standalone cluster").
set -u
HERE=$(cd "$(dirname "$0")/.." && pwd)
B=$HERE/.devbin
L=$B/lib
OUT=${OUT:-/tmp/devbench-out}
mkdir -p "$OUT"
W=${WORK:-$HERE/.devwork}
rm -rf "$W"; mkdir -p "$W"
SECS=${SECS:-3}; ROUNDS=${ROUNDS:-2}
SRV=${SRV:-0-3}; SRV8=${SRV8:-0-7}; GEN=${GEN:-8-15}; GEN_THREADS=${GEN_THREADS:-4}
NODE1=${NODE1:-0-1}; NODE2=${NODE2:-2-3}; NODE3=${NODE3:-4-5}; REF=${REF:-6-7}
PARTS=${PARTS:-"standalone cluster"}
SHAPES=${SHAPES:-"1 50,1 200,16 200"}       # standalone shapes: "pipe conns,..."
CSHAPES=${CSHAPES:-"1 1,1 50,16 50"}        # cluster shapes
CONFIGS=${CONFIGS:-"default;wal --raft-log-store wal;everysec-wal --raft-log-store wal --appendfsync everysec;everysec-bolt --appendfsync everysec"}
SPIN=${SPIN:-0}  # 1: a SCHED_IDLE busy loop on every core, so idle vCPUs do not halt (wake-up latency of VMs)
RES=$OUT/results.csv
echo "part,config,server,shape,round,rps,p50_ms,p99_ms" >"$RES"
PIDS=()
SPINS=()
cleanup() { for p in "${SPINS[@]}"; do kill "$p" 2>/dev/null; done; for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; sleep 0.3; for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT
ldrun() { "$L/ld-linux-x86-64.so.2" --library-path "$L" "$@"; }
pin() { local cores=$1; shift; if command -v taskset >/dev/null; then exec taskset -c "$cores" "$@"; else exec "$@"; fi; } # only in a subshell: &, $(...)
rcli() { ldrun "$B/redis-cli" "$@"; }
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/log.txt"; }

{
  echo "== machine"; uname -a; nproc; grep -m1 'model name' /proc/cpuinfo; free -g | head -2
  echo "== disk of $W"; df -h "$W" | tail -1; mount | grep -E " $(df --output=target "$W" | tail -1) " | head -2
  echo "== 4k O_DSYNC writes (500)"; dd if=/dev/zero of="$W/dd.test" bs=4k count=500 oflag=dsync 2>&1 | tail -1; rm -f "$W/dd.test"
  echo "== taskset: $(command -v taskset || echo missing)"
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
if [ "$SPIN" = 1 ]; then
  for c in $(seq 0 $(($(nproc) - 1))); do
    if command -v chrt >/dev/null; then taskset -c "$c" chrt -i 0 bash -c 'while :; do :; done' &
    else taskset -c "$c" nice -n 19 bash -c 'while :; do :; done' & fi
    SPINS+=($!)
  done
  echo "spinners: ${#SPINS[@]} ($(command -v chrt >/dev/null && echo SCHED_IDLE || echo nice 19))" | tee -a "$OUT/machine.txt"
fi

wait_ping() { for _ in $(seq 150); do [ "$(rcli -p "$1" PING 2>/dev/null)" = PONG ] && return 0; sleep 0.1; done; return 1; }
port=$((21000 + RANDOM % 20000))
np() { port=$((port + 1)); } # sets $port (no subshell)

start_cell() { # cores port dir [flags...]
  local cores=$1 p=$2 d=$3; shift 3; mkdir -p "$d"
  pin "$cores" "$B/cellserver" --bind 127.0.0.1 --port "$p" --dir "$d" --loglevel warning "$@" >"$d.log" 2>&1 &
  PIDS+=($!); LAST=$!
}
start_redis() { # cores port [flags...]
  local cores=$1 p=$2; shift 2
  pin "$cores" "$L/ld-linux-x86-64.so.2" --library-path "$L" "$B/redis-server" --port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$W" "$@" >"$W/redis-$p.log" 2>&1 &
  PIDS+=($!); LAST=$!
}

# bench part config server port pipe conns cmd... : one calibrated run per round
bench() {
  local part=$1 config=$2 server=$3 p=$4 pipe=$5 conns=$6 round=$7; shift 7
  local th=$GEN_THREADS; [ "$conns" -lt "$th" ] && th=$conns
  local n0=$((conns * pipe * 40)); [ $n0 -lt 200 ] && n0=200
  local out rps n
  out=$(pin "$GEN" "$L/ld-linux-x86-64.so.2" --library-path "$L" "$B/redis-benchmark" -h 127.0.0.1 -p "$p" -c "$conns" -P "$pipe" --threads "$th" -n "$n0" -r 1000000 --csv "$@" 2>/dev/null | tail -n 1)
  rps=$(echo "$out" | awk -F'","' '{gsub(/"/,"",$2); print int($2)}')
  [ -z "$rps" ] && rps=1000
  n=$(awk -v r="$rps" -v s="$SECS" -v m="$n0" 'BEGIN{n=int(r*s); if(n<m)n=m; print n}')
  out=$(pin "$GEN" "$L/ld-linux-x86-64.so.2" --library-path "$L" "$B/redis-benchmark" -h 127.0.0.1 -p "$p" -c "$conns" -P "$pipe" --threads "$th" -n "$n" -r 1000000 --csv "$@" 2>/dev/null | tail -n 1)
  echo "$out" | awk -F'","' -v part="$part" -v c="$config" -v s="$server" -v sh="p${pipe}x${conns}" -v r="$round" \
    '{gsub(/"/,"",$2); gsub(/"/,"",$5); gsub(/"/,"",$7); print part","c","s","sh","r","$2","$5","$7}' | tee -a "$RES"
}
THR=(CL.THROTTLE 'user:__rand_int__' 15 30 60)
SETC=(SET 'key:__rand_int__' v)

if [[ " $PARTS " == *" standalone "* ]]; then
  log "standalone: servers on cores $SRV, load on $GEN"
  np; cp=$port; start_cell "$SRV" "$cp" "$W/cs"; wait_ping "$cp" || log "cellserver did not start: $(tail -3 "$W/cs.log")"
  np; cp8=$port; start_cell "$SRV8" "$cp8" "$W/cs8"; wait_ping "$cp8" || log "cellserver(8) did not start"
  np; cpt=$port; start_cell "$SRV" "$cpt" "$W/cst" --io-threads 4; wait_ping "$cpt" || log "cellserver(io4) did not start"
  np; rp=$port; start_redis "$SRV" "$rp"; wait_ping "$rp" || log "redis did not start: $(tail -3 "$W/redis-$rp.log")"
  np; rtp=$port; start_redis "$SRV" "$rtp" --io-threads 4; wait_ping "$rtp" || log "redis io-threads did not start"
  xp=""
  if [ -f "$B/libredis_cell.so" ]; then
    np; xp=$port; start_redis "$SRV" "$xp" --loadmodule "$B/libredis_cell.so"; wait_ping "$xp" || { log "redis-cell did not start: $(tail -3 "$W/redis-$xp.log")"; xp=""; }
  fi
  [ -n "$xp" ] && log "redis-cell: $(rcli -p "$xp" CL.THROTTLE probe 15 30 60 | tr '\n' ' ')"
  log "cellserver: $(rcli -p "$cp" CL.THROTTLE probe 15 30 60 | tr '\n' ' ')"
  IFS=, read -ra SHS <<<"$SHAPES"
  for shape in "${SHS[@]}"; do
    set -- $shape
    for r in $(seq "$ROUNDS"); do
      bench standalone default cellserver "$cp" "$1" "$2" "$r" "${THR[@]}"
      bench standalone default redis-set "$rp" "$1" "$2" "$r" "${SETC[@]}"
      [ -n "$xp" ] && bench standalone default redis-cell "$xp" "$1" "$2" "$r" "${THR[@]}"
      bench standalone io4 redis-set-io4 "$rtp" "$1" "$2" "$r" "${SETC[@]}"
      bench standalone io4 cellserver-io4 "$cpt" "$1" "$2" "$r" "${THR[@]}"
      bench standalone 8cores cellserver-8c "$cp8" "$1" "$2" "$r" "${THR[@]}"
    done
  done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; sleep 0.5; PIDS=()
fi

start_group() { # config flags... ; sets LP (leader port)
  local cfg=$1; shift
  local -a P R C=("$NODE1" "$NODE2" "$NODE3")
  for i in 0 1 2; do np; P[$i]=$port; np; R[$i]=$port; done
  for i in 0 1 2; do
    local extra=(--join "127.0.0.1:${P[0]}"); [ $i = 0 ] && extra=(--bootstrap)
    mkdir -p "$W/$cfg-n$i"
    pin "${C[$i]}" "$B/cellserver" --bind 127.0.0.1 --port "${P[$i]}" --node-id "n$i" --raft-addr "127.0.0.1:${R[$i]}" \
      --dir "$W/$cfg-n$i" --loglevel warning "${extra[@]}" "$@" >"$W/$cfg-n$i.log" 2>&1 &
    PIDS+=($!)
    [ $i = 0 ] && { wait_ping "${P[0]}" || log "$cfg n0 did not start: $(tail -3 "$W/$cfg-n0.log")"; }
  done
  wait_ping "${P[1]}"; wait_ping "${P[2]}"
  LP=""
  for _ in $(seq 100); do
    for i in 0 1 2; do rcli -p "${P[$i]}" INFO replication 2>/dev/null | tr -d '\r' | grep -qiE '^role:(master|leader)$' && LP=${P[$i]}; done
    [ -n "$LP" ] && break; sleep 0.1
  done
  # wait until a write commits with all three members
  for _ in $(seq 100); do [ "$(rcli -p "$LP" CL.THROTTLE warm 5 1 60 | head -n 1)" = 0 ] && break; sleep 0.1; done
  sleep 1
}

if [[ " $PARTS " == *" cluster "* ]]; then
  log "cluster: nodes on $NODE1 / $NODE2 / $NODE3, standalone reference on $REF, load on $GEN"
  np; sp=$port; start_cell "$REF" "$sp" "$W/ref"; wait_ping "$sp" || log "reference did not start"
  IFS=';' read -ra CFGS <<<"$CONFIGS"
  for cfg in "${CFGS[@]}"; do
    set -- $cfg; name=$1; shift
    start_group "$name" "$@"
    [ -z "$LP" ] && { log "$name: no leader"; continue; }
    log "$name: leader on $LP: $(rcli -p "$LP" CL.THROTTLE probe 15 30 60 | tr "\n" " ")"
    IFS=, read -ra CSHS <<<"$CSHAPES"
    for shape in "${CSHS[@]}"; do
      set -- $shape
      bench cluster "$name" leader "$LP" "$1" "$2" 1 "${THR[@]}"
      bench cluster "$name" standalone "$sp" "$1" "$2" 1 "${THR[@]}"
    done
    rcli -p "$LP" INFO >"$OUT/info-$name.txt" 2>&1
    for p in "${PIDS[@]:1}"; do kill "$p" 2>/dev/null; done
    sleep 1; PIDS=("${PIDS[0]}")
  done
fi
if [[ " $PARTS " == *" loops "* ]]; then
  # Event loops against cores: the default, one loop, and one loop per CPU
  # (plus half as many where that differs), each server alone on 2, 4 or 8
  # cores, against Redis SET and Redis + redis-cell pinned to the same cores.
  LGEN=${LGEN:-8-15}; LTHREADS=${LTHREADS:-8}
  LSHAPES=${LSHAPES:-"16 200,1 200"}
  log "loops: servers on 0-1 / 0-3 / 0-7, load on $LGEN with $LTHREADS threads"
  for cores in ${LCORES:-0-1 0-3 0-7}; do
    n=$(( ${cores#0-} + 1 ))
    declare -A LP=()
    np; LP[default]=$port; start_cell "$cores" "$port" "$W/l$n-def"; wait_ping "$port"
    for t in 1 $((n / 2)) "$n"; do
      [ -n "${LP[io$t]:-}" ] && continue
      np; LP[io$t]=$port; start_cell "$cores" "$port" "$W/l$n-io$t" --io-threads "$t"; wait_ping "$port"
    done
    np; lrp=$port; start_redis "$cores" "$lrp"; wait_ping "$lrp"
    lxp=""
    if [ -f "$B/libredis_cell.so" ]; then np; lxp=$port; start_redis "$cores" "$lxp" --loadmodule "$B/libredis_cell.so"; wait_ping "$lxp" || lxp=""; fi
    log "$n cores: loops of the default: $(rcli -p "${LP[default]}" INFO cpu | tr -d '\r' | grep -E '^go_max_procs' || echo '?')"
    IFS=, read -ra LSHS <<<"$LSHAPES"
    for r in $(seq "$ROUNDS"); do for sh in "${LSHS[@]}"; do set -- $sh
      for k in "${!LP[@]}"; do GEN=$LGEN GEN_THREADS=$LTHREADS bench loops "${n}cpu" "$k" "${LP[$k]}" "$1" "$2" "$r" "${THR[@]}"; done
      GEN=$LGEN GEN_THREADS=$LTHREADS bench loops "${n}cpu" redis-set "$lrp" "$1" "$2" "$r" "${SETC[@]}"
      [ -n "$lxp" ] && GEN=$LGEN GEN_THREADS=$LTHREADS bench loops "${n}cpu" redis-cell "$lxp" "$1" "$2" "$r" "${THR[@]}"
    done; done
    unset LP
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; sleep 0.5; PIDS=()
  done
fi
if [[ " $PARTS " == *" groups "* ]]; then
  # one group of 3 against two groups of 3 (one Redis Cluster), same node size
  GA=(${GA:-0-1 2-3 4-5}); GB=(${GB:-6-7 8-9 10-11}); GEN=${GGEN:-12-15}
  log "groups: a on ${GA[*]}, b on ${GB[*]}, load on $GEN"
  TAGC=(CL.THROTTLE 'key:{tag}:__rand_int__' 15 30 60)
  gstart() { # name group cores... ; sets GP (ports) and GL (leader port)
    local name=$1 grp=$2; shift 2; local -a cores=("$@"); GP=(); local -a R=()
    for i in 0 1 2; do np; GP[$i]=$port; np; R[$i]=$port; done
    for i in 0 1 2; do
      local extra=(--join "127.0.0.1:${GP[0]}"); [ $i = 0 ] && extra=(--bootstrap)
      mkdir -p "$W/$name-$i"
      pin "${cores[$i]}" "$B/cellserver" --bind 127.0.0.1 --port "${GP[$i]}" --node-id "$name$i" --group "$grp" \
        --raft-addr "127.0.0.1:${R[$i]}" --dir "$W/$name-$i" --loglevel warning "${extra[@]}" $GFLAGS >"$W/$name-$i.log" 2>&1 &
      PIDS+=($!)
      [ $i = 0 ] && wait_ping "${GP[0]}"
    done
    wait_ping "${GP[1]}"; wait_ping "${GP[2]}"
    GL=""
    for _ in $(seq 100); do
      for i in 0 1 2; do rcli -p "${GP[$i]}" INFO replication 2>/dev/null | tr -d '\r' | grep -qiE '^role:(master|leader)$' && GL=${GP[$i]}; done
      [ -n "$GL" ] && break; sleep 0.1
    done
  }
  gbench() { # config label port pipe conns round [--cluster]
    local config=$1 label=$2 p=$3 pipe=$4 conns=$5 round=$6; shift 6
    local n=$(( pipe == 1 ? 60000 : 1500000 ))
    [ -n "${GN:-}" ] && n=$GN
    local out
    out=$(pin "$GEN" "$L/ld-linux-x86-64.so.2" --library-path "$L" "$B/redis-benchmark" "$@" -h 127.0.0.1 -p "$p" -c "$conns" -P "$pipe" --threads 4 -n "$n" -r 1000000 --csv "${TAGC[@]}" 2>/dev/null | tail -n 1)
    echo "$out" | awk -F'","' -v c="$config" -v s="$label" -v sh="p${pipe}x${conns}" -v r="$round" \
      '{gsub(/"/,"",$2); gsub(/"/,"",$5); gsub(/"/,"",$7); print "groups,"c","s","sh","r","$2","$5","$7}' | tee -a "$RES"
  }
  IFS=';' read -ra GCFGS <<<"${GCONFIGS:-default}"
  for cfg in "${GCFGS[@]}"; do
    set -- $cfg; name=$1; shift; GFLAGS="$*"
    gstart "one$name" one "${GA[@]}"; L1=$GL
    for r in 1 2; do for sh in "16 200" "1 200"; do set -- $sh; gbench "$name" one-group "$L1" "$1" "$2" $r; done; done
    log "$name: one group: dbsize $(rcli -p "$L1" DBSIZE)"
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; sleep 1; PIDS=()
    gstart "a$name" a "${GA[@]}"; LA=$GL; gstart "b$name" b "${GB[@]}"; LB=$GL
    for _ in $(seq 100); do [ "$(rcli -p "$LA" CLUSTER ADDSLOTSRANGE 0 8191)" = OK ] && break; sleep 0.1; done
    for _ in $(seq 100); do [ "$(rcli -p "$LB" CLUSTER ADDSLOTSRANGE 8192 16383)" = OK ] && break; sleep 0.1; done
    rcli -p "$LA" CLUSTER MEET 127.0.0.1 "$LB" >/dev/null
    for _ in $(seq 150); do [ "$(rcli -p "$LA" CLUSTER INFO | tr -d '\r' | sed -n 's/^cluster_state://p')" = ok ] && [ "$(rcli -p "$LB" CLUSTER INFO | tr -d '\r' | sed -n 's/^cluster_state://p')" = ok ] && break; sleep 0.1; done
    log "$name: two groups, leaders $LA $LB: $(rcli -p "$LA" CLUSTER INFO | tr -d '\r' | head -n 1)"
    for r in 1 2; do for sh in "16 200" "1 200"; do set -- $sh; gbench "$name" two-groups "$LA" "$1" "$2" $r --cluster; done; done
    log "$name: two groups: dbsize a $(rcli -p "$LA" DBSIZE) b $(rcli -p "$LB" DBSIZE)"
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; sleep 1; PIDS=()
  done
fi
log "done"
echo "== summary (median rps by part,config,server,shape)"
python3 - "$RES" <<'PY' | tee "$OUT/summary.csv"
import csv, sys, statistics
rows = {}
for r in csv.DictReader(open(sys.argv[1])):
    try: rows.setdefault((r["part"], r["config"], r["server"], r["shape"]), []).append((float(r["rps"]), r["p50_ms"], r["p99_ms"]))
    except ValueError: pass
for k in sorted(rows):
    v = sorted(rows[k]); m = v[(len(v) - 1) // 2]
    print(",".join(k) + ",%d,%s,%s" % (m[0], m[1], m[2]))
PY
