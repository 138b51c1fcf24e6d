# shellcheck shell=bash
# Sourced by scripts/vmtest/run.sh: fetches guest artefacts from Debian suites newer than the
# host's — a kernel with block-layer write streams (>= 6.16, trixie-backports, else sid) and
# a trixie userland (fio 3.39, nvme-cli 2.13) — through a *private* apt configuration (its
# own sources list, lists, cache and an empty dpkg status under $GA_DIR/apt). The host's apt
# sources and dpkg database are never touched, and nothing is installed on the host. Every
# artefact is cached under $GA_DIR, so only the first run downloads. See docs/vmtest.md.
#
# Needs: apt-get, dpkg-deb, depmod (kmod), xz, mmdebstrap (for the userland), root (chroot).

GA_MIRROR=${VMTEST_MIRROR:-http://deb.debian.org/debian}
GA_SUITES="trixie trixie-backports sid"

# ga_apt ARGS...: apt-get/apt-cache with the private configuration (ga_init first).
ga_opts() {
	GA_OPTS=(-o "Dir::Etc::SourceList=$GA_DIR/apt/sources.list" -o "Dir::Etc::SourceParts=$GA_DIR/apt/empty"
		-o "Dir::Etc::Preferences=$GA_DIR/apt/preferences" -o "Dir::Etc::PreferencesParts=$GA_DIR/apt/empty"
		-o "Dir::State::Lists=$GA_DIR/apt/lists" -o "Dir::Cache=$GA_DIR/apt/cache"
		-o "Dir::State::Status=$GA_DIR/apt/status" -o "APT::Architecture=amd64" -o "Debug::NoLocking=1"
		-o "Acquire::Languages=none" -o "APT::Get::List-Cleanup=0"
		-o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false" -o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false")
}

# ga_init DIR: the private configuration under DIR/apt; lists refreshed at most daily.
ga_init() {
	mkdir -p "$1" && GA_DIR=$(cd "$1" && pwd) || return 1 # apt reads relative paths from /etc/apt
	mkdir -p "$GA_DIR/apt/lists/partial" "$GA_DIR/apt/cache/archives/partial" "$GA_DIR/apt/empty"
	: >"$GA_DIR/apt/preferences"
	[ -e "$GA_DIR/apt/status" ] || : >"$GA_DIR/apt/status"
	local s
	: >"$GA_DIR/apt/sources.list.new"
	for s in $GA_SUITES; do echo "deb $GA_MIRROR $s main" >>"$GA_DIR/apt/sources.list.new"; done
	mv "$GA_DIR/apt/sources.list.new" "$GA_DIR/apt/sources.list"
	ga_opts
	if [ -z "$(find "$GA_DIR/apt/lists" -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
		apt-get "${GA_OPTS[@]}" -qq update >"$GA_DIR/apt/update.log" 2>&1
		if [ -z "$(find "$GA_DIR/apt/lists" -maxdepth 1 -name '*_Packages*' 2>/dev/null | head -1)" ]; then
			tail -5 "$GA_DIR/apt/update.log"
			echo "apt-get update of $GA_SUITES from $GA_MIRROR gave no package lists"
			return 1
		fi
	fi
}

# ga_kernel: the newest linux-image-amd64 of trixie-backports (sid if that has none >= 6.16)
# unpacked under $GA_DIR/kernel/<ver>/ with depmod run. Sets GA_KVER, GA_KIMG, GA_KBASE
# (the module base directory for modinfo -b) and GA_KWHY (where it came from).
ga_kernel() {
	local suite v pkgs p dir tmp
	GA_KVER= GA_KIMG= GA_KBASE= GA_KWHY=
	for suite in trixie-backports sid; do
		v=$(apt-cache "${GA_OPTS[@]}" show "linux-image-amd64/$suite" 2>/dev/null |
			sed -n 's/^Depends:.*linux-image-\([0-9][^ ,]*-amd64\) .*/\1/p' | sort -V | tail -1)
		[ -n "$v" ] || continue
		case $v in
		[0-5].* | 6.[0-9].* | 6.1[0-5].*) continue ;; # before write streams
		esac
		GA_KWHY="linux-image-amd64 of $suite"
		break
	done
	[ -n "$v" ] || {
		echo "no kernel >= 6.16 in $GA_SUITES"
		return 1
	}
	dir=$GA_DIR/kernel/$v
	if [ ! -e "$dir/.done" ]; then
		rm -rf "$dir" && mkdir -p "$dir"
		# The image package depends on its split parts (linux-binary-, linux-modules-,
		# linux-base-<ver>) on newer kernels; take whichever exist.
		pkgs=()
		for p in linux-image linux-binary linux-modules linux-base; do
			apt-cache "${GA_OPTS[@]}" show "$p-$v" >/dev/null 2>&1 && pkgs+=("$p-$v")
		done
		tmp=$GA_DIR/kernel/debs
		mkdir -p "$tmp"
		(cd "$tmp" && apt-get "${GA_OPTS[@]}" -qq download "${pkgs[@]}") >"$GA_DIR/kernel/download.log" 2>&1 || {
			tail -5 "$GA_DIR/kernel/download.log"
			return 1
		}
		for p in "${pkgs[@]}"; do dpkg-deb -x "$(ls "$tmp/${p}"_*.deb | tail -1)" "$dir" || return 1; done
		rm -f "$tmp"/*.deb
		# Modules live under usr/lib/modules (merged /usr) or lib/modules.
		[ -d "$dir/usr/lib/modules/$v" ] && GA_KBASE=$dir/usr || GA_KBASE=$dir
		depmod -b "$GA_KBASE" "$v" || return 1
		touch "$dir/.done"
	fi
	[ -d "$dir/usr/lib/modules/$v" ] && GA_KBASE=$dir/usr || GA_KBASE=$dir
	GA_KVER=$v
	for GA_KIMG in "$GA_KBASE/lib/modules/$v/vmlinuz" "$dir/boot/vmlinuz-$v"; do
		[ -r "$GA_KIMG" ] && return 0
	done
	echo "no vmlinuz in the $v packages"
	return 1
}

# ga_userland: fio and nvme-cli from trixie with the libraries they load, as a relocated
# tree for the guest's /opt/trixie ($GA_DIR/userland/opt/trixie): the binaries under
# usr/, the libraries and trixie's dynamic loader beside them, and wrappers bin/fio and
# bin/nvme that start each through that loader, so they never meet the host's (older)
# libraries in the guest. Sets GA_UROOT (the directory to copy into the guest's /) and
# GA_UWHY (versions).
ga_userland() {
	local u=$GA_DIR/userland root=$GA_DIR/userland/root opt=$GA_DIR/userland/opt-root/opt/trixie b libs lib
	GA_UROOT=$u/opt-root GA_UWHY=
	if [ ! -e "$u/.done" ]; then
		command -v mmdebstrap >/dev/null || {
			echo "mmdebstrap not installed (make setup)"
			return 1
		}
		rm -rf "$u" && mkdir -p "$u"
		# A throw-away trixie root with its own apt inside it; only the relocated binaries
		# and libraries are kept.
		mmdebstrap --quiet --variant=apt --include=fio,nvme-cli --components=main \
			trixie "$root" "$GA_MIRROR" >"$u/mmdebstrap.log" 2>&1 || {
			tail -8 "$u/mmdebstrap.log"
			return 1
		}
		mkdir -p "$opt/bin" "$opt/lib"
		for b in usr/bin/fio usr/sbin/nvme; do
			install -D -m 0755 "$root/$b" "$opt/$b"
			libs=$(chroot "$root" ldd "/$b" | grep -oE '/[^ ]+' | sort -u) || return 1
			for lib in $libs; do
				[ -e "$opt/lib/$(basename "$lib")" ] || install -m 0755 "$(readlink -f "$root$lib")" "$opt/lib/$(basename "$lib")"
			done
		done
		for b in fio:usr/bin/fio nvme:usr/sbin/nvme; do
			printf '#!/bin/sh\nexec /opt/trixie/lib/ld-linux-x86-64.so.2 --library-path /opt/trixie/lib /opt/trixie/%s "$@"\n' "${b#*:}" >"$opt/bin/${b%%:*}"
			chmod 0755 "$opt/bin/${b%%:*}"
		done
		chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' fio nvme-cli libnvme1t64 >"$opt/VERSIONS"
		rm -rf "$root"
		touch "$u/.done"
	fi
	GA_UWHY=$(tr '\n' ' ' <"$u/opt-root/opt/trixie/VERSIONS")
}
