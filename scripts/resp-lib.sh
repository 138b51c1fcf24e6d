# shellcheck shell=bash
# Sourced by resp-bench.sh and resp-ab.sh (". scripts/resp-lib.sh NAME"): $dir, a scratch
# directory under $BENCH_DIR (default /var/tmp) named after NAME and removed on exit, after
# the processes whose ids the caller appends to pids are interrupted; free_port, a port free
# on 127.0.0.1 now; wait_serving NAME PORT PID LOG, which waits up to 10 s for the server
# PID to listen on PORT and, if it exits or does not, prints its LOG and fails the script
# (a mistyped flag in BENCH_SERVE_ARGS shows serve's own error, not a refused connection);
# io_engine LOG, the I/O engine a serve's LOG says it opened its cache with; env_words ARRAY
# KNOB, which reads the environment variable KNOB into ARRAY as assignments (NAME=VALUE
# words, e.g. BENCH_SERVE_ENV="GOMAXPROCS=1") to run a serve with, and fails the script on
# any other word.
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/rbctl-$1.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_serving() {
	for _ in $(seq 100); do
		(exec 3<>/dev/tcp/127.0.0.1/"$2") 2>/dev/null && return 0
		if ! kill -0 "$3" 2>/dev/null; then
			echo "$(basename "$0"): $1 exited before it listened on port $2; its log:" >&2
			cat "$4" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "$(basename "$0"): $1 is not listening on port $2 after 10 s; its log:" >&2
	cat "$4" >&2
	exit 1
}
io_engine() { local e; e=$(grep -o 'io_engine=[a-z,]*' "$1" | head -1 | cut -d= -f2); echo "${e:-not in its log}"; }
env_words() {
	# env_words ARRAY KNOB: KNOB's value split into ARRAY at blanks, without glob expansion
	# ("X=*" stays "X=*"); each word must be NAME=VALUE, else the script fails with exit 2.
	local -n out=$1
	local w
	read -ra out <<<"${!2:-}"
	for w in "${out[@]}"; do
		if ! [[ $w =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]]; then
			echo "$(basename "$0"): $2: \"$w\" is not NAME=VALUE (want environment assignments for rbctl serve, e.g. $2=\"GOMAXPROCS=1\")" >&2
			exit 2
		fi
	done
}
