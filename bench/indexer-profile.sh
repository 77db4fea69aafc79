#!/usr/bin/env bash
# Where the indexer's scoring kernel spends its time: Nsight Compute's full
# set for one launch of `<step>_indexer0` inside a real decode step, its
# source page (per-instruction warp samples) as CSV, and the summary of
# bench/ncu_stalls.py.
#
#   bench/indexer-profile.sh PACKAGE [BATCH [CONTEXT]]
#                                   (on the GPU machine; carry build/bin and
#                                   the package; defaults 128 and 65536)
#
# Writes PACKAGE's name + .ncu-rep, -sass.csv, -details.txt and -stalls.txt
# into $OUT (or a temporary folder, printed).
set -uo pipefail
cd "$(dirname "$0")/.."
package=${1:?usage: bench/indexer-profile.sh PACKAGE [BATCH [CONTEXT]]}
batch=${2:-128} context=${3:-65536}
out=${OUT:-$(mktemp -d)}
name=$out/$(basename "$package" .v4apkg)-b$batch-c$context
timeout 300 ncu --clock-control none --kernel-name regex:indexer0 \
  --launch-count 1 --set full --import-source no -f -o "$name" \
  build/bin/v4a-run-package "$package" --random-weights 1 --layers 2 \
  --bench --batch "$batch" --context "$context" --tokens 1 --repeat 1 \
  --graphs off > "$name.log" 2>&1 || {
  echo "indexer-profile.sh: ncu failed: $(tail -2 "$name.log")" >&2
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
echo "indexer-profile.sh: $name.*"
