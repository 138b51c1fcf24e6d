#!/bin/sh
# Guest hook (issue 9): rbctl's own NVMe/TCP target in front of the emulated FDP SSD, attached
# by the kernel's nvme-tcp host driver (docs/nvmetcp.md). Starts `rbctl emu serve` on
# 127.0.0.1:4421 in the background, connects through /dev/nvme-fabrics, then checks through the
# kernel: nvme-cli id-ctrl and ns-descs (against sysfs), rbctl identify and fdp-status
# (URING_CMD on /dev/ngXn1), a second target with header+data digests, a short rbctl bench that
# must report the device WAF from the target's FDP statistics log, an RUH update, nvme-cli's
# fdp plugin against rbctl's --json field by field, the harness's nvme/probe kernel tests
# pointed at this controller, a controller reset, and a third target under load with faults
# (dropped queues, silent and malformed connections). Detaches and stops the targets at the
# end. Exit 0 = pass, 77 = skip (no nvme-fabrics / rbctl), other = fail.
set -u
nqn=nqn.2026-11.io.rbctl:emu-vmtest
port=4421
spec='emu:mem?size=256M&ru=4M&ruhs=4&op=0.15'
log=/tmp/rbctl-emu-serve.log
if [ ! -e /dev/nvme-fabrics ] || [ ! -x /bin/rbctl ]; then
	echo "emu-nvmetcp hook: /dev/nvme-fabrics or /bin/rbctl absent"
	exit 77
fi
say() { echo "emu-nvmetcp hook: $*"; }
rc=0
bad() { say "FAIL: $*"; rc=1; }
# stop PID LOG: SIGTERM to a target, which must be gone within 20 s (it closes every
# connection); else SIGQUIT (its goroutines go to LOG and are shown) and SIGKILL, a failure.
# No wait here is unbounded: the step watchdog (300 s) would kill the guest with no word of
# where it stood.
stop() {
	kill "$1" 2>/dev/null || return 0
	for i in $(seq 1 200); do
		st=$(awk '{ print $3 }' /proc/$1/stat 2>/dev/null)
		[ -z "$st" ] || [ "$st" = Z ] && { wait "$1" 2>/dev/null; return 0; }
		sleep 0.1
	done
	bad "rbctl emu serve (pid $1) still running 20 s after SIGTERM; its goroutines:"
	kill -QUIT "$1" 2>/dev/null
	sleep 2
	grep -A2 -E '^goroutine ' "$2" | grep -v '^--$' | head -n 60 | sed 's/^/emu-nvmetcp hook:   /'
	kill -KILL "$1" 2>/dev/null
}
ctrl=
teardown() {
	[ -n "$ctrl" ] && echo 1 >"/sys/class/nvme/$ctrl/delete_controller" 2>/dev/null
	[ -n "${srv:-}" ] && stop "$srv" $log
	echo "--- rbctl emu serve log:"; tail -n 20 $log
}
die() { bad "$*"; teardown; exit 1; }

/bin/rbctl emu serve "$spec" --listen 127.0.0.1:$port --nqn $nqn --log >$log 2>&1 &
srv=$!
for i in $(seq 1 100); do grep -q '^serving' $log 2>/dev/null && break; sleep 0.1; done
grep -q '^serving' $log || die "rbctl emu serve did not start: $(cat $log)"

exec 4<>/dev/nvme-fabrics
echo "transport=tcp,traddr=127.0.0.1,trsvcid=$port,nqn=$nqn" >&4 || die "connect through /dev/nvme-fabrics failed (dmesg: $(dmesg | grep -i nvme | tail -5))"
read -r reply <&4
exec 4<&-
inst=$(echo "$reply" | sed -n 's/.*instance=\([0-9]*\).*/\1/p')
[ -n "$inst" ] || die "unexpected reply from /dev/nvme-fabrics: $reply"
ctrl=nvme$inst
ng=
for i in $(seq 1 100); do
	ng=$(ls -d /dev/ng"$inst"n1 2>/dev/null)
	[ -n "$ng" ] && break
	sleep 0.1
