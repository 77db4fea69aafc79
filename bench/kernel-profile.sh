#!/usr/bin/env bash
# Where one of a step's kernels spends its time: Nsight Compute's full set
# for one launch of the kernel whose name matches KERNEL (a regex, e.g.
# `indexer0` or `attention`) inside a real step of LAYER, its source page
# (per-instruction warp samples) as CSV, and the summary of
# bench/ncu_stalls.py.
#
#   bench/kernel-profile.sh PACKAGE KERNEL [LAYER [BATCH [CONTEXT [TOKENS]]]]
#                           (on the GPU machine; carry build/bin and the
#                           package; defaults layer 2, 128 sequences, 65536
#                           tokens of history, 1 token each)
#
# Writes PACKAGE's name + the shape + .ncu-rep, -sass.csv, -details.txt and
# -stalls.txt into $OUT (or a temporary folder, printed).
set -uo pipefail
usage="usage: bench/kernel-profile.sh PACKAGE KERNEL [LAYER [BATCH [CONTEXT [TOKENS]]]]"
package=$(realpath "${1:?$usage}") || exit 1
kernel=${2:?$usage}
layer=${3:-2} batch=${4:-128} context=${5:-65536} tokens=${6:-1}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out" && out=$(realpath "$out") || exit 1
cd "$(dirname "$0")/.."
# The kernel's regex, with what a file name cannot hold replaced.
label=$(tr -c 'A-Za-z0-9_.-' '_' <<< "$kernel" | sed 's/_$//')
name=$out/$(basename "$package" .v4apkg)-$label-l$layer-b$batch-c$context-t$tokens
timeout 300 ncu --clock-control none --kernel-name "regex:$kernel" \
  --launch-count 1 --set full --import-source no -f -o "$name" \
  build/bin/v4a-run-package "$package" --random-weights 1 --layers "$layer" \
  --bench --batch "$batch" --context "$context" --tokens "$tokens" \
  --repeat 1 --graphs off > "$name.log" 2>&1 || {
  echo "kernel-profile.sh: ncu failed: $(tail -2 "$name.log")" >&2
  exit 1
}
ncu --import "$name.ncu-rep" --page source --csv --print-source sass \
  > "$name-sass.csv" || exit 1
ncu --import "$name.ncu-rep" --page details --print-units base \
  > "$name-details.txt" || exit 1
python3 bench/ncu_stalls.py "$name-sass.csv" 20 > "$name-stalls.txt"
grep -E "Duration|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Achieved Occupancy" \
  "$name-details.txt"
head -14 "$name-stalls.txt"
echo "kernel-profile.sh: $name.*"
