#!/usr/bin/env bash
# Every product v4a sends to the GEMM library, checked and timed on the GPU.
#
#   bench/validate-gpu.sh prepare   (here: the packages, build/gpu)
#   bench/gemms.sh [check|refdata|flash|all]
#                                   (on the GPU machine; carry build/bin and
#                                   build/gpu)
#
# check: v4a-check-gemms over every package at 1-8192 tokens (fresh random
# operands, float64 products beside them); refdata: DeepSeek's compare.py
# with each --fp8-gemm mode (exact, fp8, kernels); flash: one V4-Flash layer
# of each key with the reference alongside, library on and off, each mode.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu
part=${1:-all}
if [[ -n ${OUT:-} ]]; then
  exec > >(tee "$OUT/gemms-$part.log") 2>&1
fi
status=0
packages=(refdata-fp8 refdata-bf16 tiny tiny-v41 v41-shared v4-flash
          v4-flash-bf16 v4-pro v4-pro-bf16)
if [[ $part == all || $part == check ]]; then
  paths=()
  for p in "${packages[@]}"; do paths+=("$dir/$p.v4apkg"); done
  build/bin/v4a-check-gemms "${paths[@]}" --tokens "${TOKENS:-1,2,3,4,33,128,1000,8192}" \
    --repeat "${REPEAT:-10}" || status=1
  # cuBLASLt's block-scaled fp8 products (--fp8-gemm=fp8), small K included.
  build/bin/v4a-check-gemms "$dir/refdata-fp8-fp8.v4apkg" "$dir/v4-flash-fp8.v4apkg" \
    --tokens 1,4,33,128,760 --repeat 2 || status=1
fi
if [[ $part == all || $part == refdata ]]; then
  bench/validate-gpu.sh run refdata || status=1
fi
if [[ $part == all || $part == flash ]]; then
  for setting in 1 0; do
    for package in v4-flash v4-flash-fp8 v4-flash-kernels; do
      echo "== $package, V4A_GEMM_LIBRARY=$setting"
      V4A_GEMM_LIBRARY=$setting timeout 120 build/bin/v4a-run-package \
        "$dir/$package.v4apkg" --random-weights 7 --prompt-len 128 \
        --lengths 128,95,33 --decode-steps 1 --layers 0,2,3 --check \
        --tolerance 0.05 || status=1
    done
  done
fi
exit $status
