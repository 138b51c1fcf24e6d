#!/usr/bin/env bash
# rbctl demo: compare FDP placement policies for an LLM KV-cache workload.
#  1. build bin/rbctl
#  2. create a file-backed emulated FDP SSD: 512 MiB, 8 MiB reclaim units, 8 initially
#     isolated handles, 15 % OP. The geometry is chosen so that garbage collection can always
#     make room (docs/ftl.md, "Feasibility"): 8 handles need 9 spare RUs (the open RUs of the
#     7 other handles + 1 shared GC RU + a reserve of 1), and 64 RUs × 1.15 = 73 RUs give 9.
#     At 7 % OP the device has 4 and bench refuses it up front.
#  3. rbctl bench with none, cache-salt, metadata-class+cache-salt and hotness: table + plots
#  4. rbctl simulate of the same workload shape on a 1 TiB model (terabytes in seconds), with the
#     oracle:salt-lifetime headroom reference and the WAF per handle
#  5. the same at 95 % utilisation with region eviction (the cache evicts a reclaim unit's worth
#     of one tenant at a time), which lets cache-salt placement reach a WAF of 1
# Everything lands in out/demo/. About 25–35 s on two cores (25 s measured, warm build cache, load 3); any failure stops it with a
# non-zero exit, Ctrl-C stops it with 130.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${DEMO_OUT:-out/demo}
DURATION=${DEMO_DURATION:-3s}
POLICIES=${DEMO_POLICIES:-none,cache-salt,metadata-class+cache-salt,hotness}
mkdir -p "$OUT"
echo "== building bin/rbctl"
go build -o bin/rbctl ./cmd/rbctl

IMG="$OUT/emu-fdp.img"
rm -f "$IMG" "$IMG".*
DEV="emu:$IMG?size=512M&ru=8M&ruhs=8&op=0.15&iso=initial"

echo "== rbctl bench $DEV"
echo "   (host WAF: a shadow FTL model of the engine's writes; emulator WAF: the emulated SSD's FDP log, the same"
echo "    model fed the same writes — model output both, not a drive measurement)"
bin/rbctl bench "$DEV" --placement "$POLICIES" --duration "$DURATION" --warmup 1 --warmup-timeout 20s \
  --util 0.9 --workers 2 --quiet --plot "$OUT/bench" --save "$OUT/bench.json"
rm -f "$IMG" "$IMG".*

echo
echo "== rbctl simulate: the same workload shape on a 1 TiB model, 90 % utilisation"
echo "   (oracle:salt-lifetime is a future-knowledge reference, not a policy: what any placement could reach; docs/bench.md)"
bin/rbctl simulate --device-size 1T --util 0.9 --placement "$POLICIES,oracle:salt-lifetime" --per-handle --plot "$OUT/simulate" --save "$OUT/simulate.json"

echo
echo "== rbctl simulate at 95 % utilisation: per-chunk LRU, then region eviction (whole reclaim units of one tenant)"
bin/rbctl simulate --device-size 1T --util 0.95 --placement none,metadata-class+cache-salt --eviction lru --save "$OUT/simulate-lru-0.95.json"
bin/rbctl simulate --device-size 1T --util 0.95 --placement none,metadata-class+cache-salt --eviction region --save "$OUT/simulate-region-0.95.json"

echo
echo "== outputs in $OUT: bench.json, simulate*.json, bench/*.png|svg, simulate/*.png|svg"
