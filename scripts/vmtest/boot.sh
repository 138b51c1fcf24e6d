# shellcheck shell=bash
# Sourced by scripts/vmtest/run.sh (and by tools/vmtest's tests): runs QEMU under a
# per-phase watchdog, and probes whether KVM can really run a guest. See docs/vmtest.md.
#
# A boot is a sequence of phases, each ended by a console line and each with its own limit:
#   firmware  QEMU start -> the guest kernel's first console line ("Linux version")
#             limit VMTEST_PROBE_TIMEOUT under KVM, VMTEST_KERNEL_TIMEOUT under TCG
#   kernel    -> "VMTEST guest:" (init.sh's first line)            VMTEST_INIT_TIMEOUT
#   setup     -> the first step (modules, scratch /tmp, devices)    VMTEST_SETUP_TIMEOUT
#   test:BIN  "=== VMTEST RUN BIN" -> its "VMTEST PASS|FAIL" line   VMTEST_TESTBIN_TIMEOUT
#   step:NAME "=== VMTEST STEP NAME" -> its result line              VMTEST_STEP_TIMEOUT
#   between   a step's result line -> the next step's start         VMTEST_STEP_TIMEOUT
#   poweroff  "RBCTL-VMTEST-RESULT:" -> QEMU exits                  VMTEST_POWEROFF_TIMEOUT
# plus VMTEST_TIMEOUT for the whole boot. A phase that outlives its limit is a stall: QEMU is
# killed and the phase is named. The test-binary limit (default VMTEST_TEST_TIMEOUT + 60) sits
# above the guest's own -test.timeout so that Go's timeout, with its goroutine dump, fires
# first.

shopt -s extglob # vm_clean's pattern

# Kernel command lines: no `quiet`, so the kernel's "Linux version" banner (a notice) reaches
# the console as soon as the serial console is up and ends the firmware phase; loglevel=6
# keeps info-level chatter off (init.sh lowers the level again before any test runs). The
# probe adds earlyprintk, which prints the banner earliest of all.
VM_APPEND="console=ttyS0 loglevel=6 panic=-1"
VM_PROBE_APPEND="console=ttyS0 earlyprintk=serial,ttyS0 loglevel=6 panic=-1"
VM_QPID=

# vm_limits: read the limit knobs into VM_*_TIMEOUT, after checking that each one set is
# whole seconds above 0 (bash arithmetic would read "abc" as 0: a stall at once). Prints the
# first bad one and returns 1. Call it before vm_boot.
vm_limits() {
	local n v
	for n in VMTEST_TIMEOUT VMTEST_TEST_TIMEOUT VMTEST_PROBE_TIMEOUT VMTEST_KERNEL_TIMEOUT \
		VMTEST_INIT_TIMEOUT VMTEST_SETUP_TIMEOUT VMTEST_TESTBIN_TIMEOUT VMTEST_STEP_TIMEOUT \
		VMTEST_POWEROFF_TIMEOUT; do
		v=${!n-}
		[ -z "$v" ] && continue
		case $v in
		*[!0-9]* | 0*) ;;
		*) continue ;;
		esac
		echo "vmtest: FAIL: $n=$v: want whole seconds above 0" >&2
		return 1
	done
	VM_PROBE_TIMEOUT=${VMTEST_PROBE_TIMEOUT:-15}
	VM_KERNEL_TIMEOUT=${VMTEST_KERNEL_TIMEOUT:-120}
	VM_INIT_TIMEOUT=${VMTEST_INIT_TIMEOUT:-120}
	VM_SETUP_TIMEOUT=${VMTEST_SETUP_TIMEOUT:-180}
	VM_TESTBIN_TIMEOUT=${VMTEST_TESTBIN_TIMEOUT:-$((${VMTEST_TEST_TIMEOUT:-300} + 60))}
	VM_STEP_TIMEOUT=${VMTEST_STEP_TIMEOUT:-300}
	VM_POWEROFF_TIMEOUT=${VMTEST_POWEROFF_TIMEOUT:-60}
	VM_TOTAL_TIMEOUT=${VMTEST_TIMEOUT:-600}
}

