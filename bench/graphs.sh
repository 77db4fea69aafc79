#!/usr/bin/env bash
# Step times with stream launches and with graph replay (the GPU kernels
# issue's step table), the bitwise check of the two, and the shape classes
# of decode graphs, beside bench/torch_attention.py in the same call.
#
#   bench/graphs.sh prepare   (here: the packages into build/gpu)
#   bench/graphs.sh [PARTS]   (on the GPU machine; carry build/bin,
#                             build/gpu; PARTS of: checks bench ncu model
#                             torch, default all)
#
# In one call: the copy and GEMM ceilings; one V4-Flash layer of each
# sched_meta_key (layers 0, 2, 3 in one step) decoding 1, 32 and 128
# sequences at 64K tokens of history and an 8,192-token prefill, each with
# --graphs both (the stream, then graphs; outputs compared bitwise); the
# whole V4-Flash model (every layer) decoding 32 sequences at 16K; prefill
# and decode with the reference alongside, graphs on, over a batch of one,
# a varlen batch with a zero-length sequence, and decode steps crossing
# the compressed-row boundaries; PyTorch eager and torch.compile. Lines go
# to $OUT/graphs.jsonl, logs to $OUT/graphs.log.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu
if [[ ${1:-} == prepare ]]; then
  mkdir -p "$dir"
  build/bin/v4a-compile examples/v4-flash.json --context 65792 \
    --target=sm_90a -o "$dir/v4-flash-64k.v4apkg" || exit 1
  build/bin/v4a-compile examples/v4-flash.json --context 16640 \
    --target=sm_90a -o "$dir/v4-flash-16k.v4apkg" || exit 1
  exit 0
fi
out=${OUT:-$dir}
lines=$out/graphs.jsonl
exec > >(tee -a "$out/graphs.log") 2>&1
parts=${*:-checks bench ncu model torch}
has() { [[ " $parts " == *" $1 "* ]]; }
status=0
config=examples/v4-flash.json
run=build/bin/v4a-run-package

has bench && python3 bench/ceilings.py | tee -a "$lines"
# Shape classes with the reference alongside; graphs replay from the
# second decode step of a bucket on.
check() { # name lengths decode
  local prompt=${2%%,*}
  if ! timeout 150 $run "$dir/v4-flash-64k.v4apkg" --random-weights 7 \
      --layers 0,2,3 --prompt-len "$prompt" --lengths "$2" \
      --decode-steps "$3" --check --tolerance 0.05 --graphs on 2>&1 |
      sed -u "s/^/$1: /"; then
    echo "$1: FAIL"
    status=1
  fi
}
if has checks; then
  check one-sequence 9 6
  check varlen-with-empty 40,0,5,1 6
  check boundaries 127,3 6
fi

has bench && for shape in ${SHAPES:-1:65536:1 32:65536:1 128:65536:1 1:0:8192}; do
  IFS=: read -r batch context tokens <<< "$shape"
  timeout 150 $run "$dir/v4-flash-64k.v4apkg" --random-weights 1 \
    --layers 0,2,3 --bench --batch "$batch" --context "$context" \
    --tokens "$tokens" --repeat 10 --graphs both | tee -a "$lines" ||
    { echo "bench $shape: FAIL"; status=1; }
done
# The GPU time of the 128-sequence step's kernels (three steps: two
# untimed, one timed), for the launch overhead beside the wall times.
has ncu && timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  --print-units base $run "$dir/v4-flash-64k.v4apkg" --random-weights 1 \
  --layers 0,2,3 --bench --batch 128 --context 65536 --tokens 1 --repeat 1 \
  --graphs off 2> /dev/null | sed '/^==PROF==/d' > "$out/ncu-b128.csv"
has ncu && python3 - "$out/ncu-b128.csv" <<'PY' | tee -a "$lines"
import csv, json, sys
rows = [r for r in csv.DictReader(open(sys.argv[1]))
        if r.get("Metric Name") == "gpu__time_duration.sum"]
total = sum(float(r["Metric Value"]) for r in rows) / 3 / 1e3
print(json.dumps({"ncu": "b128 c65536 layers 0,2,3", "kernels_per_step": len(rows) // 3,
                  "gpu_ms_per_step": round(total / 1e3, 4)}))
PY
has model && timeout 300 $run "$dir/v4-flash-16k.v4apkg" --random-weights 1 --bench \
  --batch 32 --context 16384 --tokens 1 --repeat 5 --graphs both |
  sed -u 's/^{"layers": \[[0-9,]*\]/{"layers": "all"/' | tee -a "$lines" ||
  { echo "whole model: FAIL"; status=1; }

has torch && timeout 200 python3 bench/torch_attention.py $config --layers 0,2,3 \
  --batches 1,32,128 --context 65536 --prefill 8192 | tee -a "$lines"
has torch && timeout 240 python3 bench/torch_attention.py $config --compile \
  --layers 0,2,3 --batches 32,128 --context 65536 --prefill 0 |
  tee -a "$lines"
exit $status
