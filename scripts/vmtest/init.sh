#!/bin/busybox sh
# /init of the `make vmtest` initramfs (see docs/vmtest.md). Runs as PID 1 in the guest:
# mounts the pseudo filesystems, loads the kernel modules the host resolved, waits for the
# NVMe and null_blk devices, runs every test binary and the rbctl smoke steps, prints one
# "VMTEST PASS|FAIL|SKIP <step>" line per step and the final "RBCTL-VMTEST-RESULT: <failed
# steps>" marker the host parses, then powers off. Configuration comes from /vmtest/ files
# written by scripts/vmtest/run.sh.
/bin/busybox --install -s /bin
# Real tools copied from the host (nvme-cli, util-linux) come before busybox's applets.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp
mkdir -p /proc /sys /dev /tmp /run /root
mount -t proc proc /proc
# The host boots without `quiet` so that the kernel's first line shows early (its boot
# watchdog waits for it); from here on only errors reach the console, as under `quiet`.
echo 4 >/proc/sys/kernel/printk
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# The archive carries no /dev/console node (packing it needs no root), so the kernel started
# us without stdio: attach it now.
exec </dev/console >/dev/console 2>&1
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
. /vmtest/config

FAILS=0
STEPS=0
SKIPS=0
# now_cs: centiseconds since boot (leading zeros dropped: ash reads 085 as octal).
now_cs() {
	read -r up _ </proc/uptime
	c=${up%.*}${up#*.}
	while [ ${#c} -gt 1 ] && [ "${c#0}" != "$c" ]; do c=${c#0}; done
	echo "$c"
}
secs() { c=$1; printf '%d.%02d' $((c / 100)) $((c % 100)); }
pass() { STEPS=$((STEPS + 1)); echo "VMTEST PASS $*"; }
fail() { STEPS=$((STEPS + 1)); FAILS=$((FAILS + 1)); echo "VMTEST FAIL $*"; }
skip() { SKIPS=$((SKIPS + 1)); echo "VMTEST SKIP $*"; }

finish() {
	echo "VMTEST steps: $STEPS, failed: $FAILS, guest uptime $(secs "$(now_cs)") s"
	echo "RBCTL-VMTEST-RESULT: $FAILS"
	sync
	poweroff -f
	sleep 5
	echo o >/proc/sysrq-trigger
}

echo "VMTEST guest: kernel $(uname -r), $(grep -c ^processor /proc/cpuinfo) cpus, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB, up $(secs "$(now_cs)") s"

# --- modules: "<file> <required|optional> [params...]" in dependency order --------------
t0=$(now_cs)
mods_ok=1
while read -r file need params; do
	[ -n "$file" ] || continue
	name=$(basename "$file" .ko | tr - _)
	[ -d "/sys/module/$name" ] && continue
	# shellcheck disable=SC2086 # params are separate words by design
	if ! out=$(insmod "/lib/modules/$file" $params 2>&1); then
		if [ "$need" = required ]; then
			echo "insmod $file $params: $out"
			mods_ok=0
		else
			echo "VMTEST note: optional module $file not loaded: $out"
		fi
	fi
done </vmtest/modules
if [ $mods_ok = 1 ]; then pass "modules ($(secs $(($(now_cs) - t0))) s)"; else fail "modules"; fi

# --- /tmp: ext2 on a loop device over a tmpfs file, because t.TempDir() files must accept
# O_DIRECT and the initramfs rootfs does not. Memory is used only as files are written.
t0=$(now_cs)
mkdir -p /run
if mount -t tmpfs -o "size=${SCRATCH_MB}m" tmpfs /run &&
	dd if=/dev/zero of=/run/scratch.img bs=1M count=0 seek="$SCRATCH_MB" 2>/dev/null &&
	loopdev=$(losetup -f) && losetup "$loopdev" /run/scratch.img &&
	mke2fs -q "$loopdev" >/dev/null && mount -t ext2 "$loopdev" /tmp && chmod 1777 /tmp; then
	pass "scratch /tmp: ext2 on $loopdev, $SCRATCH_MB MiB ($(secs $(($(now_cs) - t0))) s)"
else
	fail "scratch /tmp: could not make an ext2 /tmp on a loop device"
fi

# --- devices -----------------------------------------------------------------------------
t0=$(now_cs)
missing=
for i in $(seq 1 $((DEVICE_WAIT_S * 10))); do
	missing=
	for d in $DEVICES; do [ -e "$d" ] || missing="$missing $d"; done
	[ -z "$missing" ] && break
	sleep 0.1
done
if [ -z "$missing" ]; then
	pass "devices $DEVICES ($(secs $(($(now_cs) - t0))) s)"
else
	fail "devices: missing$missing after ${DEVICE_WAIT_S} s"
	ls -l /dev | grep -E 'nvme|ng|null' || true
fi

# Loopback for NVMe/TCP work (kernel target or rbctl's own), and configfs for nvmet.
ip link set lo up 2>/dev/null
[ -d /sys/kernel/config ] && mount -t configfs configfs /sys/kernel/config 2>/dev/null

export RBCTL_TEST_NVME_CTRL RBCTL_TEST_NVME_NS RBCTL_TEST_NVME_BLK RBCTL_TEST_NULLB
export RBCTL_TEST_NVME_SERIAL RBCTL_TEST_NVME_SIZE RBCTL_TEST_IN_VM=1
export RBCTL_TEST_FDP RBCTL_TEST_FDP_NRG RBCTL_TEST_FDP_NRUH RBCTL_TEST_FDP_RUNS
[ -n "${RBCTL_TEST_FIO:-}" ] && export RBCTL_TEST_FIO
[ -n "${RBCTL_TEST_NVME_CLI_NEW:-}" ] && export RBCTL_TEST_NVME_CLI_NEW
[ -x /bin/rbctl ] && export RBCTL_TEST_RBCTL=/bin/rbctl
streams=$(cat /sys/block/nvme0n1/queue/max_write_streams 2>/dev/null || echo "absent (kernel < 6.16)")
echo "VMTEST guest: boot $BOOT; FDP $RBCTL_TEST_FDP (nrg $RBCTL_TEST_FDP_NRG, nruh $RBCTL_TEST_FDP_NRUH); nvme0n1 max_write_streams: $streams"

# --- Go test binaries: "test <scenario> <binary> <package dir> <-test.run regex or '-'>" ----
run_tests() {
	want=$1
	while read -r kind sc bin dir re <&3; do
		[ "$kind" = test ] && [ "$sc" = "$want" ] || continue
		set -- -test.v -test.short -test.timeout "${TEST_TIMEOUT_S}s"
		[ "$re" != - ] && set -- "$@" -test.run "$re"
		echo "=== VMTEST RUN $bin ($dir) $*"
		t0=$(now_cs)
		mkdir -p "/src/$dir"
		(cd "/src/$dir" && "/tests/$bin" "$@" </dev/null; echo $? >/tmp/rc) 2>&1 | tee "/tmp/$bin.log"
		rc=$(cat /tmp/rc)
		np=$(grep -c -- '^--- PASS' "/tmp/$bin.log")
		nf=$(grep -c -- '^--- FAIL' "/tmp/$bin.log")
		ns=$(grep -c -- '^--- SKIP' "/tmp/$bin.log")
		summary="$bin: $np passed, $nf failed, $ns skipped ($(secs $(($(now_cs) - t0))) s)"
		[ $((np + nf + ns)) = 0 ] && summary="$summary; no test matched -test.run $re"
		if [ "$rc" = 0 ]; then pass "$summary"; else fail "$summary, exit $rc"; fi
		SKIPS=$((SKIPS + ns))
		# Failures and every skip inside the VM (sub-tests included) go into the summary.
		grep -E -- '^ *--- FAIL' "/tmp/$bin.log" | sed -e 's/^ *--- FAIL: //' -e 's/^/VMTEST failed in '"$bin"': /'
		grep -E -- '^ *--- SKIP' "/tmp/$bin.log" | sed -e 's/^ *--- SKIP: //' -e 's/^/VMTEST skipped in '"$bin"': /'
	done 3</vmtest/plan
}

# has_cmd "nvme log": the command exists in this rbctl build (cobra prints the parent's help
# for an unknown sub-command, so look for the full usage line).
has_cmd() { rbctl $1 --help 2>&1 | grep -q "rbctl $1"; }

# smoke NAME EXPECT CMD...: EXPECT is "ok" (exit 0), or "ok:REGEX" (exit 0 and output
# matches), or "msg:REGEX" (any exit below 128, output matches), case-insensitive.
smoke() {
	name=$1 expect=$2
	shift 2
	if [ "$NO_SMOKE" = 1 ]; then
		skip "rbctl $name: VMTEST_NO_SMOKE=1"
		return
	fi
	if ! has_cmd "$name"; then
		skip "rbctl $name: command not in this build"
		return
	fi
	echo "=== VMTEST STEP rbctl $name"
	t0=$(now_cs)
	out=$(rbctl "$@" 2>&1)
	rc=$?
	echo "\$ rbctl $*"
	echo "$out" | head -n "$SMOKE_LINES"
	ok=1
	case $expect in
	ok) [ $rc = 0 ] || ok=0 ;;
	ok:*) [ $rc = 0 ] && echo "$out" | grep -qiE "${expect#ok:}" || ok=0 ;;
	msg:*) [ $rc -lt 128 ] && echo "$out" | grep -qiE "${expect#msg:}" || ok=0 ;;
	esac
	echo "$out" | grep -q '^panic:' && ok=0
	if [ $ok = 1 ]; then pass "rbctl $* (exit $rc, $(secs $(($(now_cs) - t0))) s)"; else fail "rbctl $* (exit $rc, wanted $expect)"; fi
}

