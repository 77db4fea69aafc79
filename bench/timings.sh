#!/usr/bin/env bash
# First timings of one V4-Flash attention layer of each sched_meta_key
# (layers 0, 2, 3: ratios 0, 4, 128) on the GPU: a decode step at batch 32
# and 128 with 64K tokens in each sequence's caches (random values), and an
# 8K-token prefill; v4a (fp8 and bf16 checkpoints) beside a PyTorch
# implementation of spec section 3 (bench/torch_attention.py, eager and
# torch.compile), with the copy and GEMM ceilings of the same run.
#
#   bench/timings.sh prepare          (here: the packages, 64K context)
#   bench/timings.sh run [PARTS]      (GPU machine; PARTS of: ceilings v4a
#                                     eager compile report; default all)
#
# Lines go to $OUT/timings.jsonl (or build/gpu/); `report` writes
# timings.json, timings.png and a table. WEIGHTS, LAYERS and SHAPES
# ("batch context tokens" triples, comma-separated) narrow the v4a part;
# COMPILE_BATCHES and COMPILE_PREFILL (0: none) the torch.compile part.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu
config=examples/v4-flash.json
context=65536
if [[ ${1:-} == prepare ]]; then
  mkdir -p "$dir"
  python3 - "$dir" <<'PY'
import json, sys
config = json.load(open("examples/v4-flash.json"))
config.pop("quantization_config", None)
json.dump(config, open(f"{sys.argv[1]}/v4-flash-bf16.json", "w"), indent=1)
PY
  # Room for the 64K tokens of history, the decode token and the prefill.
  build/bin/v4a-compile $config --context $((context + 256)) --target=sm_90a \
    -o $dir/v4-flash-64k.v4apkg
  build/bin/v4a-compile $dir/v4-flash-bf16.json --context $((context + 256)) \
    --target=sm_90a -o $dir/v4-flash-bf16-64k.v4apkg
  exit 0
fi
shift
parts=${*:-ceilings v4a eager compile report}
out=${OUT:-$dir}
lines=$out/timings.jsonl
has() { [[ " $parts " == *" $1 "* ]]; }
has ceilings && python3 bench/ceilings.py | tee -a "$lines"
if has v4a; then
  IFS=, read -ra shapes <<< "${SHAPES:-32 $context 1,128 $context 1,1 0 8192}"
  for weights in ${WEIGHTS:-fp8 bf16}; do
    package=$dir/v4-flash-64k.v4apkg
    [[ $weights == bf16 ]] && package=$dir/v4-flash-bf16-64k.v4apkg
    for layer in ${LAYERS:-0 2 3}; do
      for shape in "${shapes[@]}"; do
        read -r batch ctx tokens <<< "$shape"
        timeout 120 build/bin/v4a-run-package "$package" --random-weights 7 \
          --layers $layer --bench --batch "$batch" --context "$ctx" \
          --tokens "$tokens" --repeat 10 2>&1 |
          sed -u "s/^{\"layers\": \[\([0-9]*\)\]/{\"impl\": \"v4a $weights\", \"weights\": \"$weights\", \"layer\": \1/" |
          tee -a "$lines"
      done
    done
  done
fi
has eager && timeout 300 python3 bench/torch_attention.py $config --layers 0,2,3 \
  --batches 32,128 --context $context --prefill 8192 | tee -a "$lines"
has compile && timeout 400 python3 bench/torch_attention.py $config --compile \
  --layers 0,2,3 --batches "${COMPILE_BATCHES:-32,128}" --context $context \
  --prefill "${COMPILE_PREFILL:-8192}" |
  tee -a "$lines"
has report && python3 bench/timings_report.py "$lines" $config \
  "$out/timings.json" "$out/timings.png"
exit 0
