#!/usr/bin/env bash
# How fast does a 3-node cluster (fsync on) decide CL.THROTTLE through its
# leader, compared with one standalone server on the same machine?
#
# Starts three cluster nodes and one standalone server on loopback, runs the
# load generator against the leader and the standalone server in interleaved
# rounds (50 connections x pipeline 16 over 100k keys by default), prints the
# medians and the ratio, then the leader's group-commit figures (operations
# per raft entry, mean commit latency). Extra arguments go to the load
# generator (e.g. -d 10s -rounds 5).
set -euo pipefail
NODE_FLAGS=${NODE_FLAGS:-} # extra flags for the cluster nodes, e.g. "--raft-max-inflight 4"
NODE_ENV=${NODE_ENV:-}     # environment for the cluster nodes, e.g. "GOMAXPROCS=1"
cd "$(dirname "$0")/.."

work=$(mktemp -d)
mkdir -p "$work/n1" "$work/n2" "$work/n3" "$work/standalone"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/cellserver" ./cmd/cellserver
go build -o "$work/bench" ./bench

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ping() {
	for _ in $(seq 100); do
		redis-cli -p "$1" PING >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "no answer on port $1" >&2
	return 1
}

p1=$(port) p2=$(port) p3=$(port) ps=$(port)
env $NODE_ENV "$work/cellserver" --port "$p1" --dir "$work/n1" --node-id n1 --raft-addr "127.0.0.1:$(port)" --bootstrap yes --loglevel warning $NODE_FLAGS &
pids+=($!)
wait_ping "$p1"
until redis-cli -p "$p1" RAFT.INFO | grep -q 'raft_ready:1'; do sleep 0.1; done
env $NODE_ENV "$work/cellserver" --port "$p2" --dir "$work/n2" --node-id n2 --raft-addr "127.0.0.1:$(port)" --join "127.0.0.1:$p1" --loglevel warning $NODE_FLAGS &
pids+=($!)
env $NODE_ENV "$work/cellserver" --port "$p3" --dir "$work/n3" --node-id n3 --raft-addr "127.0.0.1:$(port)" --join "127.0.0.1:$p1" --loglevel warning $NODE_FLAGS &
pids+=($!)
"$work/cellserver" --port "$ps" --dir "$work/standalone" --loglevel warning &
pids+=($!)
wait_ping "$p2"
wait_ping "$p3"
wait_ping "$ps"
until redis-cli -p "$p1" RAFT.INFO | grep -q 'raft_members:3'; do sleep 0.1; done

echo "A = 3-node cluster leader (127.0.0.1:$p1), B = standalone (127.0.0.1:$ps)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$work/bench" -addr "127.0.0.1:$p1" -compare "127.0.0.1:$ps" \
	-cmd 'CL.THROTTLE {key} 15 30 60 1' -c 50 -P 16 -keys 100000 \
	-d 5s -warmup 1s -rounds 3 -q "$@"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
redis-cli -p "$p1" RAFT.INFO | grep -E 'raft_(entries_submitted|ops_submitted|ops_per_entry|mean_commit_latency_us)'
