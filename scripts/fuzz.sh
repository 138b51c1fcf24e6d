#!/usr/bin/env bash
# Runs every Go fuzz target in the module for the given time each: scripts/fuzz.sh 3s
set -euo pipefail
t=${1:-10s}
cd "$(dirname "$0")/.."
n=0
while IFS= read -r line; do
  file=${line%%:*}
  fn=$(sed -E 's/^.*func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$line")
  pkg=./$(dirname "$file")
  echo "fuzz $pkg $fn ($t)"
  go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$t" "$pkg" >/tmp/rbctl-fuzz.log 2>&1 || { cat /tmp/rbctl-fuzz.log; exit 1; }
  n=$((n+1))
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . | grep -v '/vendor/' || true)
echo "fuzzed $n targets for $t each"
