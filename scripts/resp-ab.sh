#!/usr/bin/env bash
# make bench-resp-ab: two `rbctl serve --resp` against each other, A measured and B its
# reference, driven by tools/respbench with the same traffic as make bench-resp (rounds
# alternating which server goes first), each on its own cache file in $BENCH_DIR (default
# /var/tmp), so that "ratio A/B" is one configuration's rate over the other's on the same
# disk in the same run. For comparing builds or flags where valkey's own spread would hide
# the difference (docs/resp.md, "Native AIO"). Measures, does not assert.
# Knobs: BENCH_A_ARGS, BENCH_B_ARGS (more `rbctl serve` flags for each, e.g. BENCH_B_ARGS=
# "--io-engine aio"), BENCH_A_ENV, BENCH_B_ENV (environment for each serve, e.g.
# BENCH_A_ENV="GOMAXPROCS=1"), BENCH_A_RBCTL, BENCH_B_RBCTL (binaries, default this tree's build),
# BENCH_A_NAME, BENCH_B_NAME (default A and B), BENCH_DIR, BENCH_BYTES (default 512 MiB),
# BENCH_ROUNDS (5), BENCH_ROWS (16x4,8x1), BENCH_SIZES (256K,1M).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/resp-lib.sh resp-ab
env_words a_env BENCH_A_ENV
env_words b_env BENCH_B_ENV
go build -o "$dir/rbctl" ./cmd/rbctl
go build -o "$dir/respbench" ./tools/respbench
a_bin=${BENCH_A_RBCTL:-$dir/rbctl}
b_bin=${BENCH_B_RBCTL:-$dir/rbctl}
bytes=${BENCH_BYTES:-536870912}
# A slot (1 MiB + 4 KiB) per value of one round at the smallest size (as make bench-resp),
# each file written whole first so that neither side reads holes.
size=$(((bytes / 262144 + 256) * 1052672))
for x in a b; do
	dd if=/dev/zero of="$dir/$x.img" bs=1052672 count=$((size / 1052672)) oflag=direct status=none
done
"$a_bin" format --slot-bytes 1028K "$dir/a.img" >/dev/null
"$b_bin" format --slot-bytes 1028K "$dir/b.img" >/dev/null
ra=$(free_port); rb=$(free_port); ca=$(free_port); cb=$(free_port)
env "${a_env[@]}" "$a_bin" serve "$dir/a.img" --listen "127.0.0.1:$ca" --cluster none --resp "127.0.0.1:$ra" ${BENCH_A_ARGS:-} >"$dir/a.log" 2>&1 &
pids+=($!); apid=$!
env "${b_env[@]}" "$b_bin" serve "$dir/b.img" --listen "127.0.0.1:$cb" --cluster none --resp "127.0.0.1:$rb" ${BENCH_B_ARGS:-} >"$dir/b.log" 2>&1 &
pids+=($!); bpid=$!
wait_serving "A (rbctl serve)" "$ra" "$apid" "$dir/a.log"
wait_serving "B (rbctl serve)" "$rb" "$bpid" "$dir/b.log"
an=${BENCH_A_NAME:-A}; bn=${BENCH_B_NAME:-B}
echo "bench-resp-ab: $an = ${BENCH_A_RBCTL:-this tree} serve ${BENCH_A_ARGS:-(defaults)} ${BENCH_A_ENV:+(env $BENCH_A_ENV) }(I/O engine $(io_engine "$dir/a.log")); $bn = ${BENCH_B_RBCTL:-this tree} serve ${BENCH_B_ARGS:-(defaults)} ${BENCH_B_ENV:+(env $BENCH_B_ENV) }(I/O engine $(io_engine "$dir/b.log")); load $(cut -d' ' -f1-3 /proc/loadavg)"
"$dir/respbench" -addr "127.0.0.1:$ra" -pid "$apid" -name "$an" -ref "127.0.0.1:$rb" -ref-pid "$bpid" -ref-name "$bn" \
	-bytes "$bytes" -rounds "${BENCH_ROUNDS:-5}" -sizes "${BENCH_SIZES:-256K,1M}" -rows "${BENCH_ROWS:-16x4,8x1}"
echo "bench-resp-ab: done; load $(cut -d' ' -f1-3 /proc/loadavg)"