# nvme-cli and the rbctl CLI smoke steps of a scenario. "=== VMTEST STEP <name>" starts a
# step for the host's watchdog (scripts/vmtest/boot.sh); its VMTEST PASS|FAIL|SKIP line ends it.
run_smoke() {
	echo "=== VMTEST STEP nvme-cli id-ctrl"
	if nvme id-ctrl "$RBCTL_TEST_NVME_CTRL" -o json >/tmp/nvme-id-ctrl.json 2>/tmp/nvme.err &&
		grep -q "\"sn\" *: *\"$RBCTL_TEST_NVME_SERIAL" /tmp/nvme-id-ctrl.json; then
		pass "nvme-cli: nvme id-ctrl $RBCTL_TEST_NVME_CTRL -o json ($(grep -E '"(sn|mn|fr|ctratt|oncs)"' /tmp/nvme-id-ctrl.json | sed -e 's/^ *//' -e 's/  *"/"/g' | tr '\n' ' '))"
	else
		fail "nvme-cli: nvme id-ctrl $RBCTL_TEST_NVME_CTRL -o json: $(cat /tmp/nvme.err) $(head -c 300 /tmp/nvme-id-ctrl.json)"
	fi
	smoke version ok version
	smoke identify "ok:$RBCTL_TEST_NVME_SERIAL" identify "$RBCTL_TEST_NVME_NS" --json
	case $1 in
	qemu-nofdp)
		smoke "nvme log" ok nvme log "$RBCTL_TEST_NVME_CTRL" --lid 2
		smoke format ok format --force "$RBCTL_TEST_NULLB"
		smoke inspect ok inspect "$RBCTL_TEST_NULLB"
		smoke bench ok bench "$RBCTL_TEST_NULLB" --force --quiet --placement none --warmup 0 --duration 2s
		smoke fdp-status "msg:not supported" fdp-status "$RBCTL_TEST_NVME_NS"
		;;
	qemu-fdp | qemu-fdp-2rg | kernel-7)
		smoke fdp-status "ok:supported, enabled" fdp-status "$RBCTL_TEST_NVME_NS"
		smoke identify "ok:write streams" identify "$RBCTL_TEST_NVME_BLK"
		;;
	esac
	# bench on QEMU's FDP namespace: the device's own WAF from its FDP statistics log.
	case $1 in qemu-fdp | kernel-7)
		smoke bench "ok:device WAF" bench "$RBCTL_TEST_NVME_NS" --force --quiet --placement none,cache-salt --warmup 0.2 --duration 3s
		;;
	esac
}

