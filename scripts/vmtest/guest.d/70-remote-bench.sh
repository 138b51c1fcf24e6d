#!/bin/sh
# Guest hook (issue 19): one cache over a local and three remote namespaces, and a remote
# target that goes away in the middle of a bench (docs/vmtest.md, "Remote namespaces (NVMe/TCP)";
# docs/nvmetcp.md). Sets up
#   - the kernel NVMe target (configfs): ONE subsystem with two namespaces, a fresh null_blk
#     instance made through /sys/kernel/config/nullb (memory backed, discard, 256 MiB) and a
#     256 MiB file on /tmp, on a TCP port of 127.0.0.1;
#   - `rbctl emu serve` (an emulated FDP SSD kept in a file on /tmp, so a restart keeps its
#     data and FTL state) on another port;
# attaches both with the kernel's nvme-tcp host through /dev/nvme-fabrics with a 1 s
# reconnect delay and fast_io_fail_tmo=0 (I/O fails at once while a target is away, the host
# reconnects when it returns), then runs
#   1. one `rbctl bench` over QEMU's local NVMe namespace and the three remote ones: every
#      device must have served ops without errors; the device WAF is the emulator's model
#      figure on the emulated SSD and not measured (null) on the kernel target's namespaces;
#   2. a 24 s bench during which the kernel target's port stops exporting the subsystem for
#      about 5 s (its two namespaces go away; the host reconnects once it is back): those
#      devices must count errors, in one episode no longer than the outage + 2 s, and serve
#      again before the window ends (last_ok_s > last_error_s); the others no errors, and a
#      write counter of a device that stayed (the emulator's HBMW) must move during the
#      outage; the bench must exit 1 (a device had errors);
#   3. the same with the emulator's process stopped (SIGTERM) and started again (null_blk's
#      write count must move meanwhile);
# and tears everything down. Exit 0 = pass, 77 = skip (modules absent), other = fail.
set -u
say() { echo "remote-bench hook: $*"; }
cfg=/sys/kernel/config/nvmet
nbcfg=/sys/kernel/config/nullb
if [ ! -d $cfg ] || [ ! -d /sys/module/nvmet_tcp ] || [ ! -e /dev/nvme-fabrics ] || [ ! -d /sys/module/nvme_tcp ] ||
	[ ! -d $nbcfg ] || [ ! -x /bin/rbctl ]; then
	say "nvmet configfs, nvmet-tcp, /dev/nvme-fabrics, nvme-tcp, null_blk configfs or /bin/rbctl absent"
	exit 77
fi
local_ns=${RBCTL_TEST_NVME_NS:-/dev/ng0n1}
knqn=nqn.2026-12.io.rbctl:vmtest-remote
kport_id=70
kport=4470 # 50-nvmet-tcp.sh uses 4420, 60-rbctl-emu-nvmetcp.sh 4421..4423
enqn=nqn.2026-12.io.rbctl:vmtest-remote-emu
eport=4471
espec='emu:/tmp/rb-remote-emu.img?size=256M&ru=4M&ruhs=4&op=0.15'
elog=/tmp/rb-remote-emu.log
nb=$nbcfg/rbremote
file=/tmp/rb-remote-ns.img
sub=$cfg/subsystems/$knqn
port=$cfg/ports/$kport_id
# Fail fast while a target is away, reconnect every second for up to a minute.
copts=reconnect_delay=1,ctrl_loss_tmo=60,fast_io_fail_tmo=0
# One policy run: the checks read the first run's per-device rows. Each bench runs under
# `timeout -s INT` (75 s, 90 s; they take 8 s and 25 s under TCG; the three at their limits
# still end within the step watchdog's 300 s): a bench that hangs on a
# device stops with its partial report (exit 130) instead of holding the boot until the step
# watchdog; one that does not stop 20 s after its SIGINT fails the hook (await_bench).
bargs="--force --quiet --placement none --workload uniform --keys 2000 --value-size 64K --warmup 0 --workers 4 --queue-depth 8 --json"