done
[ -n "$ng" ] || die "no /dev/ng${inst}n1 after connecting"
say "attached $nqn as /dev/$ctrl ($(cat /sys/class/nvme/$ctrl/transport) $(cat /sys/class/nvme/$ctrl/address)), namespace $ng, model '$(cat /sys/class/nvme/$ctrl/model)'"
dmesg | grep -E "nvme$inst" | tail -3 | sed 's/^/emu-nvmetcp hook: dmesg: /'

# json_num FILE KEY: the first numeric value of "KEY" in a JSON file (nvme-cli and rbctl print
# one key per line or compact; both are handled).
json_num() { tr ',{}[]' '\n\n\n\n\n' <"$1" | sed -n "s/^ *\"$2\" *: *\"\{0,1\}\([0-9.]*\)\"\{0,1\} *$/\1/p" | head -1; }
json_str() { tr ',{}[]' '\n\n\n\n\n' <"$1" | sed -n "s/^ *\"$2\" *: *\"\([^\"]*\)\" *$/\1/p" | head -1 | sed 's/ *$//'; }

# 1. nvme-cli Identify Controller: the emulator's model, our NQN, an I/O controller with FDPS.
if nvme id-ctrl /dev/$ctrl -o json >/tmp/idctrl.json 2>/tmp/err; then
	mn=$(json_str /tmp/idctrl.json mn); sub=$(json_str /tmp/idctrl.json subnqn); ctratt=$(json_num /tmp/idctrl.json ctratt)
	say "nvme id-ctrl: mn '$mn' subnqn '$sub' ctratt $ctratt cntrltype $(json_num /tmp/idctrl.json cntrltype)"
	[ "$mn" = "rbctl emulated FDP SSD" ] || bad "nvme id-ctrl mn '$mn'"
	[ "$sub" = "$nqn" ] || bad "nvme id-ctrl subnqn '$sub'"
	[ $((ctratt & 0x80000)) != 0 ] || bad "CTRATT $ctratt without FDPS (bit 19)"
else
	bad "nvme id-ctrl /dev/$ctrl: $(cat /tmp/err)"
fi

# 1b. Namespace identifiers (Identify CNS 0x03 from the target): the kernel took the NGUID and
# UUID (sysfs) and nvme-cli decodes the same descriptors.
sys_nguid=$(cat /sys/block/nvme${inst}n1/nguid 2>/dev/null | tr -d '-'); sys_uuid=$(cat /sys/block/nvme${inst}n1/uuid 2>/dev/null)
if nvme ns-descs /dev/$ctrl -n 1 -o json >/tmp/descs.json 2>/tmp/err; then
	cli_nguid=$(json_str /tmp/descs.json nguid | tr -d '-'); cli_uuid=$(json_str /tmp/descs.json uuid)
	say "namespace ids: sysfs nguid $sys_nguid uuid $sys_uuid; nvme-cli nguid $cli_nguid uuid $cli_uuid"
	[ -n "$sys_nguid" ] && [ "$sys_nguid" = "$cli_nguid" ] || bad "NGUID: sysfs '$sys_nguid', nvme-cli '$cli_nguid'"
	[ -n "$sys_uuid" ] && [ "$sys_uuid" = "$cli_uuid" ] || bad "UUID: sysfs '$sys_uuid', nvme-cli '$cli_uuid'"
else
	bad "nvme ns-descs /dev/$ctrl -n 1: $(cat /tmp/err)"
fi

# 2. rbctl identify and fdp-status through the kernel (URING_CMD).
/bin/rbctl identify "$ng" --json >/tmp/rbid.json 2>/tmp/err || bad "rbctl identify $ng: $(cat /tmp/err)"
[ "$(json_str /tmp/rbid.json mn)" = "rbctl emulated FDP SSD" ] || bad "rbctl identify mn '$(json_str /tmp/rbid.json mn)'"
/bin/rbctl fdp-status "$ng" >/tmp/fdpst.txt 2>/tmp/err || bad "rbctl fdp-status $ng: $(cat /tmp/err)"
head -n 12 /tmp/fdpst.txt | sed 's/^/emu-nvmetcp hook: | /'