# --- hooks: scripts/vmtest/guest.d/*.sh, each one step (exit 0 = pass, 77 = skip) --------
run_hooks() {
	[ "$1" = qemu-nofdp ] || return 0 # the hooks need null_blk and a free nvme0: the plain boot
	for h in /vmtest/guest.d/*.sh; do
		[ -e "$h" ] || continue
		echo "=== VMTEST STEP hook $(basename "$h")"
		t0=$(now_cs)
		sh "$h"
		rc=$?
		n=$(basename "$h")
		if [ $rc = 0 ]; then pass "hook $n ($(secs $(($(now_cs) - t0))) s)"; elif [ $rc = 77 ]; then skip "hook $n"; else fail "hook $n (exit $rc)"; fi
	done
}

# --- scenarios: "scenario <name>" lines of /vmtest/plan, in order -----------------------------
# Each prints "=== VMTEST SCENARIO <name>" and ends with "VMTEST SCENARIO <name>: <summary>",
# the line the host's matrix is made of.
for scen in $(sed -n 's/^scenario //p' /vmtest/plan); do
	echo "=== VMTEST SCENARIO $scen"
	t_sc=$(now_cs)
	s0=$STEPS f0=$FAILS k0=$SKIPS
	run_tests "$scen"
	[ "$scen" = fio-fdp ] || [ "$scen" = nvme-cli-2.13 ] || run_smoke "$scen"
	run_hooks "$scen"
	n=$((STEPS - s0)) nf=$((FAILS - f0))
	verdict=PASS
	[ $nf = 0 ] || verdict=FAIL
	echo "VMTEST SCENARIO $scen: $verdict, $n steps, $((n - nf)) passed, $nf failed, $((SKIPS - k0)) skipped (tests or steps), $(secs $(($(now_cs) - t_sc))) s"
done

finish
