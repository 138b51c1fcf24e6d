#!/usr/bin/env bash
# `make vmtest`: run rbctl's real-device tests against a real Linux NVMe driver and null_blk,
# as a matrix of scenarios (docs/vmtest.md, "The matrix"):
#   qemu-nofdp     QEMU's plain NVMe controller, the host's kernel: the whole real-device suite
#   qemu-fdp       QEMU 10's FDP controller (8 handles, 1 reclaim group), the host's kernel
#   qemu-fdp-2rg   the same with 2 reclaim groups
#   kernel-7       a >= 6.16 kernel from trixie-backports on the FDP controller: qemu-fdp's
#                  tests and the kernel write-stream path
#   fio-fdp        trixie's fio 3.39 placing writes with --fdp, checked against rbctl
#   nvme-cli-2.13  trixie's nvme-cli 2.13 fdp plugin diffed against rbctl
# Builds static Go test binaries and rbctl once, packs them with busybox, nvme-cli and each
# kernel's modules into initramfs pieces (concatenated per boot), boots each scenario's
# kernel under qemu-system-x86_64 (scenarios with the same kernel and device share a boot),
# and exits with the matrix's result. KVM only when a short probe boot shows it runs a guest;
# otherwise TCG. Every boot phase has its own watchdog (boot.sh). Knobs (environment):
#   VMTEST_SCENARIOS="qemu-nofdp ..." scenarios to run (default: all six above; with
#                                  VMTEST_PKGS set, qemu-nofdp only)
#   VMTEST_PKGS="./nvme ./engine"  packages to test in qemu-nofdp (default: scripts/vmtest/packages
#                                  plus every package whose tests reach an RBCTL_TEST_* variable)
#   VMTEST_RUN=REGEX               -test.run for every binary (default: packages / scenarios files)
#   VMTEST_HOOKS=REGEX             only the guest.d hooks whose file names match (default: all)
#   VMTEST_ACCEL=auto|kvm|tcg      auto (default): probe KVM, fall back to TCG; kvm|tcg: no probe
#   VMTEST_QEMU=/path/to/qemu      the QEMU binary (default: qemu-system-x86_64 in PATH)
#   VMTEST_TIMEOUT=600             seconds for one whole boot; VMTEST_TEST_TIMEOUT=300 per binary
#   VMTEST_PROBE_TIMEOUT=15        seconds for a KVM guest's first kernel line (probe and boot)
#   VMTEST_KERNEL_TIMEOUT=120 VMTEST_INIT_TIMEOUT=120 VMTEST_SETUP_TIMEOUT=180
#   VMTEST_TESTBIN_TIMEOUT=360 VMTEST_STEP_TIMEOUT=300 VMTEST_POWEROFF_TIMEOUT=60
#                                  per-phase watchdog limits in seconds (see boot.sh)
#   VMTEST_KERNEL=6.1.0-x-amd64    host kernel version (default: newest /boot/vmlinuz-* with nvme.ko)
#   VMTEST_NVME_SIZE=1073741824    bytes of the emulated namespace; VMTEST_SERIAL=deadbeef
#   VMTEST_FDP_NRUH=8              FDP reclaim unit handles; VMTEST_FDP_RUNS=96M (QEMU's default)
#   VMTEST_MEM=2048 VMTEST_SMP=2   guest memory (MiB) and CPUs
#   VMTEST_SCRATCH_MB=1024         size of the guest's ext2 /tmp
#   VMTEST_NO_SMOKE=1              do not build rbctl; skip the rbctl CLI smoke steps
#   VMTEST_WORK=DIR                work directory (default .cache/vmtest); guest downloads are
#                                  cached in VMTEST_GUEST_CACHE (default .cache/vmtest-guest)
#   VMTEST_MIRROR=URL              Debian mirror for guest downloads (default deb.debian.org)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
HERE=$ROOT/scripts/vmtest
WORK=${VMTEST_WORK:-$ROOT/.cache/vmtest}
GCACHE=${VMTEST_GUEST_CACHE:-$ROOT/.cache/vmtest-guest}
TIMEOUT=${VMTEST_TIMEOUT:-600}
TEST_TIMEOUT=${VMTEST_TEST_TIMEOUT:-300}
SERIAL=${VMTEST_SERIAL:-deadbeef}
NVME_SIZE=${VMTEST_NVME_SIZE:-1073741824}
FDP_NRUH=${VMTEST_FDP_NRUH:-8}
FDP_RUNS=${VMTEST_FDP_RUNS:-96M}
MEM=${VMTEST_MEM:-2048}
SMP=${VMTEST_SMP:-2}
NULLB_PARAMS="memory_backed=1 discard=1 gb=1 bs=4096"
ACCEL_MODE=${VMTEST_ACCEL:-auto}
ALL_SCENARIOS="qemu-nofdp qemu-fdp qemu-fdp-2rg kernel-7 fio-fdp nvme-cli-2.13"
if [ -n "${VMTEST_SCENARIOS:-}" ]; then
	SCENARIOS=$VMTEST_SCENARIOS
