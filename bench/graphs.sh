#!/usr/bin/env bash
# Step times with stream launches and with graph replay (the GPU kernels
# issue's step table), the bitwise check of the two, and the shape classes
# of decode graphs, beside bench/torch_attention.py in the same call.
#
#   bench/graphs.sh prepare   (here: the packages into build/gpu)
#   bench/graphs.sh [PARTS]   (on the GPU machine; carry build/bin,
#                             build/gpu, and build/prefix for overhead;
#                             PARTS of: checks bench ncu model overhead
#                             torch, default all)
#
# In one call: the copy and GEMM ceilings; one V4-Flash layer of each
# sched_meta_key (layers 0, 2, 3 in one step) decoding 1, 32 and 128
# sequences at 64K tokens of history and an 8,192-token prefill, each with
# --graphs both (the stream, then graphs; outputs compared bitwise), through
# step() and through queueStep (--device-tensors; each line's "path"); the
# whole V4-Flash model (every layer) decoding 32 sequences at 16K; prefill
# and decode with the reference alongside, graphs on, over a batch of one,
# a varlen batch with a zero-length sequence, and decode steps crossing
# the compressed-row boundaries; PyTorch eager and torch.compile. Lines go
# to $OUT/graphs.jsonl, logs to $OUT/graphs.log.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu
if [[ ${1:-} == prepare ]]; then
  # The 64K package is the kernel profile's.
  bench/kernels-profile.sh prepare || exit 1
  build/bin/v4a-compile examples/v4-flash.json --context 16640 \
    --target=sm_90a -o "$dir/v4-flash-16k.v4apkg" || exit 1
  exit 0
fi
out=${OUT:-$dir}
lines=$out/graphs.jsonl
exec > >(tee -a "$out/graphs.log") 2>&1
parts=${*:-checks bench ncu model overhead torch}
has() { [[ " $parts " == *" $1 "* ]]; }
status=0
config=examples/v4-flash.json
run=build/bin/v4a-run-package

python3 bench/ceilings.py | tee -a "$lines"
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

# Each shape through step() (host f32 rows, copied through pageable memory)
# and through queueStep (bf16 rows in device memory, as engines step).
if has bench; then
  for shape in ${SHAPES:-1:65536:1 32:65536:1 128:65536:1 1:0:8192}; do
    IFS=: read -r batch context tokens <<< "$shape"
    for path in "" --device-tensors; do
      timeout 150 $run "$dir/v4-flash-64k.v4apkg" --random-weights 1 \
        --layers 0,2,3 --bench --batch "$batch" --context "$context" \
        --tokens "$tokens" --repeat 10 --graphs both $path | tee -a "$lines"
      [[ ${PIPESTATUS[0]} == 0 ]] ||
        { echo "bench $shape $path: FAIL"; status=1; }
    done
  done
fi
# The GPU time of the steps' kernels as they run back to back (no cache
# flush, clocks as found; three steps: two untimed, one timed), beside the
# wall times: what is left is launch gaps, the inputs' and outputs' copies
# and the host's conversions.
if has ncu; then
  for batch in ${NCU_BATCHES:-32 128}; do
    timeout 200 ncu --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum --csv --print-units base \
      $run "$dir/v4-flash-64k.v4apkg" --random-weights 1 --layers 0,2,3 \
      --bench --batch "$batch" --context 65536 --tokens 1 --repeat 1 \
      --graphs off > "$out/ncu-b$batch.csv" 2> /dev/null
    python3 - "$out/ncu-b$batch.csv" "$batch" <<'PY' | tee -a "$lines"
import csv, io, json, sys
text = open(sys.argv[1]).read().splitlines()
start = next((i for i, l in enumerate(text) if l.startswith('"ID"')), len(text))
rows = [r for r in csv.DictReader(io.StringIO("\n".join(text[start:])))
        if r.get("Metric Name") == "gpu__time_duration.sum"]
ns = sum(float(r["Metric Value"].replace(",", "")) for r in rows)
print(json.dumps({"ncu": "kernels back to back", "layers": [0, 2, 3],
                  "batch": int(sys.argv[2]), "context": 65536,
                  "kernels_per_step": len(rows) / 3,
                  "gpu_ms_per_step": round(ns / 3 / 1e6, 4)}))
PY
  done
fi
if has model; then
  # What the whole model's step hands the device (launches, library GEMMs,
  # copies): the nodes of its graph, counted from the package.
  $run --info "$dir/v4-flash-16k.v4apkg" | python3 -c '
import json, re, sys
for line in sys.stdin:
    m = re.match(r"a step of every layer: (\d+) launches, (\d+) library GEMMs, (\d+) copies", line)
    if m:
        launches, gemms, copies = map(int, m.groups())
        print(json.dumps({"package_nodes": "whole model", "launches": launches,
                          "library_gemms": gemms, "copies": copies}))
' | tee -a "$lines"
  for path in "" --device-tensors; do
    timeout 300 $run "$dir/v4-flash-16k.v4apkg" --random-weights 1 --bench \
      --batch 32 --context 16384 --tokens 1 --repeat 5 --graphs both $path |
      sed -u 's/^{"layers": \[[0-9,]*\]/{"layers": "all"/' | tee -a "$lines"
    [[ ${PIPESTATUS[0]} == 0 ]] || { echo "whole model $path: FAIL"; status=1; }
  done
fi
# The gaps between a whole-model decode step's kernels on the GPU (CUPTI
# through torch.profiler), with graphs and with stream launches; needs the
# runtime library (bench/embed.sh prepare installs it into build/prefix).
if has overhead; then
  for g in on off; do
    PYTHONPATH=$PWD/python \
    V4A_LIBRARY=${V4A_LIBRARY:-$PWD/build/prefix/lib/libv4a_runtime.so.2} \
      timeout 150 python3 bench/graph_overhead.py "$dir/v4-flash-16k.v4apkg" \
      32 256 8 --graphs $g 2>&1 | grep '^{' | tee -a "$lines"
    [[ ${PIPESTATUS[0]} == 0 ]] || { echo "overhead $g: FAIL"; status=1; }
  done
fi
has torch && timeout 200 python3 bench/torch_attention.py $config --layers 0,2,3 \
  --batches 1,32,128 --context 65536 --prefill 8192 | tee -a "$lines"
has torch && timeout 240 python3 bench/torch_attention.py $config --compile \
  --layers 0,2,3 --batches 32,128 --context 65536 --prefill 0 |
  tee -a "$lines"
exit $status