rc=0
bad() { say "FAIL: $*"; rc=1; }
now_cs() {
	read -r up _ </proc/uptime
	c=${up%.*}${up#*.}
	while [ ${#c} -gt 1 ] && [ "${c#0}" != "$c" ]; do c=${c#0}; done
	echo "$c"
}
secs() { printf '%d.%02d' $(($1 / 100)) $(($1 % 100)); }
T0=$(now_cs)

# The guest's own kernel can die under this hook: Debian 6.1's nvmet-tcp target once hit a
# hardened-usercopy BUG in nvmet_tcp_io_work ("usercopy: Kernel memory exposure attempt
# detected from page alloc", 2026-12-05), after which the bench waits on a dead target until
# the step watchdog fails the boot. A bench is therefore waited for by `await_bench`, which stops
# the hook with a skip (77) and the kernel's own lines once the kernel logs a BUG or an Oops
# it had not logged before this hook: what is left would test the broken kernel, not rbctl.
kbug='kernel BUG at|BUG: unable to handle|Oops:|usercopy:'
kbugs0=$(dmesg | grep -c -E "$kbug")
kernel_bug_check() {
	if [ "$(dmesg | grep -c -E "$kbug")" -gt "$kbugs0" ]; then
		say "SKIP: the guest kernel logged a BUG while a bench ran (a kernel fault, not rbctl's; the rest would wait on a dead target):"
		dmesg | grep -E "$kbug|Workqueue:|RIP:" | tail -n 4 | sed 's/^/remote-bench hook: dmesg: /'
		exit 77
	fi
}
# Nothing here may hold the boot until the step watchdog (300 s), which kills the guest with
# no word of where it stood (CI, 2026-12-06: the hook stalled somewhere in its 300 s). Every
# wait is bounded; one that runs out says what the process is doing (each thread's state and
# kernel wait, the kernel stacks of threads in uninterruptible sleep, the kernel's last lines,
# the controllers' states) and fails the hook, or skips it when the kernel holds the process
# (hung).
# kids PID: the PIDs of PID's children.
kids() { awk -v p="$1" '$4 == p { print $1 }' /proc/[0-9]*/stat 2>/dev/null; }
diag() { # PID: what a process that did not end is doing
	for t in /proc/$1/task/*; do
		[ -r "$t/stat" ] || continue
		st=$(awk '{ print $3 }' "$t/stat" 2>/dev/null)
		echo "thread ${t##*/} $(tr -d '\0' <"$t/comm" 2>/dev/null): state $st, waiting in $(cat "$t/wchan" 2>/dev/null)"
		[ "$st" = D ] && sed 's/^/  kernel stack: /' "$t/stack" 2>/dev/null | head -n 10
	done | head -n 40 | sed "s/^/remote-bench hook:   pid $1: /"
	for k in $(kids "$1"); do diag "$k"; done
}
diag_kernel() { # the controllers' states and the kernel's last lines
	for c in $kctrl $ectrl; do say "  /dev/$c: $(ctrl_state $c)"; done
	dmesg | tail -n 10 | sed 's/^/remote-bench hook:   dmesg: /'
}
# live PID...: whether any of them is still running (a zombie has ended).
live() {
	for p in "$@"; do
		st=$(awk '{ print $3 }' /proc/$p/stat 2>/dev/null)
		[ -n "$st" ] && [ "$st" != Z ] && return 0
	done
	return 1
}
# wait_for SECS PID...: waits until they have all ended (0) or SECS have passed (1).
wait_for() {
	wf=$(($(now_cs) + $1 * 100))
	shift
	while live "$@"; do
		[ "$(now_cs)" -lt "$wf" ] || return 1
		sleep 0.2
	done
	return 0
}
# hung WHAT PID: PID (WHAT) did not end in time: asks it and its children, Go programs, for
# their goroutines (SIGQUIT writes them to stderr) and kills them. A process SIGKILL cannot
# end within 10 s is held by the kernel (I/O it never completes, a configfs write that never
# returns): the kernel's fault, so the hook stops with a skip, as for a BUG. Otherwise rbctl
# (or the hook) did not stop in time: a failure.
hung() {
	say "$1 did not end in time; what it is doing:" >&2
	{ diag "$2"; diag_kernel; } >&2
	hp="$2 $(kids "$2")"
	kill -QUIT $hp 2>/dev/null
	wait_for 5 $hp || { kill -KILL $hp 2>/dev/null; wait_for 10 $hp; }
	if live $hp; then
		say "SKIP: $1 outlived SIGKILL by 10 s: the guest kernel holds it, not rbctl; now:" >&2
		diag "$2" >&2
		exit 77
	fi
	say "FAIL: $1 did not end in time (it ended on SIGQUIT or SIGKILL)" >&2
	rc=1
}
# await_bench PID SECS NAME: waits for a bench started under `timeout -s INT` (PID is
# timeout's) for at most SECS; its exit status. One that runs out ends the hook (hung).
await_bench() {
	end=$(($(now_cs) + $2 * 100))
	while live "$1"; do
		kernel_bug_check
		if [ "$(now_cs)" -ge "$end" ]; then
			hung "the bench ($3, still running $2 s after it started although its SIGINT was due 20 s earlier)" "$1"
			# Its goroutines (SIGQUIT's dump): each one's state and where it waits.
			grep -v '^rbctl: [0-9]* I/O errors' /tmp/rb-remote-$3.err | grep -A2 -E '^goroutine |^[a-zA-Z]' | grep -v '^--$' |
				head -n 80 | sed "s/^/remote-bench hook: $3: stderr: /"
			teardown
			exit 1
		fi
		sleep 1
	done
	wait "$1"
}
# bounded SECS WHAT CMD...: runs CMD in the background for at most SECS; its status, or 124.
# CMD's output goes to stderr: inside $(...) a CMD left running must not hold the pipe.
bounded() {
	bs=$1 bw=$2
	shift 2
	"$@" >&2 &
	bp=$!
	if ! wait_for "$bs" $bp; then
		hung "$bw (still running after $bs s)" $bp
		return 124
	fi
	wait $bp
}
sh_c() { sh -c "$1"; }

kctrl= ectrl= srv=
teardown() {
	for c in $kctrl $ectrl; do
		bounded 30 "deleting /dev/$c" sh_c "echo 1 >/sys/class/nvme/$c/delete_controller 2>/dev/null"
	done
	stop_emu
	[ -e "$port/subsystems/$knqn" ] && bounded 30 "unlinking the subsystem from port $kport_id" rm -f "$port/subsystems/$knqn"
	rmdir "$port" 2>/dev/null
	for n in 1 2; do
		[ -d "$sub/namespaces/$n" ] && echo 0 >"$sub/namespaces/$n/enable" 2>/dev/null
		rmdir "$sub/namespaces/$n" 2>/dev/null
	done
	rmdir "$sub" 2>/dev/null
	[ -d $nb ] && echo 0 >$nb/power 2>/dev/null
	rmdir $nb 2>/dev/null
	rm -f $file /tmp/rb-remote-emu.img /tmp/rb-remote-emu.img.fdp
	left=
	for c in $kctrl $ectrl; do
		for i in $(seq 1 50); do [ -e /sys/class/nvme/$c ] || break; sleep 0.1; done
		[ -e /sys/class/nvme/$c ] && left="$left /dev/$c"
	done
	[ -d "$sub" ] && left="$left $sub"
	[ -d "$port" ] && left="$left $port"
	[ -d $nb ] && left="$left $nb"
	[ -n "$left" ] && say "FAIL: teardown left$left" && rc=1
}
die() { bad "$*"; teardown; exit 1; }
say "MemAvailable $(awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo) MiB before setup"

# --- the kernel target: a fresh null_blk and a file, one subsystem, one port ------------------
mkdir $nb || die "mkdir $nb"
for kv in size=256 blocksize=4096 memory_backed=1 discard=1 power=1; do
	echo "${kv#*=}" >"$nb/${kv%%=*}" || die "null_blk configfs: cannot set ${kv%%=*}=${kv#*=}"
done
# 6.1 names the disk after the configfs directory (/dev/rbremote); others nullb<index>.
nbdev=
for i in $(seq 1 50); do
	for d in /dev/rbremote /dev/nullb$(cat $nb/index); do [ -b "$d" ] && nbdev=$d && break 2; done
	sleep 0.1
done
[ -n "$nbdev" ] || die "no /dev/rbremote or /dev/nullb$(cat $nb/index) after powering $nb on"
dd if=/dev/zero of=$file bs=1M count=0 seek=256 2>/dev/null || die "cannot make $file"

mkdir "$sub" || die "mkdir $sub"
echo 1 >"$sub/attr_allow_any_host"
echo rbctlremote1 >"$sub/attr_serial" || die "cannot set attr_serial"
n=1
for dev in "$nbdev" "$file"; do
	mkdir "$sub/namespaces/$n" || die "mkdir $sub/namespaces/$n"
	printf %s "$dev" >"$sub/namespaces/$n/device_path"
	echo 1 >"$sub/namespaces/$n/enable" || die "cannot enable namespace $n on $dev"
	n=$((n + 1))
done
mkdir "$port" || die "mkdir $port"
echo tcp >"$port/addr_trtype"
echo ipv4 >"$port/addr_adrfam"
echo 127.0.0.1 >"$port/addr_traddr"
echo $kport >"$port/addr_trsvcid"
ln -s "$sub" "$port/subsystems/$knqn" || die "cannot link port $kport_id to the subsystem"

# --- rbctl's target: the emulated FDP SSD -----------------------------------------------------
start_emu() {
	/bin/rbctl emu serve "$espec" --listen 127.0.0.1:$eport --nqn $enqn --log >>$elog 2>&1 &
	srv=$!
	for i in $(seq 1 100); do [ "$(grep -c '^serving' $elog 2>/dev/null)" -ge "$1" ] && return 0; sleep 0.1; done
	return 1
}
# stop_emu: SIGTERM, and the process must be gone within 20 s (it closes every connection).
stop_emu() {
	[ -n "$srv" ] || return 0
	kill "$srv" 2>/dev/null
	if wait_for 20 "$srv"; then
		wait "$srv" 2>/dev/null
	else
		hung "rbctl emu serve (SIGTERM 20 s earlier)" "$srv"
		grep -A2 -E '^goroutine ' $elog | grep -v '^--$' | head -n 80 | sed 's/^/remote-bench hook: emu serve: /'
	fi
	srv=
}
: >$elog
start_emu 1 || die "rbctl emu serve did not start: $(tail -n 5 $elog)"

# --- attach both; find each namespace by subsystem NQN and NSID (multipath names the head
# disks by subsystem instance, so do not derive them from the controller's) --------------------
connect() { # PORT NQN: prints the controller (nvmeN)
	exec 4<>/dev/nvme-fabrics
	if ! echo "transport=tcp,traddr=127.0.0.1,trsvcid=$1,nqn=$2,$copts" >&4 2>/tmp/rb-remote-err; then
		exec 4<&-
		return 1
	fi
	read -r reply <&4
	exec 4<&-
	inst=$(echo "$reply" | sed -n 's/.*instance=\([0-9]*\).*/\1/p')
	[ -n "$inst" ] && echo "nvme$inst"
}
ns_of() { # NQN NSID: prints /dev/ngXnY
	for b in /sys/block/nvme*n*; do
		name=${b##*/}
		case $name in *c*) continue ;; esac
		[ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$1" ] || continue
		[ "$(cat "$b/nsid" 2>/dev/null)" = "$2" ] || continue
		[ -c "/dev/ng${name#nvme}" ] && echo "/dev/ng${name#nvme}" && return 0
	done
	return 1
}
wait_ns() { # NQN NSID
	for i in $(seq 1 100); do ns_of "$1" "$2" && return 0; sleep 0.1; done
	return 1
}
kctrl=$(connect $kport $knqn) || die "connect to the kernel target failed: $(cat /tmp/rb-remote-err) $(dmesg | tail -n 3)"
ectrl=$(connect $eport $enqn) || die "connect to rbctl emu serve failed: $(cat /tmp/rb-remote-err) $(dmesg | tail -n 3)"
ng_nullb=$(wait_ns $knqn 1) || die "no namespace 1 ($nbdev) of $knqn after connecting"
ng_file=$(wait_ns $knqn 2) || die "no namespace 2 ($file) of $knqn after connecting"
ng_emu=$(wait_ns $enqn 1) || die "no namespace of $enqn after connecting"
for c in $kctrl $ectrl; do
	a=/sys/class/nvme/$c
	say "attached /dev/$c: $(cat $a/transport) $(cat $a/address | tr -d '\n'), subsystem $(cat $a/subsysnqn), model '$(sed 's/ *$//' $a/model)'; reconnect_delay $(cat $a/reconnect_delay 2>/dev/null) ctrl_loss_tmo $(cat $a/ctrl_loss_tmo 2>/dev/null) fast_io_fail_tmo $(cat $a/fast_io_fail_tmo 2>/dev/null)"
done
say "devices: local $local_ns (QEMU PCIe), $ng_nullb (kernel target, $nbdev), $ng_file (kernel target, $file), $ng_emu (rbctl emu serve)"
devs="$local_ns $ng_nullb $ng_file $ng_emu"
/bin/rbctl bench --help 2>&1 | grep -q 'bench DEV \[DEV' || die "rbctl bench takes one DEV in this build (want DEV [DEV...])"

# --- reading the report --------------------------------------------------------------------------
# rows FILE: one line per device of the first run's "devices" array, then its
# "devices_total", the fields of $keys (strings unquoted, null as "null", a missing key as "-").
keys="device ops errors put_mib_s get_mib_s p50_us p99_us waf waf_source first_error_s last_error_s last_ok_s"
rows() {
	tr -d '\n\t ' <"$1" | grep -o -E '"devices":\[[^]]*\]|"devices_total":\{[^}]*\}' | head -n 2 |
		awk '/^"devices":/ { s = substr($0, 13, length($0) - 14); gsub(/\},\{/, "}\n{", s); print s; next } { print }' |
		awk -v keys="$keys" '{ n = split(keys, K, " "); line = ""
			for (i = 1; i <= n; i++) {
				v = "-"
				if (match($0, "\"" K[i] "\":(\"[^\"]*\"|[^,}]*)")) {
					v = substr($0, RSTART + length(K[i]) + 3, RLENGTH - length(K[i]) - 3); gsub(/"/, "", v)
				}
				line = line (i > 1 ? " " : "") v
			}
			print line }'
}
# field ROW NAME: one field of a row.
field() { echo "$1" | awk -v keys="$keys" -v k="$2" '{ n = split(keys, K, " "); for (i = 1; i <= n; i++) if (K[i] == k) print $i }'; }
row_of() { rows "$1" | awk -v d="$2" '$1 == d'; }
# sums FILE: "ok" when the total row's ops and errors are the sums of the devices' rows.
sums() {
	rows "$1" | awk '$1 == "total" { to = $2; te = $3; t = 1; next } { o += $2; e += $3 }
		END { if (t && o == to && e == te) print "ok"; else print "devices " o " ops " e " errors, total row " to " ops " te " errors" }'
}
table() { # FILE: the per-device table
	printf '%-14s %7s %6s %9s %9s %9s %9s %-22s %8s %8s %8s\n' device ops errors "put MiB/s" "get MiB/s" "p50 us" "p99 us" "device WAF (source)" "1st err" "last err" "last ok"
	rows "$1" | while read -r d o e pu gu p50 p99 w ws fe le lo; do
		case $ws in
		fdp-stats | emulator-model) wl=$(printf '%.3f (%s)' "$w" "$ws") ;;
		modelled) wl=$(printf 'none; model %.2f' "$w") ;;
		*) wl="not measured" ;;
		esac
		printf '%-14s %7s %6s %9.1f %9.1f %9.0f %9.0f %-22s %8s %8s %8s\n' "$d" "$o" "$e" "$pu" "$gu" "$p50" "$p99" "$wl" "$(s2 "$fe")" "$(s2 "$le")" "$(s2 "$lo")"
	done
}
s2() { case $1 in null | -) echo "$1" ;; *) printf '%.2f' "$1" ;; esac; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 > b + 0) }'; }