elif [ -n "${VMTEST_PKGS:-}" ]; then
	SCENARIOS=qemu-nofdp
else
	SCENARIOS=$ALL_SCENARIOS
fi
# shellcheck source=scripts/vmtest/boot.sh
. "$HERE/boot.sh"
# shellcheck source=scripts/vmtest/guest-apt.sh
. "$HERE/guest-apt.sh"
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
T_START=$(date +%s.%N)

[ "$(uname -s)" = Linux ] || {
	say "SKIP: needs Linux (this is $(uname -s))"
	exit 0
}
case $ACCEL_MODE in auto | kvm | tcg) ;; *) die "VMTEST_ACCEL=$ACCEL_MODE: want auto, kvm or tcg" ;; esac
for s in $SCENARIOS; do
	case " $ALL_SCENARIOS " in *" $s "*) ;; *) die "VMTEST_SCENARIOS: unknown scenario '$s' (known: $ALL_SCENARIOS)" ;; esac
done
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
QEMU_VER=$("$QEMU" --version 2>/dev/null | sed -n '1s/.*version \([0-9][0-9.]*\).*/\1/p')
QEMU_VER=${QEMU_VER:-?}
# FDP needs QEMU >= 8 (nvme-subsys fdp=on); setup.sh installs 10 from bookworm-backports.
needs_fdp=0
for s in $SCENARIOS; do [ "$s" != qemu-nofdp ] && needs_fdp=1; done
if [ $needs_fdp = 1 ] && ! "$QEMU" -device nvme-subsys,help 2>/dev/null | grep -q 'fdp='; then
	missing "QEMU $QEMU_VER has no NVMe FDP (nvme-subsys fdp=on); the FDP scenarios need QEMU 10 (package qemu-system-x86 from bookworm-backports)"
fi

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
HOST_KVER=${VMTEST_KERNEL:-$(pick_kernel)}
[ -n "$HOST_KVER" ] || missing "no readable /boot/vmlinuz-* with /lib/modules/<ver>/.../nvme.ko (package linux-image-amd64)"
HOST_KIMG=/boot/vmlinuz-$HOST_KVER
[ -r "$HOST_KIMG" ] || missing "$HOST_KIMG not readable"

# --- scenarios -> boots ---------------------------------------------------------------------
# scen_boot SCENARIO: the boot it runs in. A boot is a kernel, a QEMU device and an optional
# userland overlay; scenarios that share one run one after another in the same guest.
scen_boot() {
	case $1 in
	qemu-nofdp) echo host-plain ;;
	qemu-fdp) echo host-fdp1 ;;
	qemu-fdp-2rg) echo host-fdp2 ;;
	kernel-7 | fio-fdp | nvme-cli-2.13) echo k7-fdp1 ;;
	esac
}
BOOTS=()
for s in $SCENARIOS; do
	b=$(scen_boot "$s")
	case " ${BOOTS[*]} " in *" $b "*) ;; *) BOOTS+=("$b") ;; esac
