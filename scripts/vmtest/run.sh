#!/usr/bin/env bash
# `make vmtest`: run rbctl's real-device tests against a real Linux NVMe driver and null_blk.
# Builds static Go test binaries and rbctl, packs them with busybox, nvme-cli and the kernel
# modules into an initramfs, boots Debian's kernel under qemu-system-x86_64 with an emulated
# NVMe controller, and exits with the guest's result. KVM is used only when a short probe boot
# shows it runs a guest; otherwise TCG. Every boot phase has its own watchdog (boot.sh).
# See docs/vmtest.md. Knobs (environment):
#   VMTEST_PKGS="./nvme ./engine"  packages to test (default: scripts/vmtest/packages plus every
#                                  package whose tests reach an RBCTL_TEST_* variable)
#   VMTEST_RUN=REGEX               -test.run for every binary (default: scripts/vmtest/packages)
#   VMTEST_ACCEL=auto|kvm|tcg      auto (default): probe KVM, fall back to TCG; kvm|tcg: no probe
#   VMTEST_QEMU=/path/to/qemu      the QEMU binary (default: qemu-system-x86_64 in PATH)
#   VMTEST_TIMEOUT=600             seconds for one whole boot; VMTEST_TEST_TIMEOUT=300 per binary
#   VMTEST_PROBE_TIMEOUT=15        seconds for a KVM guest's first kernel line (probe and boot)
#   VMTEST_KERNEL_TIMEOUT=120 VMTEST_INIT_TIMEOUT=120 VMTEST_SETUP_TIMEOUT=180
#   VMTEST_TESTBIN_TIMEOUT=360 VMTEST_STEP_TIMEOUT=300 VMTEST_POWEROFF_TIMEOUT=60
#                                  per-phase watchdog limits in seconds (see boot.sh)
#   VMTEST_KERNEL=6.1.0-x-amd64    kernel version (default: newest /boot/vmlinuz-* with nvme.ko)
#   VMTEST_NVME_SIZE=1073741824    bytes of the emulated namespace; VMTEST_SERIAL=deadbeef
#   VMTEST_MEM=2048 VMTEST_SMP=2   guest memory (MiB) and CPUs
#   VMTEST_SCRATCH_MB=1024         size of the guest's ext2 /tmp
#   VMTEST_NO_SMOKE=1              do not build rbctl; skip the rbctl CLI smoke steps
#   VMTEST_WORK=DIR                work directory (default .cache/vmtest)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
HERE=$ROOT/scripts/vmtest
WORK=${VMTEST_WORK:-$ROOT/.cache/vmtest}
TIMEOUT=${VMTEST_TIMEOUT:-600}
TEST_TIMEOUT=${VMTEST_TEST_TIMEOUT:-300}
SERIAL=${VMTEST_SERIAL:-deadbeef}
NVME_SIZE=${VMTEST_NVME_SIZE:-1073741824}
MEM=${VMTEST_MEM:-2048}
SMP=${VMTEST_SMP:-2}
NULLB_PARAMS="memory_backed=1 discard=1 gb=1 bs=4096"
ACCEL_MODE=${VMTEST_ACCEL:-auto}
# shellcheck source=scripts/vmtest/boot.sh
. "$HERE/boot.sh"
vm_limits || exit 1
trap vm_kill_now EXIT # QEMU runs in its own session: take it down with us
trap 'exit 130' INT TERM

say() { echo "vmtest: $*"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
die() {
	echo "vmtest: FAIL: $*" >&2
	exit 1
}
# missing WHAT: a prerequisite is absent. Non-root machines skip; root (CI) must have it,
# because scripts/setup.sh installs it.
missing() {
	if [ "$(id -u)" != 0 ]; then
		say "SKIP: $* (not root, so scripts/setup.sh could not install it)"
		exit 0
	fi
	die "$* — run 'make setup' (scripts/setup.sh) first"
}

[ "$(uname -s)" = Linux ] || {
	say "SKIP: needs Linux (this is $(uname -s))"
	exit 0
}
case $ACCEL_MODE in auto | kvm | tcg) ;; *) die "VMTEST_ACCEL=$ACCEL_MODE: want auto, kvm or tcg" ;; esac
if [ -n "${VMTEST_QEMU:-}" ]; then
	QEMU=$VMTEST_QEMU
	[ -x "$QEMU" ] || die "VMTEST_QEMU=$QEMU is not an executable file"
