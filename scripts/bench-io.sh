#!/usr/bin/env bash
# make bench-io: fio (ioengine=io_uring, O_DIRECT) against rbctl's io_uring engine path on the
# SAME pre-allocated file, same block size and queue depth, for writes and reads, at 1 MiB
# and 64 KiB, QD 32. Each case runs BENCH_ROUNDS rounds; a round runs fio (default job and
# --fixedbufs --registerfiles), the rbctl device path and the engine once each (read cases
# also fio reading the engine's payload transfers), in the order of a balanced (Williams)
# design, and prints one line with every run's GB/s, CPU s/GB and mean ops in flight. Then
# one line per row with medians:
#   bench-io write bs=1MiB qd=32 fio=X.XX GB/s rbctl=Y.YY GB/s ratio_vs_fio=Z.ZZ median_ci92=A-B (rounds: ...)
# ratio_vs_fio is the median of the rounds' paired ratios (rbctl ÷ the reference fio job's
# run of the same round), median_ciNN its distribution-free confidence interval. The engine
# rows engine-put / engine-get (engine.PutMany / LoadManyInto on the same file, slot_bytes =
# bs, DeallocateOnDelete on, load buffers registered with RegisterMemory) follow each device
# row; engine-put is compared with fio-replay (fio writing the engine's recorded offsets,
# lengths and flushes) and rbctl-replay (rbctl's device path writing the same). Every run
# starts on a settled disk (the file flushed first), idle for as long as fio's start-up
# keeps it before fio's first I/O (-lead). Every run also reports what reached
# the disk (requests, merges per MiB, flushes and their time). Every
# row has a detail line. A summary line ends the run; a line on the machine (load, hand-off
# latency: internal/handoff) comes before the first run and after the summary.
# docs/io_uring.md explains it.
# Knobs (environment): BENCH_DIR (default /var/tmp), BENCH_SIZE (2G), BENCH_RUNTIME (1s per
# run), BENCH_RAMP (0.3s), BENCH_QD (32), BENCH_BS (1M,64K), BENCH_ROUNDS (8), BENCH_KEEP=1 to
# keep the file, BENCH_ARGS for extra benchio flags (-submitters, -batch (engine rows, keys per
# call, 64), -device-batch (device row, default qd/submitters: its buffers total qd x bs, as
# fio's), -rings, -fixed,
# -engine=false to skip the engine rows, -engine-deallocate all|none (default devices: not a file), -engine-register=false,
# -engine-vectored=false (puts copy each payload behind its header instead of zero-copy),
# -tools LIST, -gap DURATION, -lead fio|DURATION (idle before an in-process run's first I/O;
# fio: as long as fio's own start-up), -cpuprofile FILE, -fio-mem auto|shmhuge|malloc,
# -ring aio -fio-ioengine libaio: rbctl's native AIO engine against fio's libaio).
# Buffers: rbctl's come from huge pages (blockdev.Alloc), so fio gets huge pages too
# (--mem=shmhuge): as root the script reserves the few fio needs in /proc/sys/vm/nr_hugepages
# and gives them back at exit (BENCH_HUGEPAGES=0: do not; then both sides use 4 KiB pages).
# Default run: about 10 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BENCH_DIR:-/var/tmp}
size=${BENCH_SIZE:-2G}
file="$dir/rbctl-bench-io.$$.dat"

command -v fio >/dev/null 2>&1 || bash scripts/setup.sh
command -v fio >/dev/null 2>&1 || { echo "bench-io: fio is not installed (run scripts/setup.sh as root)" >&2; exit 1; }

hp_old=""
cleanup() {
    [ "${BENCH_KEEP:-0}" = 1 ] || rm -f "$file"
    if [ -n "$hp_old" ]; then echo "$hp_old" > /proc/sys/vm/nr_hugepages || true; fi
}
trap cleanup EXIT

# Huge pages for fio's buffers: qd x the largest block size, rounded up to 2 MiB pages, + 2
# (fio-3.33 needs 18 at QD 32 and 1 MiB; benchio's fioBufferHugePages).
bytes() { numfmt --from=iec "${1%B}"; }
maxbs=0
IFS=, read -ra sizes <<< "${BENCH_BS:-1M,64K}"
for b in "${sizes[@]}"; do n=$(bytes "$b"); [ "$n" -gt "$maxbs" ] && maxbs=$n; done
hp_need=$(( (${BENCH_QD:-32} * maxbs + 2097151) / 2097152 + 2 ))
hp_free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
if [ "${BENCH_HUGEPAGES:-1}" = 1 ] && [ "${hp_free:-0}" -lt "$hp_need" ] && [ -w /proc/sys/vm/nr_hugepages ]; then
    hp_old=$(cat /proc/sys/vm/nr_hugepages)
    echo $(( hp_old + hp_need - ${hp_free:-0} )) > /proc/sys/vm/nr_hugepages
    echo "bench-io: reserved huge pages for fio's buffers (nr_hugepages $hp_old -> $(cat /proc/sys/vm/nr_hugepages); restored at exit)" >&2
fi
fio_mem=shmhuge
[ "$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)" -ge "$hp_need" ] || fio_mem=malloc
[ "${BENCH_HUGEPAGES:-1}" = 1 ] || fio_mem=malloc

mkdir -p "$dir"
echo "bench-io: preparing $size in $file (fallocate, then one sequential O_DIRECT fill so reads hit written blocks)" >&2
fallocate -l "$size" "$file"
fio --name=fill --filename="$file" --ioengine=io_uring --direct=1 --rw=write --bs=1M --iodepth=32 \
    --size="$size" --output=/dev/null

go build -o bin/benchio ./tools/benchio
# shellcheck disable=SC2086
bin/benchio -file "$file" -qd "${BENCH_QD:-32}" -bs "${BENCH_BS:-1M,64K}" \
    -runtime "${BENCH_RUNTIME:-1s}" -ramp "${BENCH_RAMP:-0.3s}" -rounds "${BENCH_ROUNDS:-8}" -fio-mem "$fio_mem" ${BENCH_ARGS:-}