vm_now_us() { VM_NOW=${EPOCHREALTIME//[!0-9]/}; }
# vm_secs US: microseconds as seconds with one decimal.
vm_secs() { printf '%d.%d' $(($1 / 1000000)) $(($1 % 1000000 / 100000)); }

# vm_phase ID [NAME]: enter a phase (sets VM_PHASE, VM_PHASE_DESC, VM_PHASE_LIMIT,
# VM_PHASE_KNOB and restarts the phase clock).
vm_phase() {
	VM_PHASE=$1
	case $1 in
	firmware)
		VM_PHASE_DESC="QEMU start -> first kernel console line ('Linux version')"
		if [ "$VM_ACCEL" = kvm ]; then
			VM_PHASE_LIMIT=$VM_PROBE_TIMEOUT VM_PHASE_KNOB=VMTEST_PROBE_TIMEOUT
		else
			VM_PHASE_LIMIT=$VM_KERNEL_TIMEOUT VM_PHASE_KNOB=VMTEST_KERNEL_TIMEOUT
		fi
		;;
	kernel)
		VM_PHASE_DESC="kernel -> init started ('VMTEST guest:' line)"
		VM_PHASE_LIMIT=$VM_INIT_TIMEOUT VM_PHASE_KNOB=VMTEST_INIT_TIMEOUT
		;;
	setup)
		VM_PHASE_DESC="init -> first step (modules, scratch /tmp, devices)"
		VM_PHASE_LIMIT=$VM_SETUP_TIMEOUT VM_PHASE_KNOB=VMTEST_SETUP_TIMEOUT
		;;
	test)
		VM_PHASE="test:$2"
		VM_PHASE_DESC="test binary $2 (start -> finish)"
		VM_PHASE_LIMIT=$VM_TESTBIN_TIMEOUT VM_PHASE_KNOB=VMTEST_TESTBIN_TIMEOUT
		;;
	step)
		VM_PHASE="step:$2"
		VM_PHASE_DESC="step $2 (start -> finish)"
		VM_PHASE_LIMIT=$VM_STEP_TIMEOUT VM_PHASE_KNOB=VMTEST_STEP_TIMEOUT
		;;
	between)
		VM_PHASE_DESC="after step '$2' -> next step"
		VM_PHASE_LIMIT=$VM_STEP_TIMEOUT VM_PHASE_KNOB=VMTEST_STEP_TIMEOUT
		;;
	poweroff)
		VM_PHASE_DESC="result marker -> QEMU exit (poweroff)"
		VM_PHASE_LIMIT=$VM_POWEROFF_TIMEOUT VM_PHASE_KNOB=VMTEST_POWEROFF_TIMEOUT
		;;
	esac
	vm_now_us
	VM_PHASE_T0=$VM_NOW
}

# vm_line LINE: move the phase machine on for one console line. Phases only move forward
# through the boot; after init starts, every step marker starts a new phase.
vm_line() {
	local l=$1 rest
	case $VM_PHASE in
	firmware)
		case $l in *"Linux version "[0-9]*)
			vm_now_us
			VM_KERNEL_AT=$((VM_NOW - VM_T0))
			vm_phase kernel
			;;
		esac
		return
		;;
	kernel)
		case $l in "VMTEST guest: "*) vm_phase setup ;; esac
		return
		;;
	poweroff) return ;;
	esac
	case $l in
	"=== VMTEST RUN "*)
		rest=${l#=== VMTEST RUN }
		vm_phase test "${rest%% *}"
		;;
	"=== VMTEST STEP "*) vm_phase step "${l#=== VMTEST STEP }" ;;
	"VMTEST PASS "* | "VMTEST FAIL "* | "VMTEST SKIP "*)
		rest=${l#VMTEST * }
		rest=${rest%%: *}
		vm_phase between "${rest%% (*}"
		;;
	"RBCTL-VMTEST-RESULT: "*)
		rest=${l#RBCTL-VMTEST-RESULT: }
		VM_RESULT=${rest%% *}
		vm_phase poweroff
		;;
	esac
}

