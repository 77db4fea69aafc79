#!/usr/bin/env bash
# The step's kernels on the GPU, per kernel (the GPU kernels issue's table).
#
#   bench/kernels-profile.sh prepare   (here: the packages, build/gpu)
#   bench/kernels-profile.sh           (on the GPU machine; carry build/bin
#                                      and build/gpu)
#
# In one call: the device's copy ceiling; then for each case one layer of
# each sched_meta_key of V4-Flash in one --bench step (decode of B sequences
# at C tokens of history, or a T-token prefill) under Nsight Compute
# (clocks as found, caches flushed before each kernel: its time, its DRAM
# bytes, and the L2 sectors its SMs wrote, from which the report counts
# the bytes it touched; then each kernel's time unflushed), and the same
# step timed without the profiler (--repeat). Everything lands in
# $OUT/kernels-profile.tar.gz (the raw files also in KP_WORK, when set);
# bench/kernels_report.py makes the table.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu
if [[ ${1:-} == prepare ]]; then
  mkdir -p "$dir"
  build/bin/v4a-compile examples/v4-flash.json --context 65792 \
    --target=sm_90a -o "$dir/v4-flash-64k.v4apkg" || exit 1
  exit 0
fi
work=${KP_WORK:-$(mktemp -d)}; mkdir -p "$work"
out=${OUT:-$work}
cases=${CASES:-"v4-flash-64k:0,2,3"}
shapes=${SHAPES:-"1:65536:1 32:65536:1 128:65536:1 1:0:8192"}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader > "$work/device.txt"
python3 bench/ceilings.py > "$work/ceilings.jsonl"
# Counters this ncu knows, of those asked for (an unknown name fails a run).
wanted="gpu__time_duration.sum dram__bytes_read.sum dram__bytes_write.sum
  lts__t_sectors_srcunit_tex_op_write.sum"
known=$(ncu --query-metrics --chip "${NCU_CHIP:-gh100}" 2>/dev/null | awk '{print $1}')
metrics=$(for m in $wanted; do
  grep -qx "${m%.sum}" <<< "$known" && echo -n "$m,"; done)
metrics=${metrics%,}
echo "metrics: ${metrics:-none known}" | tee "$work/metrics.txt"
[[ -n $metrics ]] || metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
for case in $cases; do
  package=${case%%:*} layers=${case#*:}
  for shape in $shapes; do
    IFS=: read -r batch context tokens <<< "$shape"
    name="$package-b$batch-c$context-t$tokens"
    run=(build/bin/v4a-run-package "$dir/$package.v4apkg" --random-weights 1
         --layers "$layers" --bench --batch "$batch" --context "$context"
         --tokens "$tokens")
    timeout 120 "${run[@]}" --repeat 5 > "$work/$name.bench" 2>&1 ||
      echo "$name: bench failed" >&2
    timeout 400 ncu --clock-control none --cache-control all \
      --metrics "$metrics" --csv --print-units base "${run[@]}" --repeat 1 \
      > "$work/$name.ncu.csv" 2> "$work/$name.err" || echo "$name: failed" >&2
    # Each kernel's time again with the caches as the kernel before it left
    # them (no flush; one pass): what it takes inside a step, where its
    # inputs may still be in L2 and its code and constants warm.
    timeout 240 ncu --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum --csv --print-units base \
      "${run[@]}" --repeat 1 > "$work/$name.warm.csv" 2>> "$work/$name.err" ||
      echo "$name: warm pass failed" >&2
    # Nsight's progress lines name the machine's paths: only the table stays.
    sed -i '/^==PROF==/d' "$work/$name.ncu.csv" "$work/$name.warm.csv"
    echo "$name: $(grep -c gpu__time_duration "$work/$name.ncu.csv") kernels"
  done
done
tar -czf "$out/kernels-profile.tar.gz" -C "$work" .
