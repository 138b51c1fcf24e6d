#!/bin/sh
# Guest hook (issue 19): the scaling curve of one cache sharded over 1, 2 and 4 devices
# (docs/scaling.md). Makes 4 devices of each kind: memory-backed null_blk instances through
# configfs ("nullb"), null_blk instances that complete each request after 10 ms, one at a
# time, so slower than the CPU ("nullb-slow"), and loop devices over tmpfs files with direct
# I/O where the kernel accepts it ("loop"); runs `rbctl bench` over 1, 2 and 4 of each kind
# for a fixed short window and prints one line per point:
#   scaling: kind=nullb devices=2 workers=8 put_mib_s=.. get_mib_s=.. ops_s=.. hit_ratio=..
#            busy_cores=.. proc_cores=.. cpu_s_per_gib=.. window_s=.. busy_before=..
# after one "scaling: env ..." line (where, accelerator, cores, kernel). CPU figures are
# measured over the bench's measured window from /proc/stat (every core, busy_cores) and
# /proc/PID/stat (rbctl's own threads, proc_cores), and busy_before over the second before
# the bench (what other work keeps the cores doing; on a shared host). Exit 0 = pass, 77 = skip (no rbctl or
# no device kind available), other = fail (a bench failed or a device could not be made).
# `make scaling` (scripts/scaling.sh) runs this same file on the host with loop devices only.
# Knobs (environment): SCALING_KINDS="nullb nullb-slow loop", SCALING_COUNTS="1 2 4",
# SCALING_DURATION=4s, SCALING_DEV_MB=128, SCALING_WORKERS_PER_DEV=4,
# SCALING_SLOW_NS=10000000 (nullb-slow's time per request), SCALING_RBCTL=/bin/rbctl,
# SCALING_SHM=/dev/shm (tmpfs for the loop files), SCALING_WHERE=vm|host, SCALING_KEEP=DIR
# (keep each bench's JSON there).
set -u
RBCTL=${SCALING_RBCTL:-/bin/rbctl}
KINDS=${SCALING_KINDS:-nullb nullb-slow loop}
SLOW_NS=${SCALING_SLOW_NS:-10000000}
COUNTS=${SCALING_COUNTS:-1 2 4}
DURATION=${SCALING_DURATION:-4s}
DEV_MB=${SCALING_DEV_MB:-128}
WPD=${SCALING_WORKERS_PER_DEV:-4}
SHM=${SCALING_SHM:-/dev/shm}
WHERE=${SCALING_WHERE:-vm}
KEEP=${SCALING_KEEP:-}
VALUE_KIB=256
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rbscale.XXXXXX") || exit 1
NB=/sys/kernel/config/nullb
say() { echo "scaling hook: $*"; }
rc=0
made_nullb= made_loop= made_files=

teardown() {
	for d in $made_loop; do $LOSETUP -d "$d" 2>/dev/null; done
	for f in $made_files; do rm -f "$f"; done
	for n in $made_nullb; do
		echo 0 >"$NB/$n/power" 2>/dev/null
		rmdir "$NB/$n" 2>/dev/null
	done
	made_nullb= made_loop= made_files=
}
trap 'teardown; rm -rf "$WORK"' EXIT

if [ ! -x "$RBCTL" ]; then
	say "$RBCTL absent"
	exit 77
fi

# --- environment -----------------------------------------------------------------------------
ncpu=$(grep -c ^processor /proc/cpuinfo)
hyp=$(dmesg 2>/dev/null | sed -n 's/.*Hypervisor detected: *\([A-Za-z]*\).*/\1/p' | head -1)
if [ "$WHERE" = vm ]; then
	# A QEMU guest under KVM is told so by CPUID and the kernel logs it; under TCG it is not.
	case $hyp in KVM) accel=kvm ;; *) accel=tcg ;; esac
else
	accel=host
fi
mem=$(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo)
read -r load1 _ </proc/loadavg
echo "scaling: env where=$WHERE accel=$accel cores=$ncpu kernel=$(uname -r) mem_mib=$mem hypervisor=${hyp:-none} load1=$load1 date=$(date -u +%Y-%m-%dT%H:%M:%SZ) duration=$DURATION dev_mib=$DEV_MB value_kib=$VALUE_KIB workers_per_dev=$WPD"

# Several positional devices are one cache sharded over them (issue 19); an older build takes
# one DEV only, so only the one-device points can be measured.
multi=1
"$RBCTL" bench --help 2>&1 | grep -q 'bench DEV \[DEV' || multi=0
if [ $multi = 0 ]; then
	say "note: this rbctl's bench takes one DEV; only the 1-device points are measured"
	COUNTS=1
fi
max=0
for c in $COUNTS; do [ "$c" -gt "$max" ] && max=$c; done
# The devices of one kind live in memory (null_blk pages, tmpfs files) while it is measured.
avail=$(awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo)
need=$((max * DEV_MB + 256))
if [ "$avail" -lt "$need" ]; then
	say "only $avail MiB available, $need MiB needed for $max devices of $DEV_MB MiB and rbctl: not measured"
	exit 77