else
	QEMU=$(command -v qemu-system-x86_64 || true)
	[ -n "$QEMU" ] || missing "qemu-system-x86_64 not found (package qemu-system-x86)"
fi
for tool in cpio gzip modinfo go setsid mkfifo; do
	command -v "$tool" >/dev/null || missing "$tool not found"
done
BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] || missing "busybox not found (package busybox-static)"

# Newest kernel image that has matching modules with the NVMe driver (the host may run a
# different kernel, so uname -r is no guide).
pick_kernel() {
	local k v
	for k in $(ls /boot/vmlinuz-* 2>/dev/null | sort -rV); do
		v=${k#/boot/vmlinuz-}
		[ -r "$k" ] || continue
		compgen -G "/lib/modules/$v/kernel/drivers/nvme/host/nvme.ko*" >/dev/null && {
			echo "$v"
			return
		}
	done
}
KVER=${VMTEST_KERNEL:-$(pick_kernel)}
[ -n "$KVER" ] || missing "no readable /boot/vmlinuz-* with /lib/modules/<ver>/.../nvme.ko (package linux-image-amd64)"
KIMG=/boot/vmlinuz-$KVER
[ -r "$KIMG" ] || missing "$KIMG not readable"

# One QEMU boot at a time on this machine, and one user of $WORK.
mkdir -p "$WORK"
LOCK=${VMTEST_LOCK:-/tmp/rbctl-vmtest.lock}
{ exec 9>>"$LOCK"; } 2>/dev/null || exec 9<"$LOCK" # another user's lock file: flock works read-only
if ! flock -n 9; then
	say "another vmtest run holds the lock; waiting"
	flock 9
fi

t_build=$(date +%s.%N)
RFS=$WORK/rootfs
rm -rf "$RFS"
mkdir -p "$RFS"/{bin,sbin,usr/bin,usr/sbin,lib/modules,tests,src,vmtest/guest.d,etc,proc,sys,dev,tmp,root}

# --- busybox, nvme-cli (with its shared libraries) -----------------------------------------
# copy_bin SRC DEST: copy an executable and, if it is dynamic, every library ldd names, at the
# same paths.
copy_bin() {
	local src=$1 dst=$2 lib libs
	install -D -m 0755 "$src" "$RFS$dst"
	libs=$(ldd "$src" 2>/dev/null | grep -oE '/[^ ]+' || true) # none for a static binary
	for lib in $libs; do
		[ -e "$RFS$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$RFS$lib"
	done
}
copy_bin "$BUSYBOX" /bin/busybox
NVMECLI=$(command -v nvme || true)
if [ -n "$NVMECLI" ]; then
	copy_bin "$NVMECLI" /usr/sbin/nvme
else
	[ "$(id -u)" = 0 ] && die "nvme-cli not installed — run 'make setup'"
	say "note: nvme-cli not installed; the guest's nvme-cli steps will fail"
fi
# util-linux tools tests call with long options busybox lacks (losetup --find --show ...).
for tool in losetup blkdiscard blockdev wipefs; do
	p=$(command -v "$tool" || true)
	[ -n "$p" ] && copy_bin "$p" "$p"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$RFS/etc/passwd"
printf 'root:x:0:\n' >"$RFS/etc/group"

# --- kernel modules, dependencies first ---------------------------------------------------
MODDIR=/lib/modules/$KVER
declare -A MOD_NEED=()
MOD_ORDER=()
# add_mod NAME|ALIAS required|optional
add_mod() {
	local name=$1 need=$2 files f dep soft pre
	files=$(modinfo -k "$KVER" -F filename "$name" 2>/dev/null) || files=
	if [ -z "$files" ]; then
		[ "$need" = required ] && die "kernel module $name not found for $KVER"
		say "note: optional module $name not found for $KVER"
		return 0
	fi
	for f in $files; do
		case $f in /*) ;; *) continue ;; esac # "(builtin)"
		if [ -n "${MOD_NEED[$f]:-}" ]; then
			[ "$need" = required ] && MOD_NEED[$f]=required
			continue
		fi
		MOD_NEED[$f]=$need
		# Soft pre-dependencies (e.g. crc-t10dif wants a crct10dif implementation) are best effort.
		soft=$(modinfo -F softdep "$f" 2>/dev/null | sed -n 's/.*pre: *\([^:]*\)\( post:.*\)\{0,1\}$/\1/p')
		for pre in $soft; do add_mod "$pre" optional; done
		for dep in $(modinfo -F depends "$f" | tr , ' '); do add_mod "$dep" "$need"; done
		MOD_ORDER+=("$f")
	done
}
add_mod nvme required
add_mod null_blk required
add_mod loop required # loop + ext4: an O_DIRECT-capable /tmp (rootfs and tmpfs refuse O_DIRECT)
add_mod ext4 required
for m in nvme-tcp nvmet-tcp; do add_mod "$m" optional; done # NVMe/TCP host and target, for fabrics tests
add_mod crc32c_generic optional # CRC32C for NVMe/TCP header/data digests (guest.d/60-rbctl-emu-nvmetcp.sh)
: >"$RFS/vmtest/modules"
for f in "${MOD_ORDER[@]}"; do
	rel=${f#"$MODDIR"/}
	dst=$RFS/lib/modules/${rel%.ko*}.ko
	mkdir -p "$(dirname "$dst")"
	case $f in
	*.ko) cp "$f" "$dst" ;;
	*.ko.xz) xz -dc "$f" >"$dst" ;;
	*.ko.zst) zstd -qdc "$f" >"$dst" ;;
	*.ko.gz) gzip -dc "$f" >"$dst" ;;
	*) die "unknown module format: $f" ;;
	esac
	params=
	[ "$(basename "$dst")" = null_blk.ko ] && params=$NULLB_PARAMS
	echo "${rel%.ko*}.ko ${MOD_NEED[$f]} $params" >>"$RFS/vmtest/modules"
done

# --- Go: rbctl and the test binaries ------------------------------------------------------
export CGO_ENABLED=0
MOD=$(go list -m)
if [ "${VMTEST_NO_SMOKE:-0}" != 1 ]; then
	go build -trimpath -o "$RFS/bin/rbctl" ./cmd/rbctl || die "go build ./cmd/rbctl failed"
fi

# Selection: the packages listed in scripts/vmtest/packages, plus every package whose tests
# reach the RBCTL_TEST_* variables: in its own test files, or in the non-test files of any
# package of this module its test binary imports (a shared test helper).
select_pkgs() {
	local -A lib=() self=()
	local ip dir files tfiles deps d p f _
	while read -r p _; do
		case $p in '' | \#*) continue ;; esac
		go list -e -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' "./$p" 2>/dev/null || true
	done <"$HERE/packages"
	while IFS=$'\t' read -r ip dir files tfiles; do
		for f in $files; do grep -qs 'RBCTL_TEST_' "$dir/$f" && lib[$ip]=1 && break; done
		for f in $tfiles; do grep -qs 'RBCTL_TEST_' "$dir/$f" && self[$ip]=1 && break; done
	done < <(go list -e -f $'{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles " "}}\t{{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' ./...)
	while IFS=$'\t' read -r ip deps; do
		[[ $ip == *.test ]] || continue
		ip=${ip%.test}
		if [ -n "${self[$ip]:-}" ]; then
			echo "$ip"
			continue
		fi
		for d in ${deps//,/ }; do
			if [ -n "${lib[$d]:-}" ]; then
				echo "$ip"
				break
			fi
		done
	done < <(go list -e -test -f $'{{.ImportPath}}\t{{join .Deps ","}}' ./... | sed 's/ \[[^],]*\]//g')
}
if [ -n "${VMTEST_PKGS:-}" ]; then
	# shellcheck disable=SC2086 # a list of patterns
	mapfile -t PKGS < <(go list -e $VMTEST_PKGS)
else
	mapfile -t PKGS < <(select_pkgs | sort -u)
fi
[ ${#PKGS[@]} -gt 0 ] || say "note: no package has VM tests yet; only the smoke steps run"

# filter_for REL: the -test.run regex for a package ("-" = all tests).
filter_for() {
	local rel=$1 p re
	if [ -n "${VMTEST_RUN:-}" ]; then
		echo "$VMTEST_RUN"
		return
	fi
	while read -r p re; do
		case $p in '' | \#*) continue ;; esac
		[ "$p" = "$rel" ] && [ -n "$re" ] && {
			echo "$re"
			return
		}
	done <"$HERE/packages"
	echo -
}
: >"$RFS/vmtest/tests"
for ip in "${PKGS[@]}"; do
	rel=${ip#"$MOD"}
	rel=${rel#/}
	[ -n "$rel" ] || rel=.
	name=$(echo "${rel//\//-}" | tr -c 'A-Za-z0-9_.\n-' _).test
	[ "$rel" = . ] && name=root.test
	out=$RFS/tests/$name
	re=$(filter_for "$rel")
	dir=$(go list -e -f '{{.Dir}}' "$ip")
	names=$(sed -n 's/^func \(\(Test\|Fuzz\)[A-Za-z0-9_]*\)(.*/\1/p' "$dir"/*_test.go 2>/dev/null || true)
	if [ "$re" != - ] && [ -z "${VMTEST_RUN:-}" ] && ! grep -qE -- "$re" <<<"$names"; then
		say "note: $rel has no test matching '$re' (scripts/vmtest/packages); not run"
		continue
	fi
	go test -c -vet=off -trimpath -o "$out" "$ip" || die "go test -c $ip failed"
	[ -f "$out" ] || continue # no test files
	[ -d "$dir/testdata" ] && mkdir -p "$RFS/src/$rel" && cp -a "$dir/testdata" "$RFS/src/$rel/"
	echo "$name $rel $re" >>"$RFS/vmtest/tests"
done

# --- config, init, hooks, pack ------------------------------------------------------------
cat >"$RFS/vmtest/config" <<EOF
RBCTL_TEST_NVME_CTRL=/dev/nvme0
RBCTL_TEST_NVME_NS=/dev/ng0n1
RBCTL_TEST_NVME_BLK=/dev/nvme0n1
RBCTL_TEST_NULLB=/dev/nullb0
RBCTL_TEST_NVME_SERIAL=$SERIAL
RBCTL_TEST_NVME_SIZE=$NVME_SIZE
DEVICES="/dev/nvme0 /dev/ng0n1 /dev/nvme0n1 /dev/nullb0"
DEVICE_WAIT_S=60
TEST_TIMEOUT_S=$TEST_TIMEOUT
SMOKE_LINES=25
SCRATCH_MB=${VMTEST_SCRATCH_MB:-1024}
NO_SMOKE=${VMTEST_NO_SMOKE:-0}
EOF
install -m 0755 "$HERE/init.sh" "$RFS/init"
for h in "$HERE"/guest.d/*.sh; do [ -e "$h" ] && install -m 0755 "$h" "$RFS/vmtest/guest.d/"; done
(cd "$RFS" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) | gzip -1 >"$WORK/initrd.gz"
t_boot=$(date +%s.%N)
say "kernel $KVER; test packages: $(awk '{print $2}' "$RFS/vmtest/tests" | tr '\n' ' ')"
say "initramfs $(du -m "$WORK/initrd.gz" | cut -f1) MiB, built in $(elapsed "$t_build" "$t_boot") s"

# --- accelerator: a /dev/kvm that opens is no promise that KVM runs a guest ----------------
if [ "$ACCEL_MODE" = auto ]; then
	vm_probe_kvm "$QEMU" "$KIMG" "$WORK/probe.log"
	ACCEL=tcg
	[ "$VM_PROBE_OK" = 1 ] && ACCEL=kvm
	ACCEL_WHY=$VM_PROBE_WHY
else
	ACCEL=$ACCEL_MODE
	ACCEL_WHY="VMTEST_ACCEL=$ACCEL_MODE, not probed"
fi
say "accelerator: $ACCEL ($ACCEL_WHY)"

# --- boot -----------------------------------------------------------------------------------
LOG=$WORK/console.log
boot() {
	local cpu=max
	[ "$ACCEL" = kvm ] && cpu=host
	rm -f "$WORK/nvme.img"
	truncate -s "$NVME_SIZE" "$WORK/nvme.img"
	say "booting $ACCEL guest (-m $MEM -smp $SMP; watchdog: first kernel line $([ "$ACCEL" = kvm ] && echo "$VM_PROBE_TIMEOUT" || echo "$VM_KERNEL_TIMEOUT") s, init $VM_INIT_TIMEOUT s, setup $VM_SETUP_TIMEOUT s, each test binary $VM_TESTBIN_TIMEOUT s, each step $VM_STEP_TIMEOUT s, whole boot ${TIMEOUT} s); console also in $LOG"
	vm_boot boot "$ACCEL" "$LOG" "$QEMU" -m "$MEM" -smp "$SMP" -accel "$ACCEL" -cpu "$cpu" \
		-nographic -no-reboot -kernel "$KIMG" -initrd "$WORK/initrd.gz" -append "$VM_APPEND" \
		-drive "file=$WORK/nvme.img,if=none,id=nvm,format=raw" -device "nvme,serial=$SERIAL,drive=nvm" \
		-nic none
	wall=$(vm_secs "$VM_WALL_US")
}
boot
# A KVM guest that never reaches its kernel (it stalls after "Booting from ROM...", or QEMU
# aborts at once: "failed to set MSR 0x10a") has run nothing yet, so boot again under TCG
# rather than fail the suite — unless KVM was asked for by name.
if [ "$ACCEL" = kvm ] && [ "$ACCEL_MODE" = auto ] && [ "$VM_PHASE" = firmware ] && [ "$VM_END" != timeout ]; then
	if [ "$VM_END" = stall ]; then
		vm_stall_report "$LOG"
		why="KVM boot stalled before the kernel's first line (${VM_PROBE_TIMEOUT} s) although the probe passed"
	else
		why="KVM boot: QEMU exited $VM_QRC after ${wall} s before the kernel's first line (${VM_LAST:0:120})"
	fi
	say "$why; retrying under TCG"
	ACCEL=tcg
	ACCEL_WHY="$why; retried under TCG"
	boot
fi
echo
say "---- summary ($LOG) ----"
say "  accelerator: $ACCEL ($ACCEL_WHY)"
grep -aE '^VMTEST (PASS|FAIL|SKIP|skipped|failed)' "$LOG" | sed 's/^/vmtest:   /' || true
res=$VM_RESULT
case $VM_END in
stall)
	if [ -n "$res" ]; then
		say "note: the guest gave its result but did not power off within ${VM_PHASE_LIMIT} s ($VM_PHASE_KNOB); killed QEMU"
	else
		vm_stall_report "$LOG"
		die "guest stalled in phase $VM_PHASE ($VM_PHASE_DESC, over ${VM_PHASE_LIMIT} s, ${wall} s after QEMU started, $ACCEL)"
	fi
	;;
timeout) why="timed out after ${TIMEOUT} s (VMTEST_TIMEOUT) in phase $VM_PHASE" ;;
*) why="QEMU exited $VM_QRC in phase $VM_PHASE" ;;
esac
if [ -z "$res" ]; then
	say "no result marker ($why); last console lines:"
	tail -n 40 "$LOG" | sed 's/^/vmtest: | /'
	die "guest gave no result ($why, ${wall} s, $ACCEL)"
fi
if [ "$res" != 0 ]; then
	die "$res guest step(s) failed (boot-to-result ${wall} s, $ACCEL)"
fi
say "PASS (boot-to-result ${wall} s, kernel $KVER, $ACCEL)"
