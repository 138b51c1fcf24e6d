#!/usr/bin/env bash
# make bench-resp: rbctl serve --resp against valkey-server (in memory: --save '' --appendonly
# no) on this machine in the same run, 256 KiB and 1 MiB values, two client patterns
# (tools/respbench): 16 clients with 4 requests in flight each, and LMCache's own client (8
# connections, one command in flight each, distinct keys); per-request latency percentiles
# for both servers. rbctl's cache is a file in $BENCH_DIR (default /var/tmp) opened with
# O_DIRECT through serve's default engine (native AIO for a file); valkey keeps everything
# in RAM. Measures, does not assert.
# Knobs: BENCH_DIR, BENCH_BYTES (per size, row, round and server; default 1 GiB),
# BENCH_ROUNDS (3), BENCH_CLIENTS (16), BENCH_PIPELINE (4), BENCH_ROWS (default
# "${BENCH_CLIENTS}x${BENCH_PIPELINE},8x1"), BENCH_SIZES (256K,1M), BENCH_RBCTL (an rbctl
# binary to measure instead of this tree's, e.g. an older commit's build), BENCH_SERVE_ARGS
# (more `rbctl serve` flags, e.g. "--io-engine posix"), BENCH_SERVE_ENV (environment for
# rbctl serve alone, e.g. "GOMAXPROCS=1": docs/resp.md, "The machine's hand-off latency").
# With fio installed, every round also
# measures the disk's own rate for the GET pattern (fio random reads on the cache file at the
# row's depth: the "rbctl/disk" line; and in the clients' own pattern, one fio job per client
# at the row's pipeline depth: the "disk-jobs" line, with disk-jobs/valkey), since valkey
# answers from RAM and rbctl from the disk; and the disk's own rate for the SET pattern (fio
# random writes, one job per client at its pipeline depth, to a scratch file beside the cache:
# the "disk-write-jobs" line), since rbctl answers a SET once its value is on the disk.
set -euo pipefail
cd "$(dirname "$0")/.."
VALKEY=$(command -v valkey-server || command -v redis-server || true)
if [ -z "$VALKEY" ]; then
	echo "bench-resp: needs valkey-server (Debian bookworm-backports: apt-get install -t bookworm-backports valkey-server)" >&2
	exit 1
fi
. scripts/resp-lib.sh resp-bench
env_words serve_env BENCH_SERVE_ENV
if [ -n "${BENCH_RBCTL:-}" ]; then cp "$BENCH_RBCTL" "$dir/rbctl"; else go build -o "$dir/rbctl" ./cmd/rbctl; fi
go build -o "$dir/respbench" ./tools/respbench
bytes=${BENCH_BYTES:-1073741824}
# A slot (1 MiB + 4 KiB) per value of one round at the smallest size (256 KiB), so that a GET
# never finds its chunk evicted. With fio here the file is written whole first, so that fio's
# reads of it (the disk row) meet written blocks, not holes; without, a sparse file.
size=$(((bytes / 262144 + 256) * 1052672))
disk_args=()
if command -v fio >/dev/null; then
	dd if=/dev/zero of="$dir/cache.img" bs=1052672 count=$((size / 1052672)) oflag=direct status=none
	"$dir/rbctl" format --slot-bytes 1028K "$dir/cache.img" >/dev/null
	# The SET rows' disk reference writes here (the cache file is rbctl's while it serves).
	dd if=/dev/zero of="$dir/scratch.img" bs=1052672 count=$((bytes / 1052672 + 1)) oflag=direct status=none
	disk_args=(-disk-file "$dir/cache.img" -disk-scratch "$dir/scratch.img")
else
	"$dir/rbctl" format --create "$size" --slot-bytes 1028K "$dir/cache.img" >/dev/null
fi
rp=$(free_port); vp=$(free_port); cp=$(free_port)
env "${serve_env[@]}" "$dir/rbctl" serve "$dir/cache.img" --listen "127.0.0.1:$cp" --cluster none --resp "127.0.0.1:$rp" ${BENCH_SERVE_ARGS:-} >"$dir/serve.log" 2>&1 &
pids+=($!); rpid=$!
"$VALKEY" --port "$vp" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --proto-max-bulk-len 2mb >"$dir/valkey.log" 2>&1 &
pids+=($!); vpid=$!
wait_serving "rbctl serve" "$rp" "$rpid" "$dir/serve.log"
wait_serving valkey "$vp" "$vpid" "$dir/valkey.log"
echo "bench-resp: rbctl ${BENCH_RBCTL:-$(git describe --always --dirty 2>/dev/null)} serve --resp ${BENCH_SERVE_ARGS:+$BENCH_SERVE_ARGS }${BENCH_SERVE_ENV:+(env $BENCH_SERVE_ENV) }on $dir/cache.img (I/O engine $(io_engine "$dir/serve.log")) vs $("$VALKEY" --version | head -1)"
"$dir/respbench" -addr "127.0.0.1:$rp" -pid "$rpid" -ref "127.0.0.1:$vp" -ref-pid "$vpid" \
	-bytes "$bytes" -rounds "${BENCH_ROUNDS:-3}" \
	-sizes "${BENCH_SIZES:-256K,1M}" -rows "${BENCH_ROWS:-${BENCH_CLIENTS:-16}x${BENCH_PIPELINE:-4},8x1}" \
	${disk_args[@]+"${disk_args[@]}"}
