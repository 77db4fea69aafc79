#!/usr/bin/env bash
# The indexer family (scores + streaming top-k) on the H200: each kernel's
# own time (Nsight Compute, gpu__time_duration) inside real steps of the
# ratio-4 layer of V4-Flash (k 512) and V4-Pro (k 1024), the index keys'
# bytes per second against the same run's copy ceiling, and beside it the
# same scores and torch.topk in PyTorch (bench/indexer_torch.py).
#
#   bench/indexer.sh prepare   (here: the packages, into build/gpu)
#   bench/indexer.sh [SHAPES]  (there, carrying build/bin and build/gpu;
#                               SHAPES as package:batch:context:tokens
#                               [:layer], layer 2 unless told)
#
# PACKAGES=DIR reads the packages from DIR instead of build/gpu, and
# VARIANT=NAME labels the JSON lines (variants of the kernel side by side);
# TORCH=0 leaves out the PyTorch side.
#
# --bench fills the caches with random finite rows, so every visible index
# key is scored and the top-k cuts (16,384 rows at 64K of history).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${PACKAGES:-build/gpu}
if [[ ${1:-} == prepare ]]; then
  bench/attention.sh prepare || exit 1 # v4-flash-64k, v4-pro-64k
  build/bin/v4a-compile examples/v4-flash.json --context 1048832 \
    --target=sm_90a -o "$dir/v4-flash-1m.v4apkg" || exit 1
  # The index key layouts besides the default MXFP4 (shapes named
  # v4-flash-64k-ixbf16:..., -ixfp8).
  for layout in bf16 fp8; do
    build/bin/v4a-compile examples/v4-flash.json --context 65792 \
      --index-layout=$layout --target=sm_90a \
      -o "$dir/v4-flash-64k-ix$layout.v4apkg" || exit 1
  done
  # MXFP4 keys multiplied as e4m3 (shapes v4-flash-64k-e4m3:..., 1m-e4m3).
  build/bin/v4a-compile examples/v4-flash.json --context 65792 \
    --indexer-e4m3 --target=sm_90a -o "$dir/v4-flash-64k-e4m3.v4apkg" || exit 1
  build/bin/v4a-compile examples/v4-flash.json --context 1048832 \
    --indexer-e4m3 --target=sm_90a -o "$dir/v4-flash-1m-e4m3.v4apkg" || exit 1
  # V4.1's candidate source (layer 20, ratio 1: its rows and its candidate
  # blocks from one scores op; shapes v41-shared-64k:...:20).
  build/bin/v4a-compile examples/v41-shared.json --context 65792 \
    --target=sm_90a -o "$dir/v41-shared-64k.v4apkg" || exit 1
  exit 0
fi
out=${OUT:-$dir}
lines=$out/indexer.jsonl
exec > >(tee -a "$out/indexer.log") 2>&1
python3 bench/ceilings.py | tee -a "$lines"
shapes=${*:-v4-flash-64k:1:65536:1 v4-flash-64k:32:65536:1
  v4-flash-64k:128:65536:1 v4-flash-64k:1:0:8192 v4-pro-64k:128:65536:1
  v4-flash-1m:1:262144:1 v4-flash-1m:32:262144:1 v4-flash-1m:1:1048576:1
  v4-flash-64k-e4m3:128:65536:1 v4-flash-1m-e4m3:1:1048576:1
  v41-shared-64k:1:65536:1:20 v41-shared-64k:32:65536:1:20}
for shape in $shapes; do
  IFS=: read -r package batch context tokens layer <<< "$shape"
  layer=${layer:-2}
  case $package in v4-pro*) config=examples/v4-pro.json ;;
                   v41-shared*) config=examples/v41-shared.json ;;
                   *) config=examples/v4-flash.json ;; esac
  csv=$out/indexer-${VARIANT:+$VARIANT-}$package-b$batch-c$context-t$tokens-l$layer.csv
  timeout 240 ncu --clock-control none --kernel-name regex:indexer \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
    --print-units base \
    build/bin/v4a-run-package "$dir/$package.v4apkg" --random-weights 1 \
    --layers "$layer" --bench --batch "$batch" --context "$context" \
    --tokens "$tokens" --repeat 1 --graphs off > "$csv" 2> "$csv.err" ||
    echo "$shape: ncu failed: $(tail -2 "$csv.err")"
  sed -i '/^==PROF==/d' "$csv"
  layout=mxfp4
  [[ $package =~ -ix(bf16|mxfp4|fp8)$ ]] && layout=${BASH_REMATCH[1]}
  python3 bench/indexer_report.py "$csv" "$config" "$batch" "$context" \
    "$tokens" "$layout" "$layer" | tee -a "$lines"
done
[[ ${TORCH:-1} == 1 ]] && python3 bench/indexer_torch.py | tee -a "$lines"