# 2b. Header and data digests (CRC32C): a second target (its own emulated SSD, port
# $((port + 1))) attached with hdr_digest,data_digest; nvme-cli writes 64 KiB (R2T + H2CData)
# and reads it back (C2HData), and rbctl reads the FDP statistics through it. The kernel needs
# crc32c for this (module crc32c_generic); without it the step is noted, not failed.
dnqn=$nqn-digest
/bin/rbctl emu serve 'emu:mem?size=64M&ru=1M&ruhs=2' --listen 127.0.0.1:$((port + 1)) --nqn $dnqn >/tmp/rbctl-emu-digest.log 2>&1 &
dsrv=$!
for i in $(seq 1 100); do grep -q '^serving' /tmp/rbctl-emu-digest.log 2>/dev/null && break; sleep 0.1; done
dctrl=
exec 4<>/dev/nvme-fabrics
if echo "transport=tcp,traddr=127.0.0.1,trsvcid=$((port + 1)),nqn=$dnqn,hdr_digest,data_digest" >&4 2>/tmp/err; then
	read -r reply <&4
	dinst=$(echo "$reply" | sed -n 's/.*instance=\([0-9]*\).*/\1/p')
	dctrl=nvme$dinst
	for i in $(seq 1 100); do [ -e /dev/nvme${dinst}n1 ] && [ -e /dev/ng${dinst}n1 ] && break; sleep 0.1; done
	dd if=/dev/urandom of=/tmp/dpat bs=4096 count=16 2>/dev/null
	if nvme write /dev/nvme${dinst}n1 -s 256 -c 15 -z 65536 -d /tmp/dpat >/tmp/err 2>&1 &&
		nvme read /dev/nvme${dinst}n1 -s 256 -c 15 -z 65536 -d /tmp/dback >/tmp/err 2>&1 && cmp -s /tmp/dpat /tmp/dback &&
		/bin/rbctl fdp stats /dev/ng${dinst}n1 -e 1 --json >/tmp/dstats.json 2>>/tmp/err; then
		say "digests: /dev/$dctrl with header+data digests: 64 KiB written and read back equal; HBMW $(json_num /tmp/dstats.json hbmw)"
	else
		bad "digests: I/O through /dev/$dctrl failed: $(tail -n 3 /tmp/err)"
	fi
	echo 1 >/sys/class/nvme/$dctrl/delete_controller 2>/dev/null
elif dmesg | tail -n 3 | grep -q 'crypto'; then
	say "note: digests not checked: the guest kernel has no crc32c (module crc32c_generic)"
else
	bad "connect with hdr_digest,data_digest failed: $(cat /tmp/err); $(dmesg | tail -n 2)"
fi
exec 4<&-
stop "$dsrv" /tmp/rbctl-emu-digest.log
grep -E 'panic|goroutine' /tmp/rbctl-emu-digest.log && bad "the digest target crashed"
/bin/rbctl fdp stats "$ng" -e 1 --json >/dev/null 2>&1 || bad "the first controller stopped answering"

# 3. A short bench through the kernel (placed writes with DTYPE=2/DSPEC, DSM): the report
# must carry the device WAF read from the target's FDP statistics log, labelled as the
# emulator's model output (bench recognises rbctl's emulator by its Identify model number).
if /bin/rbctl bench "$ng" --force --workload uniform --requests 1500 --value-size 64K --warmup 0 --quiet \
	--placement none,cache-salt --queue-depth 16 --io-engine passthru --json >/tmp/bench.json 2>/tmp/err; then
	# Every run's device_waf must come from the FDP statistics log the target keeps, which is
	# the emulator's FTL model: labelled emulator-model, never fdp-stats (a drive's measurement).
	runs=$(grep -c '"policy"' /tmp/bench.json)
	fdpsrc=$(grep -c '"source": *"emulator-model"' /tmp/bench.json)
	say "rbctl bench: $runs runs, $fdpsrc device WAF values from the emulator's FDP log (emulator-model): $(tr -d ' \n' </tmp/bench.json | grep -o '"device_waf":{[^}]*}' | tr '\n' ' ')"
	[ "$runs" -ge 1 ] && [ "$fdpsrc" -ge "$runs" ] || bad "rbctl bench reports no device WAF from the emulator's FDP statistics log (want source emulator-model)"
