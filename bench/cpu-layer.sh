#!/usr/bin/env bash
# One V4-Flash-shaped C4 layer on the CPU (bench/v4-flash-c4.json: V4-Flash's
# sizes, fp8 projections, one attention layer of ratio 4): random weights, a
# 64-token prefill and 2 decode steps, as v4a-run times them. Prints a table
# of the phases. Run after scripts/build.sh; BUILD selects the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s%N)
"$build/bin/v4a-run" bench/v4-flash-c4.json --random-weights 1 \
  --prompt-len 64 --decode-steps 2 | tee "$log"
total=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
seconds() { grep "^v4a-run: $1: " "$log" | tail -1 | sed -E 's/.*\(([0-9.]+) s\)$/\1/'; }
printf '\n%-28s %10s\n' "phase (64 + 2 tokens)" "seconds"
for phase in compile weights steps; do
  printf '%-28s %10s\n' "$phase" "$(seconds $phase)"
done
printf '%-28s %10s\n' "whole run (wall)" "$total"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