done
need_k7=0 need_userland=0
for s in $SCENARIOS; do
	case $s in kernel-7 | fio-fdp | nvme-cli-2.13) need_k7=1 ;; esac
	case $s in fio-fdp | nvme-cli-2.13) need_userland=1 ;; esac
done

# One QEMU boot at a time on this machine, and one user of $WORK.
mkdir -p "$WORK"
LOCK=${VMTEST_LOCK:-/tmp/rbctl-vmtest.lock}
{ exec 9>>"$LOCK"; } 2>/dev/null || exec 9<"$LOCK" # another user's lock file: flock works read-only
if ! flock -n 9; then
	say "another vmtest run holds the lock; waiting"
	flock 9
fi

# --- guest downloads (cached): a >= 6.16 kernel, trixie's fio and nvme-cli -----------------
t_fetch=$(date +%s.%N)
K7_KVER= K7_KIMG= K7_KBASE= UROOT= UWHY=
if [ $need_k7 = 1 ]; then
	if [ "$(id -u)" != 0 ] && [ ! -e "$GCACHE/kernel" ]; then
		missing "the kernel-7 scenarios download a kernel with a private apt configuration (needs root)"
	fi
	flog=$WORK/guest-fetch.log
	: >"$flog"
	ga_init "$GCACHE" >>"$flog" 2>&1 || die "guest downloads (private apt configuration): $(tail -3 "$flog" | tr '\n' ' ')"
	t1=$(date +%s.%N)
	ga_kernel >>"$flog" 2>&1 || die "guest kernel: $(tail -3 "$flog" | tr '\n' ' ')"
	K7_KVER=$GA_KVER K7_KIMG=$GA_KIMG K7_KBASE=$GA_KBASE
	t2=$(date +%s.%N)
	say "guest kernel $K7_KVER ($GA_KWHY; $(elapsed "$t1" "$t2") s; cached in ${GCACHE#"$ROOT"/})"
	if [ $need_userland = 1 ]; then
		ga_userland >>"$flog" 2>&1 || die "guest userland (trixie fio, nvme-cli): $(tail -3 "$flog" | tr '\n' ' ')"
		UROOT=$GA_UROOT UWHY=$GA_UWHY
		say "guest userland: $UWHY(trixie, relocated to /opt/trixie; $(elapsed "$t2" "$(date +%s.%N)") s; cached)"
	fi
	say "guest downloads ready in $(elapsed "$t_fetch" "$(date +%s.%N)") s"
fi

