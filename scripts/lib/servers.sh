# Shared by the cluster benchmark scripts (sourced, not run): a work
# directory, the servers started in it and their cleanup, and polling.
#
# Before sourcing, set PROG (the script's name, for messages). Servers the
# script starts append their pid to pids and their name to names, and write
# their stderr to $work/NAME.log.

die() {
	echo "$PROG: $*" >&2
	exit 1
}

work=$(mktemp -d)
pids=() names=()

# cleanup stops every server (SIGTERM, then SIGKILL after 5 s) and removes
# the work directory.
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for _ in $(seq 50); do
		local alive=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		((alive)) || break
		sleep 0.1
	done
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# fail stops the script with a message and every server's log tail.
fail() {
	echo "$PROG: $*" >&2
	local i
	for i in "${!names[@]}"; do
		echo "--- ${names[$i]} (pid ${pids[$i]}$(kill -0 "${pids[$i]}" 2>/dev/null || echo ', exited')), log tail:" >&2
		tail -n 20 "$work/${names[$i]}.log" >&2 || true
	done
	exit 1
}

# wait_for DESCRIPTION SECONDS COMMAND...: poll COMMAND until it succeeds,
# failing when a server has exited or the deadline passes.
wait_for() {
	local what=$1 end=$((SECONDS + $2)) p
	shift 2
	while ((SECONDS < end)); do
		"$@" >/dev/null 2>&1 && return 0
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null || fail "a server exited while waiting for $what"
		done
		sleep 0.1
	done
	fail "timed out waiting for $what"
}

# port prints a free TCP port of the loopback interface.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
