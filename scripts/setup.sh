#!/usr/bin/env bash
# Installs what rbctl's tests and demo need, idempotently. Safe to run again and again; it
# does nothing when everything is present. Needs root (CI is root) for apt-get; without root
# it only reports what is missing, and the tests that need those tools skip with a reason.
#
# QEMU comes from bookworm-backports (10.x: the first with NVMe Flexible Data Placement), and
# so does valkey-server (the reference server of the RESP tests and make bench-resp); that
# suite is the only one added to the host's apt sources, and only those two and what they
# need are taken from it. Newer suites (trixie, trixie-backports, sid) are used for guest
# downloads only, through a private apt configuration (scripts/vmtest/guest-apt.sh), never
# here: installing from them would pull a newer libc6 and dpkg onto the host.
set -uo pipefail
pkgs=(fio nvme-cli linux-image-amd64 busybox-static cpio util-linux e2fsprogs kmod xz-utils mmdebstrap redis-tools python3-redis openssl)
# From bookworm-backports (or the release's own suite when newer than bookworm).
bpo_pkgs=(valkey-server)
# qemu-system-x86 at this version or newer, from bookworm-backports.
QEMU_MIN=1:10.0
BPO_LIST=/etc/apt/sources.list.d/rbctl-bookworm-backports.sources

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
qemu_ok() {
	local v
	v=$(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null) || return 1
	installed qemu-system-x86 && dpkg --compare-versions "$v" ge "$QEMU_MIN"
}

missing=()
for p in "${pkgs[@]}"; do installed "$p" || missing+=("$p"); done
need_qemu=0
qemu_ok || need_qemu=1
bpo_missing=()
for p in "${bpo_pkgs[@]}"; do installed "$p" || bpo_missing+=("$p"); done
need_bpo=$need_qemu
[ ${#bpo_missing[@]} -gt 0 ] && need_bpo=1
if [ ${#missing[@]} -eq 0 ] && [ $need_bpo = 0 ]; then
	echo "setup: all packages present (qemu-system-x86 $(dpkg-query -W -f='${Version}' qemu-system-x86))"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	[ $need_qemu = 1 ] && missing+=("qemu-system-x86>=$QEMU_MIN (bookworm-backports)")
	for p in "${bpo_missing[@]}"; do missing+=("$p (bookworm-backports)"); done
	echo "setup: not root; missing packages: ${missing[*]} (tests needing them will skip)"
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
log=/tmp/rbctl-setup.log
: >"$log"
fail() {
	tail -20 "$log"
	echo "setup: $*" >&2
	exit 1
}

codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
target=() # bookworm: -t bookworm-backports; a newer release has QEMU 10 in its own suite
[ "$codename" = bookworm ] && target=(-t bookworm-backports)
updated=0
if [ $need_bpo = 1 ] && [ "$codename" = bookworm ]; then
	if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		echo "setup: adding bookworm-backports to the apt sources ($BPO_LIST)"
		cat >"$BPO_LIST" <<'EOF'
# Added by rbctl's scripts/setup.sh: QEMU 10 (NVMe FDP) for `make vmtest`, valkey-server.
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	fi
fi
apt-get update -qq >>"$log" 2>&1 && updated=1
[ $updated = 1 ] || echo "setup: note: apt-get update failed; trying with the lists there are"

if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1 || fail "apt-get install failed"
fi

# Packages from bookworm-backports: simulate first, and refuse a plan that would replace the
# host's C library, dpkg or C++ runtime (a sign that a newer suite than bookworm is in the
# host's sources).
bpo_install() {
	local plan bad
	plan=$(apt-get install -s "${target[@]}" --no-install-recommends "$@" 2>>"$log") ||
		fail "apt-get cannot install $* ${target[*]}"
	bad=$(grep -E '^Inst (libc6|libc-bin|dpkg|libstdc\+\+6|libgcc-s1) ' <<<"$plan" || true)
	if [ -n "$bad" ]; then
		echo "$bad"
		fail "installing $* would upgrade the host's base libraries (a suite newer than bookworm in the apt sources?); refusing"
	fi
	echo "setup: installing $* ${target[*]} ($(grep -c '^Inst ' <<<"$plan") packages)"
	apt-get install -y -qq "${target[@]}" --no-install-recommends "$@" >>"$log" 2>&1 ||
		fail "apt-get install ${target[*]} $* failed"
}
if [ $need_qemu = 1 ]; then
	bpo_install qemu-system-x86
	qemu_ok || fail "qemu-system-x86 is $(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null), want >= $QEMU_MIN"
fi
[ ${#bpo_missing[@]} -gt 0 ] && bpo_install "${bpo_missing[@]}"
echo "setup: done (qemu-system-x86 $(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null))"