# vm_clean LINE: the console line without CR and terminal control sequences (SeaBIOS and
# the kernel clear the screen), into VM_CLEAN.
vm_clean() {
	local l=${1//$'\r'/}
	l=${l//$'\e'c/}
	VM_CLEAN=${l//$'\e'\[*([0-9;?])[A-Za-z]/}
}

# vm_note_last: remember VM_CLEAN as the last console line worth quoting (one with some
# text: SeaBIOS's doubled output leaves fragments such as "k" on a line of their own).
vm_note_last() {
	local t=${VM_CLEAN//[[:space:]]/}
	if [ ${#t} -ge 4 ]; then VM_LAST=$VM_CLEAN; fi
}

# vm_kill_now: SIGKILL QEMU's whole process group (it runs in its own session); for traps.
vm_kill_now() {
	[ -n "$VM_QPID" ] || return 0
	kill -KILL -- "-$VM_QPID" 2>/dev/null || kill -KILL "$VM_QPID" 2>/dev/null || true
}

# vm_boot MODE ACCEL LOG QEMU-COMMAND...: run QEMU with its console on a FIFO, watched
# phase by phase. MODE "boot" copies the console to stdout and LOG; MODE "probe" writes LOG
# only and stops QEMU as soon as the kernel's first line appears. Sets:
#   VM_END     kernel (probe saw the kernel) | exit (QEMU exited) | stall (a phase outlived
#              its limit) | timeout (VMTEST_TIMEOUT for the whole boot passed)
#   VM_PHASE, VM_PHASE_DESC, VM_PHASE_LIMIT, VM_PHASE_KNOB   the phase it ended in
#   VM_QRC     QEMU's exit status (143/137 when killed); VM_WALL_US   QEMU start to end
#   VM_KERNEL_AT  microseconds to the kernel's first line (empty if none)
#   VM_RESULT  the guest's RBCTL-VMTEST-RESULT number (empty if none)
#   VM_LAST    the last console line with some text before the end (before any kill)
vm_boot() {
	local mode=$1 log=$3 fifo=$3.fifo fd lfd line buf= left total_left t
	VM_ACCEL=$2
	shift 3
	VM_RESULT= VM_KERNEL_AT= VM_END= VM_QRC= VM_LAST=
	rm -f "$fifo"
	mkfifo "$fifo"
	: >"$log"
	exec {lfd}>>"$log"
	# Its own session, so a stall kills QEMU and anything a wrapper started, and nothing else.
	setsid "$@" </dev/null >"$fifo" 2>&1 &
	VM_QPID=$!
	exec {fd}<"$fifo"
	rm -f "$fifo"
	vm_now_us
	VM_T0=$VM_NOW
	vm_phase firmware
	while :; do
		vm_now_us
		left=$((VM_PHASE_T0 + VM_PHASE_LIMIT * 1000000 - VM_NOW))
		total_left=$((VM_T0 + VM_TOTAL_TIMEOUT * 1000000 - VM_NOW))
		if [ "$total_left" -le 0 ]; then
			VM_END=timeout
			break
		fi
		if [ "$left" -le 0 ]; then
			VM_END=stall
			break
		fi
		[ "$total_left" -lt "$left" ] && left=$total_left
		printf -v t '%d.%06d' $((left / 1000000)) $((left % 1000000))
		if IFS= read -r -t "$t" -u "$fd" line; then
			line=$buf$line
			buf=
		elif [ $? -gt 128 ]; then
			buf+=$line # timed out mid-line; the loop finds which limit passed
			continue
		else
			line=$buf$line # EOF: every writer has gone
			if [ -n "$line" ]; then
				vm_clean "$line"
				printf '%s\n' "$VM_CLEAN" >&"$lfd"
				[ "$mode" = boot ] && printf '%s\n' "$VM_CLEAN"
				vm_note_last
			fi
			VM_END=exit
			break
		fi
		vm_clean "$line"
		printf '%s\n' "$VM_CLEAN" >&"$lfd"
		[ "$mode" = boot ] && printf '%s\n' "$VM_CLEAN"
		vm_note_last
		vm_line "$VM_CLEAN"
		if [ "$mode" = probe ] && [ "$VM_PHASE" != firmware ]; then
			VM_END=kernel
			break
		fi
	done
	vm_now_us
	VM_WALL_US=$((VM_NOW - VM_T0))
	if [ -n "$buf" ]; then # a line the guest had not finished when the limit passed
		vm_clean "$buf"
		printf '%s\n' "$VM_CLEAN" >&"$lfd"
		[ "$mode" = boot ] && printf '%s\n' "$VM_CLEAN"
		vm_note_last
	fi
	if [ "$VM_END" != exit ]; then
		# Ask QEMU to stop, keep its last words for up to 3 s, then kill the whole group.
		kill -TERM -- "-$VM_QPID" 2>/dev/null || kill -TERM "$VM_QPID" 2>/dev/null || true
		vm_now_us
		t=$((VM_NOW + 3000000))
		while :; do
			if IFS= read -r -t 1 -u "$fd" line; then
				vm_clean "$line"
				printf '%s\n' "$VM_CLEAN" >&"$lfd"
				continue
			elif [ $? -le 128 ]; then
				break # EOF: QEMU and everything it started are gone
			fi
			vm_now_us
			if [ "$VM_NOW" -ge "$t" ]; then
				vm_kill_now
				break
			fi
		done
	fi
	exec {fd}<&-
	VM_QRC=0
	wait "$VM_QPID" || VM_QRC=$?
	VM_QPID=
	exec {lfd}>&-
	return 0
}

# vm_stall_report LOG: say which phase stalled and show the last console lines.
vm_stall_report() {
	echo "vmtest: STALL in phase $VM_PHASE: $VM_PHASE_DESC took over ${VM_PHASE_LIMIT} s ($VM_PHASE_KNOB); killed QEMU"
	echo "vmtest: last console lines:"
	tail -n 20 "$1" | sed 's/^/vmtest: | /'
}

# vm_fail_digest BOOT LOG: the few lines that say why BOOT failed, for repeating at the end of
# the run (CI shows only its end): the console's last lines when the guest stalled or gave no
# result, else the failure lines of its steps (a hook's own "FAIL:" lines, its skips, panics).
vm_fail_digest() {
	if [ "$VM_END" = stall ] || [ -z "$VM_RESULT" ]; then
		echo "$1: the console's last lines:"
		tail -n 12 "$2" | cut -c 1-240 | sed 's/^/  | /'
	else
		echo "$1: the console's failure lines:"
		grep -a -E '^VMTEST FAIL|FAIL:|SKIP:|^panic:' "$2" | tail -n 12 | cut -c 1-240 | sed 's/^/  | /'
	fi
}

# vm_probe_kvm QEMU KERNEL LOG: a short boot of KERNEL under KVM, no initramfs, to see
# whether KVM runs a guest at all. A /dev/kvm that opens is no proof: on some nested hosts
# the guest stops after "Booting from ROM..." and QEMU never exits; others abort at once
# ("failed to set MSR 0x10a"). Sets VM_PROBE_OK (1 when the kernel printed its first line
# within VMTEST_PROBE_TIMEOUT) and VM_PROBE_WHY (one line for the output).
vm_probe_kvm() {
	local qemu=$1 kimg=$2 log=$3 last
	vm_boot probe kvm "$log" "$qemu" -m 256 -smp 1 -accel kvm -cpu host -nographic \
		-no-reboot -kernel "$kimg" -append "$VM_PROBE_APPEND" -nic none
	VM_PROBE_OK=0
	last=${VM_LAST:0:120}
	case $VM_END in
	kernel)
		VM_PROBE_OK=1
		VM_PROBE_WHY="KVM probe boot printed the kernel's first console line after $(vm_secs "$VM_KERNEL_AT") s"
		;;
	exit)
		VM_PROBE_WHY="KVM probe boot: QEMU exited $VM_QRC after $(vm_secs "$VM_WALL_US") s before the kernel printed anything (${last:-no output})"
		;;
	*)
		VM_PROBE_WHY="KVM probe boot: no kernel console line within ${VM_PROBE_TIMEOUT} s (VMTEST_PROBE_TIMEOUT; last line: ${last:-none})"
		;;
	esac
}
