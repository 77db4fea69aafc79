#!/usr/bin/env bash
# The attention kernel family on the H200: each kernel's own time (Nsight
# Compute, gpu__time_duration) inside real steps of V4-Flash and V4-Pro
# layers, as TFLOP/s by FlashMLA's count 2 * tokens * heads * rows *
# (512 + 512), beside the same run's bf16 GEMM ceiling.
#
#   bench/attention.sh prepare   (here: the packages, into build/gpu)
#   bench/attention.sh [SHAPES]  (there; SHAPES as batch:context:tokens,
#                                 default FlashMLA's decode points at s_q 1
#                                 and 2 and the prefill points)
#
# MODELS (default "v4-flash v4-pro") and LAYERS_<model> (v4-flash: 0,2,3;
# v4-pro: 0,2) narrow the run; VARIANTS="-a -b" times packages
# build/gpu/<model>-64k-a.v4apkg and -b side by side in the same call (each
# line then names its variant; "none" is the package without a suffix):
# VARIANTS="none -fp8" times bf16 rows beside the packages with fp8 MODEL1
# caches that prepare compiles (their layers' keys read step_<ratio>_1_...).
#
# Caches are filled with random finite values and the top-k of an indexer
# layer picks real rows, so every slot of a long-history step holds a row.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu
if [[ ${1:-} == prepare ]]; then
  bench/kernels-profile.sh prepare || exit 1 # v4-flash-64k
  build/bin/v4a-compile examples/v4-pro.json --context 65792 \
    --target=sm_90a -o "$dir/v4-pro-64k.v4apkg" || exit 1
  # The same models with fp8 MODEL1 caches (VARIANTS=-fp8).
  for model in v4-flash v4-pro; do
    build/bin/v4a-compile "examples/$model.json" --kv-layout=fp8 \
      --context 65792 --target=sm_90a -o "$dir/$model-64k-fp8.v4apkg" || exit 1
  done
  exit 0
fi
out=${OUT:-$dir}
lines=$out/attention.jsonl
exec > >(tee -a "$out/attention.log") 2>&1
python3 bench/ceilings.py | tee -a "$lines"
shapes=${*:-32:65536:1 64:65536:1 128:65536:1 32:65536:2 64:65536:2 128:65536:2 1:0:8192 1:8192:4096}
read -r -a variants <<< "${VARIANTS:-}"
[[ ${#variants[@]} -eq 0 ]] && variants=("")
for model in ${MODELS:-v4-flash v4-pro}; do
  # Layers: no compression, ratio 4 (indexer top-k), ratio 128.
  case $model in
    v4-flash) layers=${LAYERS_v4_flash:-0,2,3} ;;
    v4-pro) layers=${LAYERS_v4_pro:-0,2} ;;
  esac
  for shape in $shapes; do
    IFS=: read -r batch context tokens <<< "$shape"
    for variant in "${variants[@]}"; do
      [[ $variant == none ]] && variant=""
      csv=$out/attention-$model$variant-b$batch-c$context-t$tokens.csv
      timeout 240 ncu --clock-control none --kernel-name regex:attention \
        --metrics gpu__time_duration.sum --csv --print-units base \
        build/bin/v4a-run-package "$dir/$model-64k$variant.v4apkg" \
        --random-weights 1 --layers "$layers" --bench --batch "$batch" \
        --context "$context" --tokens "$tokens" --repeat 1 --graphs off \
        > "$csv" 2> /dev/null || echo "$model$variant $shape: ncu failed"
      # Nsight Compute's own lines name the machine's paths.
      sed -i '/^==PROF==/d' "$csv"
      python3 bench/attention_report.py "$csv" "examples/$model.json" \
        "$batch" "$context" "$tokens" "$variant" | tee -a "$lines"
    done
  done
done
