#!/usr/bin/env bash
# Installs what rbctl's tests and demo need, idempotently. Safe to run again and again; it
# does nothing when everything is present. Needs root (CI is root) for apt-get; without root
# it only reports what is missing, and the tests that need those tools skip with a reason.
set -uo pipefail
pkgs=(fio nvme-cli qemu-system-x86 linux-image-amd64 busybox-static cpio util-linux e2fsprogs kmod)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "setup: not root; missing packages: ${missing[*]} (tests needing them will skip)"
  exit 0
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || true
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/rbctl-setup.log 2>&1 || {
  tail -20 /tmp/rbctl-setup.log
  echo "setup: apt-get install failed" >&2
  exit 1
}
echo "setup: done"