else
	bad "rbctl bench $ng: $(tail -n 5 /tmp/err)"
	# Tell a target problem from an engine problem: the same bench on QEMU's PCIe controller.
	pcie=${RBCTL_TEST_NVME_NS:-}
	if [ -n "$pcie" ] && [ -e "$pcie" ] && [ "$pcie" != "$ng" ]; then
		if /bin/rbctl bench "$pcie" --force --workload uniform --requests 300 --value-size 64K --warmup 0 --quiet \
			--placement none --queue-depth 16 --io-engine passthru --json >/dev/null 2>/tmp/err2; then
			say "the same bench passes on $pcie (QEMU PCIe): the failure is in the NVMe/TCP path"
		else
			say "the same bench fails on $pcie (QEMU PCIe) too: $(tail -n 1 /tmp/err2)"
		fi
	fi
fi

# 4. An RUH update (I/O Management Send) through rbctl and the kernel: the bench left the
# handles' reclaim units partly written, so this logs "RU not fully written" host events.
/bin/rbctl fdp update "$ng" -p 0,1 --yes >/tmp/upd.txt 2>&1 || bad "rbctl fdp update $ng -p 0,1: $(cat /tmp/upd.txt)"

# 5. nvme-cli's fdp plugin decodes what the target returns (after the bench, so the counters
# are not zero), and agrees with rbctl's JSON.
cmp_field() { # WHAT NVME_FILE RBCTL_FILE KEY
	a=$(json_num "$2" "$4"); b=$(json_num "$3" "$4")
	if [ -z "$a" ] || [ "$a" != "$b" ]; then bad "$1: $4 nvme-cli '$a' rbctl '$b'"; else say "$1: $4 = $a (nvme-cli = rbctl)"; fi
}
for sub in configs usage stats; do
	nvme fdp $sub /dev/$ctrl -e 1 -o json >/tmp/n-$sub.json 2>/tmp/err || { bad "nvme fdp $sub: $(cat /tmp/err)"; continue; }
	/bin/rbctl fdp $sub "$ng" -e 1 --json >/tmp/r-$sub.json 2>/tmp/err || { bad "rbctl fdp $sub: $(cat /tmp/err)"; continue; }