# --- base: busybox, nvme-cli (with its shared libraries), util-linux, rbctl -----------------
t_build=$(date +%s.%N)
PIECES=$WORK/pieces
rm -rf "$WORK/rootfs" "$PIECES"
mkdir -p "$PIECES"
# pack DIR OUT: a newc archive of DIR (root-owned, sorted), gzip -1.
pack() { (cd "$1" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) | gzip -1 >"$2"; }
RFS=$WORK/rootfs/base
mkdir -p "$RFS"/{bin,sbin,usr/bin,usr/sbin,lib/modules,tests,src,vmtest/guest.d,etc,proc,sys,dev,tmp,root}
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
install -m 0755 "$HERE/init.sh" "$RFS/init"
for h in "$HERE"/guest.d/*.sh; do
	[ -e "$h" ] || continue
	[ -n "${VMTEST_HOOKS:-}" ] && ! [[ $(basename "$h") =~ $VMTEST_HOOKS ]] && continue
	install -m 0755 "$h" "$RFS/vmtest/guest.d/"
done
export CGO_ENABLED=0
MOD=$(go list -m)
if [ "${VMTEST_NO_SMOKE:-0}" != 1 ]; then
	# The same version stamp as `make build` (rbctl version in the guest names the commit).
	clipkg=github.com/rbctl/rbctl/cmd/rbctl/internal/cli
	vflags="-X $clipkg.Version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)"
	vflags+=" -X $clipkg.Commit=$(git rev-parse HEAD 2>/dev/null) -X $clipkg.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	go build -trimpath -ldflags "$vflags" -o "$RFS/bin/rbctl" ./cmd/rbctl || die "go build ./cmd/rbctl failed"
fi

# --- kernel modules, dependencies first, one piece per kernel ------------------------------
# mods_piece KVER BASE OUT: the modules (decompressed) and the load list /vmtest/modules.
mods_piece() {
	local kver=$1 base=$2 out=$3 dir=$WORK/rootfs/mods-$1 moddir=$2/lib/modules/$1 f rel dst params
	declare -gA MOD_NEED=()
	MOD_ORDER=()
	MK=$kver MB=$base
	add_mod nvme required
	add_mod null_blk required
	add_mod loop required # loop + ext4: an O_DIRECT-capable /tmp (rootfs and tmpfs refuse O_DIRECT)
	add_mod ext4 required
	for m in nvme-tcp nvmet-tcp; do add_mod "$m" optional; done # NVMe/TCP host and target, for fabrics tests
	add_mod crc32c_generic optional                              # CRC32C for NVMe/TCP digests (guest.d/60-rbctl-emu-nvmetcp.sh)
	mkdir -p "$dir/vmtest"
	: >"$dir/vmtest/modules"
	for f in "${MOD_ORDER[@]}"; do
		rel=${f#"$moddir"/}
		dst=$dir/lib/modules/${rel%.ko*}.ko
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
		echo "${rel%.ko*}.ko ${MOD_NEED[$f]} $params" >>"$dir/vmtest/modules"
	done
	pack "$dir" "$out"
}
# add_mod NAME|ALIAS required|optional (for kernel $MK under module base $MB)
add_mod() {
	local name=$1 need=$2 files f dep soft pre
	files=$(modinfo -b "$MB" -k "$MK" -F filename "$name" 2>/dev/null) || files=
	if [ -z "$files" ]; then
		[ "$need" = required ] && die "kernel module $name not found for $MK"
		say "note: optional module $name not found for $MK"
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

# --- Go: the test binaries of every scenario -------------------------------------------------
# Selection for qemu-nofdp: the packages listed in scripts/vmtest/packages, plus every package
# whose tests reach the RBCTL_TEST_* variables: in its own test files, or in the non-test files
# of any package of this module its test binary imports (a shared test helper).
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
# filter_for REL: the -test.run regex for a qemu-nofdp package ("-" = all tests).
filter_for() {
	local rel=$1 p re
	while read -r p re; do
		case $p in '' | \#*) continue ;; esac
		[ "$p" = "$rel" ] && [ -n "$re" ] && {
			echo "$re"
			return
		}
	done <"$HERE/packages"
	echo -
}
# scen_tests SCENARIO: "<rel> <regex>" lines from scripts/vmtest/scenarios (@ includes).
scen_tests() {
	local s=$1 depth=${2:-0} sc p re
	[ "$depth" -lt 5 ] || die "scripts/vmtest/scenarios: @ includes nest too deep at $s"
	while read -r sc p re; do
		case $sc in '' | \#*) continue ;; esac
		[ "$sc" = "$s" ] || continue
		case $p in
		@*) scen_tests "${p#@}" $((depth + 1)) ;;
		*) echo "$p ${re:--}" ;;
		esac
	done <"$HERE/scenarios"
}
# PLAN lines "<scenario> <rel> <regex>", in run order.
PLAN=()
for s in $SCENARIOS; do
	if [ "$s" = qemu-nofdp ]; then
		if [ -n "${VMTEST_PKGS:-}" ]; then
			# shellcheck disable=SC2086 # a list of patterns
			mapfile -t ips < <(go list -e $VMTEST_PKGS)
		else
			mapfile -t ips < <(select_pkgs | sort -u)
		fi
		for ip in "${ips[@]}"; do
			rel=${ip#"$MOD"}
			rel=${rel#/}
			PLAN+=("$s ${rel:-.} $(filter_for "${rel:-.}")")
		done
	else
		while read -r rel re; do PLAN+=("$s $rel $re"); done < <(scen_tests "$s")
	fi
done
[ ${#PLAN[@]} -gt 0 ] || say "note: no package has VM tests yet; only the smoke steps run"
# bin_name REL: the test binary's name in the guest.
bin_name() {
	[ "$1" = . ] && {
		echo root.test
		return
	}
	echo "$(echo "${1//\//-}" | tr -c 'A-Za-z0-9_.\n-' _).test"
}
TESTS_DIR=$WORK/rootfs/tests
mkdir -p "$TESTS_DIR"
declare -A BUILT=()
KEEP_PLAN=()
for line in "${PLAN[@]}"; do
	read -r s rel re <<<"$line"
	[ -n "${VMTEST_RUN:-}" ] && re=$VMTEST_RUN
	name=$(bin_name "$rel")
	if [ -z "${BUILT[$rel]:-}" ]; then
		BUILT[$rel]=skip
		dir=$(go list -e -f '{{.Dir}}' "./$rel" 2>/dev/null || true)
		if [ -z "$dir" ] || [ ! -d "$dir" ]; then
			say "note: $rel is not in the tree; not run"
			continue
		fi
		go test -c -vet=off -trimpath -o "$TESTS_DIR/$name" "./$rel" || die "go test -c ./$rel failed"
		[ -f "$TESTS_DIR/$name" ] || continue # no test files
		BUILT[$rel]=$dir
	fi
	[ "${BUILT[$rel]}" = skip ] && continue
	names=$(sed -n 's/^func \(\(Test\|Fuzz\)[A-Za-z0-9_]*\)(.*/\1/p' "${BUILT[$rel]}"/*_test.go 2>/dev/null || true)
	if [ "$re" != - ] && [ -z "${VMTEST_RUN:-}" ] && ! grep -qE -- "$re" <<<"$names"; then
		say "note: $s: $rel has no test matching '$re'; not run"
		continue
	fi
	KEEP_PLAN+=("$s $name $rel $re")