fi

# util-linux losetup (--show, --direct-io) by path: the guest's busybox ash runs its own
# applets before PATH.
LOSETUP=
for p in /usr/sbin/losetup /sbin/losetup /usr/bin/losetup; do
	[ -x "$p" ] && "$p" --version 2>&1 | grep -q util-linux && LOSETUP=$p && break
done

# --- devices -----------------------------------------------------------------------------------
# make_nullb I [SLOW]: a memory-backed null_blk with discard through configfs; sets DEV to its
# path. (Not called in a subshell: made_* must record what to tear down.) With SLOW 1 the device
# completes each request after SLOW_NS by timer, one request at a time: a device slower than
# the CPU (at most 256 KiB / 10 ms = 25 MiB/s, less with the engine's own writes), so that
# the curve can rise until the cores saturate. (null_blk's mbps limit would also charge the
# bench's whole-device trim.)
make_nullb() {
	n=rbscale$1 d=$NB/rbscale$1 slow=${2:-0}
	mkdir "$d" || return 1
	made_nullb="$made_nullb $n"
	echo "$DEV_MB" >"$d/size" && echo 4096 >"$d/blocksize" && echo 1 >"$d/memory_backed" &&
		echo 1 >"$d/discard" || return 1
	if [ "$slow" = 1 ]; then
		echo 2 >"$d/irqmode" && echo "$SLOW_NS" >"$d/completion_nsec" && echo 1 >"$d/hw_queue_depth" &&
			echo 1 >"$d/submit_queues" || return 1
	fi
	echo 1 >"$d/power" || return 1
	idx=$(cat "$d/index")
	for _ in $(seq 1 50); do
		for p in "/dev/nullb$idx" "/dev/$n"; do
			[ -b "$p" ] && DEV=$p && return 0
		done
		sleep 0.1
	done
	return 1
}
make_nullb_slow() { make_nullb "$1" 1; }
# make_loop I: a loop device over a tmpfs file, with direct I/O if the kernel accepts it; sets DEV.
make_loop() {
	f=$SHM/rbscale-$$-$1.img
	dd if=/dev/zero of="$f" bs=1M count=0 seek="$DEV_MB" 2>"$WORK/err" || {
		say "dd $f: $(cat "$WORK/err")"
		return 1
	}
	made_files="$made_files $f"
	l=$($LOSETUP -f --show --direct-io=on "$f" 2>"$WORK/err") || l=$($LOSETUP -f --show "$f" 2>>"$WORK/err") || {
		say "$LOSETUP -f --show $f: $(cat "$WORK/err")"
		return 1
	}
	made_loop="$made_loop $l"
	DEV=$l
}

# json_first FILE KEY: the first numeric value of "KEY" (the report's run-level totals come
# before its per-op latency, tenant and timeline entries).
json_first() { tr ',{}[]' '\n\n\n\n\n' <"$1" | sed -n "s/^ *\"$2\" *: *\([0-9.eE+-]*\) *$/\1/p" | head -1; }

# sample PID FILE: append "uptime_cs busy_ticks total_ticks pid_ticks" while PID runs; false
# once it has exited (state Z) or is gone.
sample() {
	sfile=$2
	read -r up _ </proc/uptime || return 1
	read -r pl 2>/dev/null <"/proc/$1/stat" || return 1
	set -f
	# shellcheck disable=SC2086 # split the stat lines into fields
	set -- $pl
	set +f
	[ "$3" = Z ] && return 1
	pt=$((${14} + ${15}))
	read -r _ c_us c_ni c_sy c_id c_io c_irq c_sirq c_st _ </proc/stat
	echo "${up%.*}${up#*.} $((c_us + c_ni + c_sy + c_irq + c_sirq)) $((c_us + c_ni + c_sy + c_id + c_io + c_irq + c_sirq + c_st)) $pt" >>"$sfile"
}

