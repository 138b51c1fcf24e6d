# shellcheck shell=bash
# Sourced by resp-bench.sh and resp-ab.sh (". scripts/resp-lib.sh NAME"): $dir, a scratch
# directory under $BENCH_DIR (default /var/tmp) named after NAME and removed on exit, after
# the processes whose ids the caller appends to pids are interrupted; free_port, a port free
# on 127.0.0.1 now; wait_port PORT, which waits up to 10 s for a listener there.
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/rbctl-$1.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
	for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done
}