done

# tests_piece BOOT OUT: the test binaries (and testdata) the boot's scenarios run.
tests_piece() {
	local boot=$1 out=$2 dir=$WORK/rootfs/tests-$1 line s name rel re
	mkdir -p "$dir/tests" "$dir/src"
	for line in "${KEEP_PLAN[@]}"; do
		read -r s name rel re <<<"$line"
		[ "$(scen_boot "$s")" = "$boot" ] || continue
		[ -e "$dir/tests/$name" ] && continue
		ln "$TESTS_DIR/$name" "$dir/tests/$name" 2>/dev/null || cp "$TESTS_DIR/$name" "$dir/tests/$name"
		[ -d "${BUILT[$rel]}/testdata" ] && mkdir -p "$dir/src/$rel" && cp -a "${BUILT[$rel]}/testdata" "$dir/src/$rel/"
	done
	pack "$dir" "$out"
}

# --- per boot: kernel, device, environment ----------------------------------------------------
# boot_setup BOOT: sets B_KVER B_KIMG B_KBASE B_FDP_NRG (0 = no FDP) B_USERLAND B_DESC.
boot_setup() {
	B_USERLAND=0
	case $1 in
	host-plain) B_KVER=$HOST_KVER B_KIMG=$HOST_KIMG B_KBASE=/ B_FDP_NRG=0 ;;
	host-fdp1) B_KVER=$HOST_KVER B_KIMG=$HOST_KIMG B_KBASE=/ B_FDP_NRG=1 ;;
	host-fdp2) B_KVER=$HOST_KVER B_KIMG=$HOST_KIMG B_KBASE=/ B_FDP_NRG=2 ;;
	k7-fdp1) B_KVER=$K7_KVER B_KIMG=$K7_KIMG B_KBASE=$K7_KBASE B_FDP_NRG=1 B_USERLAND=$need_userland ;;
	esac
	if [ "$B_FDP_NRG" = 0 ]; then
		B_DESC="QEMU $QEMU_VER nvme (no FDP)"
	else
		B_DESC="QEMU $QEMU_VER nvme-subsys fdp=on nrg=$B_FDP_NRG nruh=$FDP_NRUH runs=$FDP_RUNS"
	fi
}
# qemu_devices: the NVMe device arguments for the current boot (into QARGS).
qemu_devices() {
	QARGS=(-drive "file=$WORK/nvme.img,if=none,id=nvm,format=raw")
	if [ "$B_FDP_NRG" = 0 ]; then
		QARGS+=(-device "nvme,serial=$SERIAL,drive=nvm")
	else
		QARGS+=(-device "nvme-subsys,id=subsys0,nqn=subsys0,fdp=on,fdp.runs=$FDP_RUNS,fdp.nrg=$B_FDP_NRG,fdp.nruh=$FDP_NRUH"
			-device "nvme,id=nvme0,serial=$SERIAL,subsys=subsys0"
			-device "nvme-ns,drive=nvm,nsid=1,fdp.ruhs=0-$((FDP_NRUH - 1))")
	fi
}
# size_bytes 96M: QEMU's size suffixes as bytes.
size_bytes() {
	local v=$1 m=1
	case $v in *[Kk]) m=1024 v=${v%?} ;; *[Mm]) m=$((1 << 20)) v=${v%?} ;; *[Gg]) m=$((1 << 30)) v=${v%?} ;; esac
	echo $((v * m))
}
# config_piece BOOT OUT: /vmtest/config and /vmtest/plan for the boot.
config_piece() {
	local boot=$1 out=$2 dir=$WORK/rootfs/config-$1 line s name rel re fdp=off
	mkdir -p "$dir/vmtest"
	[ "$B_FDP_NRG" != 0 ] && fdp=on
	cat >"$dir/vmtest/config" <<EOF
RBCTL_TEST_NVME_CTRL=/dev/nvme0
RBCTL_TEST_NVME_NS=/dev/ng0n1
RBCTL_TEST_NVME_BLK=/dev/nvme0n1
RBCTL_TEST_NULLB=/dev/nullb0
RBCTL_TEST_NVME_SERIAL=$SERIAL
RBCTL_TEST_NVME_SIZE=$NVME_SIZE
RBCTL_TEST_FDP=$fdp
RBCTL_TEST_FDP_NRG=$B_FDP_NRG
RBCTL_TEST_FDP_NRUH=$([ $fdp = on ] && echo "$FDP_NRUH" || echo 0)
RBCTL_TEST_FDP_RUNS=$([ $fdp = on ] && size_bytes "$FDP_RUNS" || echo 0)
BOOT=$boot
DEVICES="/dev/nvme0 /dev/ng0n1 /dev/nvme0n1 /dev/nullb0"
DEVICE_WAIT_S=60
TEST_TIMEOUT_S=$TEST_TIMEOUT
SMOKE_LINES=25
SCRATCH_MB=${VMTEST_SCRATCH_MB:-1024}
NO_SMOKE=${VMTEST_NO_SMOKE:-0}
EOF
	if [ "$B_USERLAND" = 1 ]; then
		printf 'RBCTL_TEST_FIO=/opt/trixie/bin/fio\nRBCTL_TEST_NVME_CLI_NEW=/opt/trixie/bin/nvme\n' >>"$dir/vmtest/config"
	fi
	: >"$dir/vmtest/plan"
	for s in $SCENARIOS; do
		[ "$(scen_boot "$s")" = "$boot" ] || continue
		echo "scenario $s" >>"$dir/vmtest/plan"
		for line in "${KEEP_PLAN[@]}"; do
			read -r sc name rel re <<<"$line"
			[ "$sc" = "$s" ] && echo "test $s $name $rel $re" >>"$dir/vmtest/plan"
		done
	done
	pack "$dir" "$out"
}