# --- 1. one bench over all four ------------------------------------------------------------------
t1=$(now_cs)
timeout -s INT 75 /bin/rbctl bench $devs $bargs --duration 6s >/tmp/rb-remote-b1.json 2>/tmp/rb-remote-b1.err &
await_bench $! 95 b1
brc=$?
say "bench over $devs: exit $brc ($(secs $(($(now_cs) - t1))) s)"
[ $brc = 0 ] || bad "bench exit $brc: $(tail -n 5 /tmp/rb-remote-b1.err)"
[ "$(sums /tmp/rb-remote-b1.json)" = ok ] || bad "bench: $(sums /tmp/rb-remote-b1.json)"
table /tmp/rb-remote-b1.json | sed 's/^/remote-bench hook: | /'
for d in $devs; do
	r=$(row_of /tmp/rb-remote-b1.json "$d")
	[ -n "$r" ] || { bad "bench: no row for $d"; continue; }
	gt "$(field "$r" ops)" 0 || bad "bench: $d served no ops"
	[ "$(field "$r" errors)" = 0 ] || bad "bench: $d had $(field "$r" errors) errors"
done
# The kernel target's namespaces and QEMU's (no FDP) have no device WAF: null, or at most the
# host-side shadow model's figure labelled "modelled" -- never a device source, never 0.
for d in $local_ns $ng_nullb $ng_file; do
	r=$(row_of /tmp/rb-remote-b1.json "$d")
	[ -n "$r" ] || continue
	w=$(field "$r" waf) ws=$(field "$r" waf_source)
	[ "$w" = null ] || { [ "$ws" = modelled ] && gt "$w" 0; } ||
		bad "bench: $d (no FDP) has WAF '$w' from '$ws', want null (not measured) or a modelled value > 0"
