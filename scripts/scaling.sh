#!/usr/bin/env bash
# `make scaling` (docs/scaling.md): the scaling curve of one cache sharded over 1, 2 and 4
# devices. Runs scripts/vmtest/guest.d/80-scaling.sh on this host with loop devices over
# tmpfs files (root only; skipped with a message otherwise), takes the VM's "scaling:" lines
# from the newest `make vmtest` console log that has them (.cache/vmtest/console-*.log; the
# hook runs in the qemu-nofdp boot, console-host-plain.log), and writes docs/scaling.json and
# docs/scaling.png with tools/scalingplot (a place not measured now keeps its
# previous run in docs/scaling.json). Knobs (environment):
#   SCALING_DURATION=5s        measured window of each bench (the hook's default, also in the VM)
#   SCALING_NO_HOST=1          do not measure the host; only take the VM's lines
#   SCALING_VM=1               also boot the VM for its curve (one qemu-nofdp boot running only
#                              the hook: VMTEST_HOOKS=80-scaling), instead of reading a console log
#   SCALING_VM_LOG=FILE        the console log to take the VM's lines from
#   SCALING_OUT=docs           where scaling.json and scaling.png go
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=.cache/scaling
OUT=${SCALING_OUT:-docs}
mkdir -p "$WORK" "$OUT"
say() { echo "scaling: $*"; }
inputs=()

if [ "${SCALING_NO_HOST:-0}" = 1 ]; then
	say "host curve not measured (SCALING_NO_HOST=1)"
elif [ "$(id -u)" != 0 ]; then
	say "SKIP host curve: loop devices need root"
else
	go build -o "$WORK/rbctl" ./cmd/rbctl
	say "host curve: loop devices over tmpfs files, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	rm -f "$WORK/host.txt"
	if ! SCALING_WHERE=host SCALING_KINDS=loop SCALING_RBCTL="$WORK/rbctl" \
		SCALING_KEEP="$WORK/json" sh scripts/vmtest/guest.d/80-scaling.sh | tee "$WORK/host.txt"; then
		say "FAIL: the host curve (above)"
		exit 1
	fi
	inputs+=("$WORK/host.txt")
fi

vmlog=${SCALING_VM_LOG:-}
if [ "${SCALING_VM:-0}" = 1 ]; then
	# One qemu-nofdp boot that runs only this hook (no test binary matches '^$').
	vmlog=$WORK/vm-console.log
	say "VM curve: one qemu-nofdp boot with only the 80-scaling hook (console in $vmlog)"
	VMTEST_SCENARIOS=qemu-nofdp VMTEST_PKGS=./units VMTEST_RUN='^$' VMTEST_HOOKS=80-scaling \
		bash scripts/vmtest/run.sh >"$vmlog" 2>&1 || {
		tail -n 30 "$vmlog"
		say "FAIL: the VM run (above; whole console in $vmlog)"
		exit 1
	}
	grep -a '^scaling' "$vmlog"
fi
if [ -z "$vmlog" ]; then
	for f in $(ls -t .cache/vmtest/console-*.log 2>/dev/null); do
		grep -aq '^scaling: env ' "$f" && vmlog=$f && break
	done
fi
if [ -n "$vmlog" ]; then
	say "VM curve from $vmlog ($(date -u -r "$vmlog" +%Y-%m-%dT%H:%M:%SZ))"
	inputs+=("$vmlog")
else
	say "note: no make vmtest console log with scaling lines; the VM curve in $OUT/scaling.json (if any) is kept"
fi
go run ./tools/scalingplot -json "$OUT/scaling.json" -png "$OUT/scaling.png" "${inputs[@]}"