pack "$RFS" "$PIECES/base.cpio.gz"
declare -A MODS_DONE=()
for boot in "${BOOTS[@]}"; do
	boot_setup "$boot"
	if [ -z "${MODS_DONE[$B_KVER]:-}" ]; then
		mods_piece "$B_KVER" "$B_KBASE" "$PIECES/mods-$B_KVER.cpio.gz"
		MODS_DONE[$B_KVER]=1
	fi
	tests_piece "$boot" "$PIECES/tests-$boot.cpio.gz"
	config_piece "$boot" "$PIECES/config-$boot.cpio.gz"
	parts=("$PIECES/base.cpio.gz" "$PIECES/mods-$B_KVER.cpio.gz" "$PIECES/tests-$boot.cpio.gz")
	if [ "$B_USERLAND" = 1 ]; then
		[ -e "$PIECES/userland.cpio.gz" ] || pack "$UROOT" "$PIECES/userland.cpio.gz"
		parts+=("$PIECES/userland.cpio.gz")
	fi
	parts+=("$PIECES/config-$boot.cpio.gz")
	cat "${parts[@]}" >"$WORK/initrd-$boot.gz" # the kernel unpacks concatenated archives in turn
done
t_built=$(date +%s.%N)
say "scenarios: $SCENARIOS; boots: ${BOOTS[*]}"
for boot in "${BOOTS[@]}"; do
	boot_setup "$boot"
	say "  $boot: kernel $B_KVER, $B_DESC, initramfs $(du -m "$WORK/initrd-$boot.gz" | cut -f1) MiB"