done
# cmp_all WHAT NVME_FILE RBCTL_FILE: every scalar nvme-cli prints, in order (the k-th "x" of
# nvme-cli against the k-th "x" of rbctl), must equal rbctl's; keys rbctl lacks are listed.
flat() { tr ',{}[]' '\n\n\n\n\n' <"$1" | sed -n 's/^ *"\([^"]*\)" *: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1 \2/p' | sed 's/ *$//'; }
cmp_all() {
	flat "$2" >/tmp/flat-n; flat "$3" >/tmp/flat-r
	res=$(awk 'NR==FNR { c[$1]++; v[$1, c[$1]] = $2; next }
		{ k[$1]++; key = $1 SUBSEP k[$1]; n++
		  if (!(key in v)) { miss[$1] = 1; next }
		  if (v[key] != $2) { print "DIFF " $1 "#" k[$1] ": nvme-cli " $2 " rbctl " v[key]; bad++ } else ok++ }
		END { m = ""; for (x in miss) m = m " " x; print "SUMMARY " ok+0 " equal, " bad+0 " differ; not in rbctl:" (m == "" ? " none" : m) }' /tmp/flat-r /tmp/flat-n)
	echo "$res" | grep '^DIFF' | while read -r l; do bad "$1: $l"; done
	echo "$res" | grep -q '^DIFF' && rc=1
	say "$1: $(echo "$res" | sed -n 's/^SUMMARY //p')"
}
cmp_field configs /tmp/n-configs.json /tmp/r-configs.json nrg
cmp_field configs /tmp/n-configs.json /tmp/r-configs.json nruh
cmp_field configs /tmp/n-configs.json /tmp/r-configs.json runs
cmp_field usage /tmp/n-usage.json /tmp/r-usage.json nruh
for k in hbmw mbmw mbe; do cmp_field stats /tmp/n-stats.json /tmp/r-stats.json $k; done
if nvme fdp status "$ng" -o json >/tmp/n-status.json 2>/tmp/err; then
	/bin/rbctl fdp status "$ng" --json >/tmp/r-status.json 2>/tmp/err || bad "rbctl fdp status: $(cat /tmp/err)"
	cmp_field status /tmp/n-status.json /tmp/r-status.json nruhsd
	cmp_field status /tmp/n-status.json /tmp/r-status.json ruamw
else
	bad "nvme fdp status $ng: $(cat /tmp/err)"
fi
cmp_field usage /tmp/n-usage.json /tmp/r-usage.json ruha
for sub in configs usage stats status; do cmp_all "$sub (all fields)" /tmp/n-$sub.json /tmp/r-$sub.json; done
for host in "" -E; do # controller events, then host events (the RUH update above logs some)
	nvme fdp events /dev/$ctrl -e 1 $host -o json >/tmp/n-events.json 2>/tmp/err || { bad "nvme fdp events $host: $(cat /tmp/err)"; continue; }
	/bin/rbctl fdp events "$ng" -e 1 $host --json >/tmp/r-events.json 2>/tmp/err || { bad "rbctl fdp events $host: $(cat /tmp/err)"; continue; }
	cmp_field "events $host" /tmp/n-events.json /tmp/r-events.json n
	cmp_all "events $host (all fields)" /tmp/n-events.json /tmp/r-events.json
	# The first event's fields, those nvme-cli 2.3 prints (it has no ruhid, for one).
	[ "$(json_num /tmp/r-events.json n)" != 0 ] && for k in type fdpef pid timestamp nsid rgid ruhid; do
		[ -n "$(json_num /tmp/n-events.json $k)" ] && cmp_field "events $host" /tmp/n-events.json /tmp/r-events.json $k
	done
done

# 6. The harness's own kernel tests, pointed at this controller (when the binaries are in
# the initramfs): URING_CMD and ioctl round trips, concurrent I/O, Get Log Page in pieces, and
# probe/nvme-cli/rbctl identify agreement. (TestNVMeKernelIdentify is left out: it asserts
# QEMU 7.2's controller, which has no FDP.)
serial=$(sed 's/ *$//' /sys/class/nvme/$ctrl/serial)
size=$(($(cat /sys/block/nvme${inst}n1/size) * 512))
for t in "nvme.test TestNVMeKernel(IoctlRoundTrip|UringRoundTrip|GetLogPieces|IoctlConcurrent|UringConcurrent)\$" \
	"tools-vmtest-probe.test TestVM(IdentifyController|IdentifyNamespace|BlockDeviceSize|NVMeCLIAgrees|RbctlIdentifyAgrees)\$"; do
	bin=/tests/${t%% *}
	[ -x "$bin" ] || continue
	RBCTL_TEST_NVME_CTRL=/dev/$ctrl RBCTL_TEST_NVME_NS=$ng RBCTL_TEST_NVME_BLK=/dev/nvme${inst}n1 \
		RBCTL_TEST_NVME_SERIAL=$serial RBCTL_TEST_NVME_SIZE=$size RBCTL_TEST_NULLB= RBCTL_TEST_RBCTL=/bin/rbctl \
		$bin -test.v -test.timeout 120s -test.run "${t#* }" </dev/null >/tmp/kt.log 2>&1
	r=$?
	grep -E '^(--- |ok|FAIL|PASS)' /tmp/kt.log | sed 's/^/emu-nvmetcp hook: /'
	if [ $r != 0 ]; then bad "$bin against $ctrl exit $r"; tail -n 30 /tmp/kt.log; fi
	grep -q -- '^--- PASS' /tmp/kt.log || bad "$bin: no test passed"
done

# 7. A controller reset (the kernel disables the controller, drops every queue, connects a new
# admin queue and I/O queues) and I/O afterwards; the target must still be running.
/bin/rbctl fdp stats "$ng" -e 1 --json >/tmp/r-stats1.json 2>/dev/null
if nvme reset /dev/$ctrl 2>/tmp/err; then
	for i in $(seq 1 100); do [ "$(cat /sys/class/nvme/$ctrl/state 2>/dev/null)" = live ] && break; sleep 0.1; done
	/bin/rbctl fdp stats "$ng" -e 1 --json >/tmp/r-stats2.json 2>/tmp/err || bad "rbctl fdp stats after reset: $(cat /tmp/err)"
	[ -n "$(json_num /tmp/r-stats2.json hbmw)" ] && [ "$(json_num /tmp/r-stats2.json hbmw)" = "$(json_num /tmp/r-stats1.json hbmw)" ] ||
		bad "HBMW $(json_num /tmp/r-stats1.json hbmw) before a reset, $(json_num /tmp/r-stats2.json hbmw) after"
	say "reset: now controller ID $(cat /sys/class/nvme/$ctrl/cntlid), $(cat /sys/class/nvme/$ctrl/state), HBMW $(json_num /tmp/r-stats2.json hbmw) before and after"
else
	bad "nvme reset /dev/$ctrl: $(cat /tmp/err)"
fi
kill -0 "$srv" 2>/dev/null || bad "rbctl emu serve is not running any more"

# 8. Load with faults from the kernel's initiator (issue 15): a third target with a 1 MiB
# write budget (four 256 KiB writes) and short timeouts. Four nvme-cli jobs write 256 KiB
# pieces of their own region and read each back while a controller reset drops every queue
# in the middle of their I/O, silent connections wait out the handshake timeout and
# malformed PDUs get a C2HTermReq. Afterwards every piece that was acknowledged reads back
# as written, the target still serves, and once the host is gone its process holds no more
# file descriptors than before (every connection closed).
lport=$((port + 2))
lnqn=$nqn-load
llog=/tmp/rbctl-emu-load.log
/bin/rbctl emu serve 'emu:mem?size=128M&ru=1M&ruhs=4' --listen 127.0.0.1:$lport --nqn $lnqn \
	--write-budget 1MiB --stall-timeout 3s --handshake-timeout 1s --log >$llog 2>&1 &
lsrv=$!
for i in $(seq 1 100); do grep -q '^serving' $llog 2>/dev/null && break; sleep 0.1; done
fd0=$(ls /proc/$lsrv/fd 2>/dev/null | wc -l)
lctrl=
exec 4<>/dev/nvme-fabrics
if echo "transport=tcp,traddr=127.0.0.1,trsvcid=$lport,nqn=$lnqn,nr_io_queues=2,queue_size=32" >&4 2>/tmp/err; then
	read -r reply <&4
	linst=$(echo "$reply" | sed -n 's/.*instance=\([0-9]*\).*/\1/p')
	lctrl=nvme$linst
fi
exec 4<&-
lns=/dev/nvme${linst:-X}n1
for i in $(seq 1 100); do [ -e "$lns" ] && break; sleep 0.1; done
if [ -n "$lctrl" ] && [ -e "$lns" ]; then
	load() { # JOB: 12 pieces of 256 KiB (64 blocks), each written once, read back, compared
		j=$1 i=0
		while [ $i -lt 12 ]; do
			lba=$((j * 8192 + i * 64))
			dd if=/dev/urandom of=/tmp/lp$j.$i bs=65536 count=4 2>/dev/null
			if nvme write $lns -s $lba -c 63 -z 262144 -d /tmp/lp$j.$i >/dev/null 2>&1; then
				echo $i >>/tmp/lacked$j
				nvme read $lns -s $lba -c 63 -z 262144 -d /tmp/lb$j >/dev/null 2>&1 && ! cmp -s /tmp/lp$j.$i /tmp/lb$j &&
					echo "$j.$i" >>/tmp/lwrong
			fi
			i=$((i + 1))
		done
	}
	rm -f /tmp/lacked* /tmp/lwrong /tmp/garb*
	pids=
	for j in 0 1 2 3; do load $j & pids="$pids $!"; done
	sleep 1
	nsilent=0 ngarb=0
	if command -v nc >/dev/null 2>&1; then
		for k in $(seq 1 16); do (sleep 4 | nc 127.0.0.1 $lport >/dev/null 2>&1) & pids="$pids $!"; nsilent=$((nsilent + 1)); done
		# ICReq, then a capsule with PLEN 4 GiB: C2HTermReq FES 0x05 (data limit).
		for k in 1 2 3 4; do
			( (printf '\000\000\200\000\200\000\000\000'; head -c 120 /dev/zero; printf '\004\000\110\000\377\377\377\377'; sleep 2) |
				nc 127.0.0.1 $lport >/tmp/garb$k 2>/dev/null) & pids="$pids $!"; ngarb=$((ngarb + 1))
		done
	fi
	nvme reset /dev/$lctrl 2>/tmp/err || bad "load: nvme reset /dev/$lctrl: $(cat /tmp/err)"
	for p in $pids; do wait $p; done
	for i in $(seq 1 100); do [ "$(cat /sys/class/nvme/$lctrl/state 2>/dev/null)" = live ] && break; sleep 0.1; done
	acked=0 wrong=0
	for j in 0 1 2 3; do
		for i in $(cat /tmp/lacked$j 2>/dev/null); do
			acked=$((acked + 1))
			nvme read $lns -s $((j * 8192 + i * 64)) -c 63 -z 262144 -d /tmp/lb >/dev/null 2>&1 && cmp -s /tmp/lp$j.$i /tmp/lb ||
				{ wrong=$((wrong + 1)); bad "load: piece $j.$i acknowledged, reads back different"; }
		done
	done
	[ -s /tmp/lwrong ] && bad "load: read-back right after a write differed: $(cat /tmp/lwrong | tr '\n' ' ')"
	term=0
	for k in $(seq 1 $ngarb); do [ "$(od -An -tx1 -N1 -j128 /tmp/garb$k 2>/dev/null | tr -d ' ')" = 03 ] && term=$((term + 1)); done
	[ $term = $ngarb ] || bad "load: $term of $ngarb malformed capsules got a C2HTermReq"
	[ $acked -ge 24 ] || bad "load: only $acked of 48 writes acknowledged"
	echo 1 >/sys/class/nvme/$lctrl/delete_controller 2>/dev/null
	for i in $(seq 1 50); do [ "$(ls /proc/$lsrv/fd | wc -l)" -le "$fd0" ] && break; sleep 0.1; done
	fd1=$(ls /proc/$lsrv/fd | wc -l)
	[ "$fd1" -le "$fd0" ] || bad "load: the target holds $fd1 descriptors after the host left, $fd0 before"
	hs=$(grep -c 'not completed in time' $llog)
	[ "$hs" -ge "$nsilent" ] || bad "load: $hs handshake timeouts logged for $nsilent silent connections"
	say "load: 4 jobs, $acked of 48 256-KiB writes acknowledged and read back equal ($wrong wrong) across a reset; $nsilent silent connections closed ($hs handshake timeouts), $term/$ngarb malformed capsules answered with C2HTermReq; target fds $fd0 before, $fd1 after; peak RSS $(sed -n 's/^VmHWM: *//p' /proc/$lsrv/status)"
else
	bad "load: attaching the third target failed: $(cat /tmp/err 2>/dev/null); $(dmesg | tail -n 2)"
fi
stop "$lsrv" $llog
grep -E 'panic|goroutine' $llog && bad "the load target crashed"

teardown
exit $rc
