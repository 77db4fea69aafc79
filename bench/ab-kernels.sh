#!/usr/bin/env bash
# Two packages of one model side by side, for a change to some of their
# kernels: the outputs of a prefill and decode steps bit for bit, then
# Nsight Compute's time of every kernel whose name matches REGEX in both, at
# decode (128 x 64K) and prefill (8,192 tokens) unless told, one line per
# kernel that moved by more than 0.3 us, one per step function's kernel
# family whose sum moved (with the kernel counts), and the matched kernels'
# sum a step.
#
#   bench/ab-kernels.sh A.v4apkg B.v4apkg REGEX [LAYERS]
#                         (on the GPU machine; carry build/bin and both
#                         packages; LAYERS default 0,2,3)
#   A_RUN / B_RUN: the v4a-run-package of one side (default build/bin's),
#   for a package of an older format version that only its own runtime
#   loads.
#   LENGTHS: the outputs' cases, LIST:PROMPT each (default
#   "260,129,1:260 3000,1700,1:3000"); SHAPES: the timed steps,
#   BATCH:CONTEXT:TOKENS each (default "128:65536:1 1:0:8192"). For the
#   indexer's merges, e.g. LENGTHS="9000,5000,1,1,1,1,7000:9000" and
#   SHAPES="1:65536:1 32:65536:1" (a 1M package for "1:1048576:1").
#
# Writes the per-kernel CSVs into $OUT (or a temporary folder, printed).
set -uo pipefail
usage="usage: bench/ab-kernels.sh A.v4apkg B.v4apkg REGEX [LAYERS]"
a=$(realpath "${1:?$usage}") || exit 1
b=$(realpath "${2:?$usage}") || exit 1
regex=${3:?$usage}
layers=${4:-0,2,3}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out" && out=$(realpath "$out") || exit 1
default_run=$(dirname "$0")/../build/bin/v4a-run-package
run_a=$(realpath "${A_RUN:-$default_run}") || exit 1
run_b=$(realpath "${B_RUN:-$default_run}") || exit 1
cd "$(dirname "$0")/.."
status=0
echo "ab-kernels.sh: A $(basename "$a"), B $(basename "$b"), kernels /$regex/"
for lengths in ${LENGTHS:-260,129,1:260 3000,1700,1:3000}; do
  IFS=: read -r list prompt <<< "$lengths"
  for side in a b; do
    runner=run_$side
    timeout 180 "${!runner}" "${!side}" --random-weights 1 --prompt-len "$prompt" \
      --lengths "$list" --decode-steps 2 --layers "$layers" \
      --outputs "$out/outputs-$side.safetensors" > /dev/null 2>&1 ||
      echo "lengths $list: $side failed to run"
  done
  if cmp -s "$out/outputs-a.safetensors" "$out/outputs-b.safetensors"; then
    echo "lengths $list, 2 decode steps: outputs bitwise equal: PASS"
  else
    echo "lengths $list, 2 decode steps: outputs differ: FAIL"
    status=1
  fi
  rm -f "$out"/outputs-?.safetensors
done
for shape in ${SHAPES:-128:65536:1 1:0:8192}; do
  IFS=: read -r batch context tokens <<< "$shape"
  for side in a b; do
    runner=run_$side
    timeout 240 ncu --clock-control none --kernel-name "regex:$regex" \
      --metrics gpu__time_duration.sum --csv --print-units base \
      "${!runner}" "${!side}" --random-weights 1 --layers "$layers" --bench \
      --batch "$batch" --context "$context" --tokens "$tokens" --repeat 1 \
      --graphs off 2> /dev/null | grep gpu__time_duration \
      > "$out/kernels-$side-b$batch-t$tokens.csv"
  done
  python3 - "$out/kernels-a-b$batch-t$tokens.csv" \
    "$out/kernels-b-b$batch-t$tokens.csv" "b$batch t$tokens" <<'PY'
import collections, csv, sys
def times(path):
    per = collections.defaultdict(list)
    for row in csv.reader(open(path)):
        per[row[4]].append(float(row[-1].replace(',', '')) / 1e3)
    return {k: sum(v) / len(v) for k, v in per.items()}
a, b = times(sys.argv[1]), times(sys.argv[2])
for name in sorted(set(a) | set(b)):
    ta, tb = a.get(name, 0.0), b.get(name, 0.0)
    if abs(ta - tb) > 0.3:
        print(f"{sys.argv[3]} {name}: A {ta:.1f} us, B {tb:.1f} us")
# Names need not pair up (a change may add or remove kernels, and the
# later kernels of its family are renumbered): each step function's
# family's sum, then the matched kernels' sum a step, on each side.
def families(t):
    per = collections.defaultdict(list)
    for name, us in t.items():
        function, _, kernel = name.rpartition("_")
        per[(function, kernel.rstrip("0123456789"))].append(us)
    return per
fa, fb = families(a), families(b)
for key in sorted(set(fa) | set(fb)):
    sa, sb = sum(fa.get(key, [])), sum(fb.get(key, []))
    if abs(sa - sb) > 0.3:
        print(f"{sys.argv[3]} {key[0]} {key[1]}: A {sa:.1f} us "
              f"({len(fa.get(key, []))}), B {sb:.1f} us ({len(fb.get(key, []))})")
print(f"{sys.argv[3]}: {len(a)} / {len(b)} kernels matched /regex/, "
      f"{sum(a.values()):.1f} / {sum(b.values()):.1f} us a step")
PY
done
echo "ab-kernels.sh: $out"
exit $status