done
say "built in $(elapsed "$t_build" "$t_built") s"

# --- accelerator: a /dev/kvm that opens is no promise that KVM runs a guest ----------------
if [ "$ACCEL_MODE" = auto ]; then
	vm_probe_kvm "$QEMU" "$HOST_KIMG" "$WORK/probe.log"
	ACCEL=tcg
	[ "$VM_PROBE_OK" = 1 ] && ACCEL=kvm
	ACCEL_WHY=$VM_PROBE_WHY
else
	ACCEL=$ACCEL_MODE
	ACCEL_WHY="VMTEST_ACCEL=$ACCEL_MODE, not probed"
fi
say "accelerator: $ACCEL ($ACCEL_WHY)"

# --- boots ------------------------------------------------------------------------------------
# boot_once BOOT: one QEMU run of the boot's initramfs; sets wall.
boot_once() {
	local boot=$1 cpu=max
	[ "$ACCEL" = kvm ] && cpu=host
	rm -f "$WORK/nvme.img"
	truncate -s "$NVME_SIZE" "$WORK/nvme.img"
	qemu_devices
	say "booting $boot under $ACCEL (kernel $B_KVER, $B_DESC; -m $MEM -smp $SMP; watchdog: first kernel line $([ "$ACCEL" = kvm ] && echo "$VM_PROBE_TIMEOUT" || echo "$VM_KERNEL_TIMEOUT") s, init $VM_INIT_TIMEOUT s, setup $VM_SETUP_TIMEOUT s, each test binary $VM_TESTBIN_TIMEOUT s, each step $VM_STEP_TIMEOUT s, whole boot ${TIMEOUT} s); console also in $LOG"
	vm_boot boot "$ACCEL" "$LOG" "$QEMU" -m "$MEM" -smp "$SMP" -accel "$ACCEL" -cpu "$cpu" \
		-nographic -no-reboot -kernel "$B_KIMG" -initrd "$WORK/initrd-$boot.gz" -append "$VM_APPEND" \
		"${QARGS[@]}" -nic none
	wall=$(vm_secs "$VM_WALL_US")
}
FAILED_BOOTS=()
MATRIX=()
# DIGEST: for each failed boot, the lines that say why, printed again after the matrix: CI
# shows only the end of a run's output, and the stall report or the failing step's own
# lines may be hundreds of lines above it.
DIGEST=()
for boot in "${BOOTS[@]}"; do
	boot_setup "$boot"
	LOG=$WORK/console-$boot.log
	boot_once "$boot"
	# A KVM guest that never reaches its kernel (it stalls after "Booting from ROM...", or
	# QEMU aborts at once: "failed to set MSR 0x10a") has run nothing yet, so boot again under
	# TCG rather than fail the suite — unless KVM was asked for by name.
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
		boot_once "$boot"
	fi
	echo
	say "---- $boot summary ($LOG) ----"
	say "  accelerator: $ACCEL ($ACCEL_WHY)"
	grep -aE '^VMTEST (PASS|FAIL|SKIP|skipped|failed)' "$LOG" | sed 's/^/vmtest:   /' || true
	res=$VM_RESULT
	bad=
	case $VM_END in
	stall)
		if [ -n "$res" ]; then
			say "note: the guest gave its result but did not power off within ${VM_PHASE_LIMIT} s ($VM_PHASE_KNOB); killed QEMU"
		else
			vm_stall_report "$LOG"
			bad="guest stalled in phase $VM_PHASE ($VM_PHASE_DESC, over ${VM_PHASE_LIMIT} s, ${wall} s after QEMU started, $ACCEL)"
		fi
		;;
	timeout) why="timed out after ${TIMEOUT} s (VMTEST_TIMEOUT) in phase $VM_PHASE" ;;
	*) why="QEMU exited $VM_QRC in phase $VM_PHASE" ;;
	esac
	if [ -z "$bad" ] && [ -z "$res" ]; then
		say "no result marker ($why); last console lines:"
		tail -n 40 "$LOG" | sed 's/^/vmtest: | /'
		bad="guest gave no result ($why, ${wall} s, $ACCEL)"
	fi
	if [ -z "$bad" ] && [ "$res" != 0 ]; then
		bad="$res guest step(s) failed"
	fi
	if [ -n "$bad" ]; then
		say "FAIL: $boot: $bad"
		FAILED_BOOTS+=("$boot")
		mapfile -t -O "${#DIGEST[@]}" DIGEST < <(vm_fail_digest "$boot" "$LOG")
	else
		say "PASS $boot (boot-to-result ${wall} s, kernel $B_KVER, $ACCEL)"
	fi
	# One matrix row per scenario the guest started: its steps and guest-measured time; a
	# scenario the guest never reached (crash, stall) is a failure.
	for s in $SCENARIOS; do
		[ "$(scen_boot "$s")" = "$boot" ] || continue
		row=$(grep -a "^VMTEST SCENARIO $s: " "$LOG" | tail -1 || true)
		if [ -n "$row" ]; then
			MATRIX+=("$s|$boot|$B_KVER|${row#VMTEST SCENARIO "$s": }")
		else
			MATRIX+=("$s|$boot|$B_KVER|not completed: ${bad:-no scenario line}")
			[ -n "$bad" ] || FAILED_BOOTS+=("$boot")
		fi
	done
	MATRIX+=("|$boot|$B_KVER|boot-to-result ${wall} s ($B_DESC)")
done

echo
say "==== matrix ($ACCEL; QEMU $QEMU_VER) ===="
printf 'vmtest:   %-14s %-10s %-22s %s\n' scenario boot kernel result
for row in "${MATRIX[@]}"; do
	IFS='|' read -r s boot kv rest <<<"$row"
	printf 'vmtest:   %-14s %-10s %-22s %s\n' "${s:-(boot)}" "$boot" "$kv" "$rest"
done
total=$(elapsed "$T_START" "$(date +%s.%N)")
for line in "${DIGEST[@]}"; do say "$line"; done
if [ ${#FAILED_BOOTS[@]} -gt 0 ]; then
	die "$(echo "${FAILED_BOOTS[@]}" | tr ' ' '\n' | sort -u | tr '\n' ' ')failed (matrix above; $ACCEL, ${total} s in all)"
fi
say "PASS: $(wc -w <<<"$SCENARIOS") scenario(s) in ${#BOOTS[@]} boot(s) ($ACCEL, ${total} s in all)"