done
r=$(row_of /tmp/rb-remote-b1.json "$ng_emu")
if [ -n "$r" ]; then
	[ "$(field "$r" waf_source)" = emulator-model ] && gt "$(field "$r" waf)" 0 ||
		bad "bench: $ng_emu (rbctl emu serve) WAF '$(field "$r" waf)' source '$(field "$r" waf_source)', want a value from the emulator's model (emulator-model)"
fi

# --- 2 and 3. a target goes away mid-run and comes back ------------------------------------------
# nullb_writes: writes completed on the null_blk behind the kernel target (the bench's
# passthrough I/O is not counted on the host's disks in 6.1, the target's bio I/O is).
nullb_writes() { awk '{ print $5 }' /sys/block/${nbdev#/dev/}/stat; }
ctrl_state() { cat /sys/class/nvme/$1/state 2>/dev/null; }
wait_live() { # CTRL: up to 30 s
	for i in $(seq 1 300); do [ "$(ctrl_state $1)" = live ] && return 0; sleep 0.1; done
	return 1
}
# emu_hbmw: host bytes the emulated SSD has written (its FDP statistics log, read through the
# kernel while the bench runs).
emu_hbmw() {
	rm -f /tmp/rb-remote-stats.json
	bounded 20 "rbctl fdp stats $ng_emu" sh_c "/bin/rbctl fdp stats $ng_emu -e 1 --json >/tmp/rb-remote-stats.json 2>/dev/null" || return 0
	tr </tmp/rb-remote-stats.json ',{}' '\n\n\n' | sed -n 's/^ *"hbmw" *: *"\{0,1\}\([0-9]*\)"\{0,1\} *$/\1/p' | head -n 1
}
# fault NAME CTRL AWAY_CMD BACK_CMD COUNTER AFFECTED...: a 24 s bench; AWAY_CMD runs once the
# window has started (null_blk's write count moves) plus 3 s, BACK_CMD 5 s later. COUNTER
# prints a write counter of a device that stays: it must move while the target is away.
fault() {
	name=$1 fctrl=$2 away=$3 back=$4 counter=$5
	shift 5
	out=/tmp/rb-remote-$name.json
	tb=$(now_cs)
	timeout -s INT 90 /bin/rbctl bench $devs $bargs --duration 24s >$out 2>/tmp/rb-remote-$name.err &
	bpid=$!
	w0=$(nullb_writes)
	for i in $(seq 1 600); do [ $(($(nullb_writes) - w0)) -gt 32 ] && break; kill -0 $bpid 2>/dev/null || break; sleep 0.1; done
	sleep 3
	ta=$(now_cs)
	$away || bad "$name: could not take the target away ($away)"
	sleep 1
	st_away=$(ctrl_state $fctrl)
	c0=$($counter)
	sleep 4
	c1=$($counter)
	tr_=$(now_cs)
	$back || bad "$name: could not bring the target back ($back)"
	if wait_live $fctrl; then tl=$(now_cs); else tl=; bad "$name: /dev/$fctrl not live 30 s after the target came back (state $(ctrl_state $fctrl))"; fi
	await_bench $bpid 110 $name
	frc=$?
	tail -n 4 /tmp/rb-remote-$name.err | sed "s/^/remote-bench hook: $name: stderr: /"
	[ -n "$c0" ] && [ -n "$c1" ] && [ "$c1" -gt "$c0" ] || bad "$name: $counter did not move while the target was away ($c0, 4 s later $c1): the other devices were not served"
	say "$name: $counter $c0 -> $c1 while away; target away at +$(secs $((ta - tb))) s, back at +$(secs $((tr_ - tb))) s, /dev/$fctrl '$st_away' while away, live again at +$(secs $((${tl:-0} - tb))) s (bench start = +0; the JSON's seconds count from the measured window)"
	table $out | sed 's/^/remote-bench hook: | /'
	[ $frc = 1 ] || bad "$name: bench exit $frc, want 1 (a device had errors): $(tail -n 3 /tmp/rb-remote-$name.err)"
	grep -E '^panic|goroutine ' /tmp/rb-remote-$name.err && bad "$name: bench panicked"
	[ "$(sums $out)" = ok ] || bad "$name: $(sums $out)"
	for d in $devs; do
		r=$(row_of $out "$d")
		[ -n "$r" ] || { bad "$name: no row for $d"; continue; }
		gt "$(field "$r" ops)" 0 || bad "$name: $d served no ops"
		case " $* " in
		*" $d "*)
			gt "$(field "$r" errors)" 0 || bad "$name: $d (taken away) counted no errors"
			le=$(field "$r" last_error_s) lo=$(field "$r" last_ok_s)
			[ "$le" != null ] && [ "$lo" != null ] && gt "$lo" "$le" ||
				bad "$name: $d did not serve again after its last error (last_error_s $le, last_ok_s $lo)"
			# The errors are one episode no longer than the outage (away until live again) plus 2 s.
			fe=$(field "$r" first_error_s)
			[ "$fe" != null ] && [ "$le" != null ] && gt "$(secs $((${tl:-$(now_cs)} - ta + 200)))" "$(awk -v a="$fe" -v b="$le" 'BEGIN { print b - a }')" ||
				bad "$name: $d errors from ${fe} s to ${le} s, longer than the outage ($(secs $((${tl:-0} - ta))) s) + 2 s"
			;;
		*) [ "$(field "$r" errors)" = 0 ] || bad "$name: $d (not taken away) had $(field "$r" errors) errors" ;;
		esac
	done
}
# The ways a target goes away and comes back (the kernel's: its port stops exporting the
# subsystem; rbctl's: the process stops and starts again).
kernel_away() { bounded 30 "unlinking the subsystem from port $kport_id" rm "$port/subsystems/$knqn"; }
kernel_back() { bounded 30 "linking the subsystem to port $kport_id" ln -s "$sub" "$port/subsystems/$knqn"; }
emu_back() { start_emu 2; }
fault kernel-target "$kctrl" kernel_away kernel_back emu_hbmw "$ng_nullb" "$ng_file"
fault emu-target "$ectrl" stop_emu emu_back nullb_writes "$ng_emu"
grep -E '^panic|goroutine ' $elog && bad "rbctl emu serve crashed"

teardown
say "done in $(secs $(($(now_cs) - T0))) s; MemAvailable $(awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo) MiB"
exit $rc