# point KIND DEV...: one bench over the devices, one "scaling:" line.
point() {
	kind=$1
	shift
	nd=$#
	workers=$((WPD * nd))
	# One key space for every point (3/4 of one device's slots: every key stays resident), so
	# that the points differ only in the devices the cache is sharded over.
	keys=$((DEV_MB * 1024 / VALUE_KIB * 3 / 4))
	out=$WORK/$kind-$nd.json err=$WORK/$kind-$nd.err smp=$WORK/$kind-$nd.samples
	# The second before: what the cores do without the bench (other users, on a shared host).
	: >"$smp.before"
	sample $$ "$smp.before"
	sleep 1
	sample $$ "$smp.before"
	before=$(awk -v n="$ncpu" '{ b[NR] = $2; t[NR] = $3 } END { d = t[2] - t[1]; printf "%.2f", (d > 0 ? n * (b[2] - b[1]) / d : 0) }' "$smp.before")
	: >"$smp"
	"$RBCTL" bench "$@" --force --quiet --json --placement none --workload uniform \
		--value-size ${VALUE_KIB}K --keys $keys --read-frac 0.5 --workers $workers \
		--queue-depth 32 --io-engine uring --warmup 0 --duration "$DURATION" >"$out" 2>"$err" </dev/null &
	pid=$!
	while sample $pid "$smp"; do sleep 0.2; done
	wait $pid
	brc=$?
	[ -n "$KEEP" ] && mkdir -p "$KEEP" && cp "$out" "$KEEP/$WHERE-$kind-$nd.json"
	if [ $brc != 0 ]; then
		say "FAIL: rbctl bench $* exited $brc: $(tail -n 3 "$err" | tr '\n' ' ')"
		rc=1
		return
	fi
	el=$(json_first "$out" elapsed_seconds)
	rb=$(json_first "$out" read_bytes)
	wb=$(json_first "$out" written_bytes)
	ops=$(json_first "$out" ops_per_sec)
	hit=$(json_first "$out" hit_ratio)
	if [ -z "$el" ] || [ -z "$rb" ] || [ -z "$wb" ] || [ -z "$ops" ]; then
		say "FAIL: rbctl bench $*: no run totals in its JSON report: $(head -c 300 "$out")"
		rc=1
		return
	fi
	# The window is the last $el seconds before exit: from the last sample at or before its
	# start to the last sample taken while rbctl ran.
	line=$(awk -v el="$el" -v n="$ncpu" -v rb="$rb" -v wb="$wb" -v ops="$ops" -v hit="${hit:-0}" \
		-v kind="$kind" -v nd="$nd" -v w="$workers" -v before="$before" '
		{ t[NR] = $1; b[NR] = $2; tt[NR] = $3; p[NR] = $4 }
		END {
			if (NR < 2) { print "too few CPU samples (" NR ")"; exit 1 }
			a = 1
			for (i = 1; i <= NR; i++) if (t[i] <= t[NR] - el * 100) a = i
			if (a == NR) a = NR - 1
			dt = tt[NR] - tt[a]
			if (dt <= 0) { print "no CPU ticks between samples"; exit 1 }
			busy = n * (b[NR] - b[a]) / dt; proc = n * (p[NR] - p[a]) / dt
			put = wb / el / 1048576; get = rb / el / 1048576
			per = (put + get > 0) ? busy / ((put + get) / 1024) : 0
			printf "scaling: kind=%s devices=%d workers=%d put_mib_s=%.1f get_mib_s=%.1f ops_s=%.1f hit_ratio=%.3f busy_cores=%.2f proc_cores=%.2f cpu_s_per_gib=%.3f window_s=%.2f busy_before=%s\n",
				kind, nd, w, put, get, ops, hit, busy, proc, per, (t[NR] - t[a]) / 100, before
		}' "$smp") || {
		say "FAIL: $kind x$nd: $line"
		rc=1
		return
	}
	echo "$line"
}

# run_kind KIND: make $max devices of KIND, measure every count, tear them down.
run_kind() {
	kind=$1 devs=
	i=0
	while [ $i -lt "$max" ]; do
		DEV=
		make_$(echo "$kind" | tr - _) $i || {
			say "FAIL: could not make $kind device $i"
			rc=1
			teardown
			return
		}
		devs="$devs $DEV"
		i=$((i + 1))
	done
	desc=
	for d in $devs; do
		case $kind in
		loop) desc="$desc $d(dio=$(cat /sys/block/${d#/dev/}/loop/dio 2>/dev/null || echo ?))" ;;
		*) desc="$desc $d" ;;
		esac
	done
	say "$kind devices, $DEV_MB MiB each:$desc"
	for c in $COUNTS; do
		# shellcheck disable=SC2086 # the first $c devices, as words
		set -- $devs
		sel=
		j=0
		for d in "$@"; do
			[ $j -lt "$c" ] && sel="$sel $d"
			j=$((j + 1))
		done
		# shellcheck disable=SC2086
		point "$kind" $sel
	done
	teardown
}

ran=0
for kind in $KINDS; do
	case $kind in
	nullb | nullb-slow)
		if [ ! -d $NB ]; then
			say "note: $NB absent (null_blk not loaded or configfs not mounted): no nullb points"
			continue
		fi
		;;
	loop)
		if [ -z "$LOSETUP" ] || [ ! -d "$SHM" ]; then
			say "note: util-linux losetup or $SHM absent: no loop points"
			continue
		fi
		;;
	*)
		say "FAIL: unknown kind '$kind' (want nullb, nullb-slow or loop)"
		rc=1
		continue
		;;
	esac
	run_kind "$kind"
	ran=$((ran + 1))
done
[ $ran = 0 ] && [ $rc = 0 ] && exit 77
exit $rc
