#!/usr/bin/env bash
# The projections of v4a's steps on the GPU, beside the library alone.
#
#   bench/gemm-profile.sh prepare   (here: the packages, build/gpu)
#   bench/gemm-profile.sh           (on the GPU machine; carry build/bin and
#                                   build/gpu)
#
# In one call: the device's copy and GEMM ceilings; every product of the
# V4-Flash and V4-Pro packages at 1, 32, 128 and 8,192 tokens through
# PyTorch alone (bench/gemm_library.py); then, per package and case, one
# layer of each sched_meta_key in one --bench step (decode of B sequences
# at 65,536 tokens of history, or an 8,192-token prefill) under Nsight
# Compute (gpu__time_duration per kernel, clocks as found) with the order
# of its products (v4a-check-gemms --sequence). Everything lands in
# $OUT/gemm-profile.tar.gz; bench/gemm_report.py turns it into the table,
# JSON and chart.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu
if [[ ${1:-} == prepare ]]; then
  mkdir -p "$dir"
  # Room for 64K tokens of history and the decode token.
  for mode in exact fp8; do
    suffix=$([[ $mode == fp8 ]] && echo -fp8)
    for model in v4-flash v4-pro; do
      build/bin/v4a-compile examples/$model.json --context 65792 \
        --target=sm_90a --fp8-gemm=$mode -o "$dir/$model$suffix-64k.v4apkg" || exit 1
    done
  done
  exit 0
fi
work=$(mktemp -d)
out=${OUT:-$work}
cases=${CASES:-"v4-flash-64k:0,2,3 v4-pro-64k:0,2 v4-flash-fp8-64k:0,2,3"}
shapes=${SHAPES:-"1:65536:1 32:65536:1 128:65536:1 1:0:8192"}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader > "$work/device.txt"
python3 bench/ceilings.py > "$work/ceilings.jsonl"
build/bin/v4a-check-gemms "$dir/v4-flash-64k.v4apkg" "$dir/v4-pro-64k.v4apkg" --list \
  --tokens 1,32,128,8192 > "$work/products.txt"
PYTHONUNBUFFERED=1 python3 bench/gemm_library.py "$work/products.txt" \
  > "$work/library.jsonl" 2> "$work/library.err"
# The decode products alone under Nsight Compute too: per kernel, launched
# one by one as the step launches them.
grep -v ' T=8192 ' "$work/products.txt" > "$work/products-decode.txt"
timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  --print-units base python3 bench/gemm_library.py "$work/products-decode.txt" \
  --eager > "$work/library-ncu.csv" 2> "$work/library-ncu.err"
sed -i '/^==PROF==/d' "$work/library-ncu.csv"
for case in $cases; do
  package=${case%%:*} layers=${case#*:}
  for shape in $shapes; do
    IFS=: read -r batch context tokens <<< "$shape"
    name="$package-b$batch-c$context-t$tokens"
    build/bin/v4a-check-gemms "$dir/$package.v4apkg" --sequence \
      --tokens $((batch * tokens)) --layers "$layers" > "$work/$name.sequence"
    timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      --print-units base build/bin/v4a-run-package "$dir/$package.v4apkg" \
      --random-weights 1 --layers "$layers" --bench --batch "$batch" \
      --context "$context" --tokens "$tokens" --repeat 3 \
      > "$work/$name.ncu.csv" 2> "$work/$name.err" || echo "$name: failed" >&2
    # Nsight's progress lines name the machine's paths: only the table stays.
    sed -i '/^==PROF==/d' "$work/$name.ncu.csv"
    echo "$name: $(grep -c gpu__time_duration "$work/$name.ncu.csv") kernels"
  done
done
tar -czf "$out/gemm-profile.tar.gz" -C "$work" .
