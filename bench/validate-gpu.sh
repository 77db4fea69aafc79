#!/usr/bin/env bash
# Validates the GPU backend against the reference implementation.
#
#   bench/validate-gpu.sh prepare [quick]
#                                   (here: compiles the packages into build/gpu;
#                                   quick: only those the quick part runs)
#   bench/validate-gpu.sh run [quick|refdata|boundaries|large|indexer]
#                                   (on the GPU machine; needs
#                                   build/bin/v4a-run-package and build/gpu;
#                                   no argument: all, more than one call's
#                                   time)
#
# Each case runs a package with v4a-run-package: random weights (bf16 or fp8
# checkpoints, as the configuration says), a prefill of a varlen batch, then
# decode steps, with the reference alongside (--check). The CPU backend
# matches the reference bitwise (test/Run), so the reference stands for it.
# Prints one line per case and layer: the largest absolute and relative
# error, and PASS or FAIL against the tolerance.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu
mode=${1:-run}

if [[ $mode == prepare ]]; then
  mkdir -p "$dir"
  # bf16 checkpoints: the same models without quantization_config.
  for name in v4-flash v4-pro; do
    python3 - "$name" "$dir" <<'EOF'
import json, sys
name, out = sys.argv[1], sys.argv[2]
config = json.load(open(f"examples/{name}.json"))
config.pop("quantization_config", None)
json.dump(config, open(f"{out}/{name}-bf16.json", "w"), indent=1)
EOF
  done
  which=${2:-all}
  # The packages the quick part runs.
  quick=" refdata-bf16 refdata-fp8 refdata-ixbf16 refdata-ixfp8 refdata-fp8-ixbf16
    refdata-fp8-ixfp8 refdata-e4m3 refdata-fp8-e4m3 tiny tiny-v41 v41-shared v4-flash v4-flash-bf16 v4-pro
    v4-pro-bf16 v4-flash-f8kv v4-pro-f8kv v4-flash-tp2 refdata-tp2 "
  compile() { # config context package [flags]
    [[ $which == quick && " $(echo $quick) " != *" $3 "* ]] && return 0
    build/bin/v4a-compile "$1" --context "$2" --target=sm_90a -o "$dir/$3.v4apkg" \
      "${@:4}"
  }
  # DeepSeek's reference outputs (../shared/refdata), copied into the tree
  # that goes to the GPU machine (build/ is ignored by git).
  mkdir -p "$dir/refdata/fp8"
  for f in README.md compare.py config.json inputs.safetensors \
           ref_outputs.safetensors weights.safetensors; do
    cp ../shared/refdata/$f "$dir/refdata/$f"
  done
  for f in config.json inputs.safetensors ref_outputs.safetensors \
           weights.safetensors; do
    cp ../shared/refdata/fp8/$f "$dir/refdata/fp8/$f"
  done
  compile "$dir/refdata/config.json" 1024 refdata-bf16
  compile "$dir/refdata/config.json" 8192 refdata-8k
  compile "$dir/refdata/config.json" 8192 refdata-8k-loops --indexer-loops
  compile examples/v4-flash.json 65792 v4-flash-64k
  compile examples/v4-flash.json 65792 v4-flash-64k-loops --indexer-loops
  # The index key layouts besides the default (MXFP4, which holds the
  # fp4-simulated keys exactly): bf16 (the reference's) and fp8 with a row
  # scale (nearly always exact).
  for layout in bf16 fp8; do
    compile "$dir/refdata/config.json" 1024 "refdata-ix$layout" \
      --index-layout=$layout
    compile "$dir/refdata/fp8/config.json" 1024 "refdata-fp8-ix$layout" \
      --index-layout=$layout
    compile "$dir/refdata/config.json" 8192 "refdata-8k-ix$layout" \
      --index-layout=$layout
    compile "$dir/refdata/config.json" 8192 "refdata-8k-ix$layout-loops" \
      --index-layout=$layout --indexer-loops
    compile examples/v4-flash.json 65792 "v4-flash-64k-ix$layout" \
      --index-layout=$layout
    compile examples/v4-flash.json 65792 "v4-flash-64k-ix$layout-loops" \
      --index-layout=$layout --indexer-loops
  done
  compile "$dir/refdata/fp8/config.json" 1024 refdata-fp8
  # MXFP4 index keys multiplied as e4m3 (--indexer-e4m3): the reference's
  # rounding of the dot products, the heads summed on the tensor cores.
  compile "$dir/refdata/config.json" 1024 refdata-e4m3 --indexer-e4m3
  compile "$dir/refdata/fp8/config.json" 1024 refdata-fp8-e4m3 --indexer-e4m3
  compile "$dir/refdata/config.json" 8192 refdata-8k-e4m3 --indexer-e4m3
  compile examples/v4-flash.json 65792 v4-flash-64k-e4m3 --indexer-e4m3
  # The same fp8 models with every fp8 product on the generated kernels, and
  # on cuBLASLt's block-scaled fp8 GEMM: what the default (exact bf16
  # products of the dequantized operands) is compared with.
  for mode in kernels fp8; do
    compile "$dir/refdata/fp8/config.json" 1024 "refdata-fp8-$mode" --fp8-gemm=$mode
    compile examples/v4-flash.json 4096 "v4-flash-$mode" --fp8-gemm=$mode
  done
  compile examples/tiny.json 1024 tiny
  compile examples/tiny-v41.json 1024 tiny-v41
  compile examples/v41-shared.json 1024 v41-shared
  # V4.1's two-level selection with cuts: ratio-1 layers past 1,024 rows
  # (64 candidate blocks of 16) and past 512 (k), against the loop path.
  compile examples/v41-shared.json 4096 v41-shared-4k
  compile examples/v41-shared.json 4096 v41-shared-4k-loops --indexer-loops
  compile examples/v4-flash.json 4096 v4-flash
  compile "$dir/v4-flash-bf16.json" 4096 v4-flash-bf16
  compile examples/v4-pro.json 4096 v4-pro
  # fp8 MODEL1 caches (--kv-layout=fp8): the fp8 checkpoints' KV values are
  # on the fp8 grid already, so the reference's tolerance holds.
  compile examples/v4-flash.json 4096 v4-flash-f8kv --kv-layout=fp8
  compile examples/v4-pro.json 4096 v4-pro-f8kv --kv-layout=fp8
  compile "$dir/v4-pro-bf16.json" 4096 v4-pro-bf16
  # Tensor-parallel ranks (every rank in one process, summed on the host).
  compile examples/v4-flash.json 4096 v4-flash-tp2 --tensor-parallel 2
  compile "$dir/refdata/config.json" 1024 refdata-tp2 --tensor-parallel 2
  ls -l "$dir"/*.v4apkg
  exit 0
fi

part=${2:-all}
case $part in
  all | quick | refdata | boundaries | large | indexer) ;;
  *) echo "validate-gpu.sh: unknown part '$part' (all, quick, refdata, boundaries, large, indexer)" >&2
     exit 2 ;;
esac
# On the GPU machine the log also goes to $OUT, so that it comes back even
# when the call runs out of time.
if [[ -n ${OUT:-} ]]; then
  exec > >(tee "$OUT/validate-gpu.log") 2>&1
fi
# A bf16 output is compared with a bf16 reference: a few ulps of values
# around 1 (the order of f32 sums and the device's exp differ).
tolerance=${TOLERANCE:-0.05}
# Every step's temporaries start as 0xff bytes (NaN floats, -1 integers):
# a kernel that reads a byte no kernel wrote fails the case.
export V4A_FILL_TEMPORARIES=${V4A_FILL_TEMPORARIES:-poison}
status=0
run_case() { # name package prompt lengths decode layers
  local name=$1 package=$2 prompt=$3 lengths=$4 decode=$5 layers=$6
  local args=("$dir/$package.v4apkg" --random-weights 7 --prompt-len "$prompt"
              --lengths "$lengths" --decode-steps "$decode" --check
              --tolerance "$tolerance")
  [[ -n $layers ]] && args+=(--layers "$layers")
  # One case never takes the whole call: a hang is reported and the next
  # case runs.
  if ! timeout "${CASE_TIMEOUT:-120}" build/bin/v4a-run-package "${args[@]}" \
      2>&1 | sed -u "s/^/$name: /"; then
    echo "$name: FAIL (exit status or timeout)"
    status=1
  fi
}

# DeepSeek's reference outputs, judged by their compare.py (a fourth
# argument "report" prints the verdict without failing the run).
refdata_case() { # name package folder [report]
  local out
  out=$(mktemp --suffix=.safetensors)
  if timeout "${CASE_TIMEOUT:-120}" build/bin/v4a-run-package "$dir/$2.v4apkg" \
      --weights "$3/weights.safetensors" --inputs "$3/inputs.safetensors" \
      --outputs "$out" > /dev/null &&
     python3 "$dir/refdata/compare.py" "$3/ref_outputs.safetensors" "$out" \
      "$3/config.json" | sed "s/^/$1: compare.py: /"; then :; else
    echo "$1: FAIL${4:+ (reported, not judged)}"
    [[ -z ${4:-} ]] && status=1
  fi
  rm -f "$out"
}
if [[ $part == all || $part == quick || $part == refdata ]]; then
  refdata_case refdata-bf16 refdata-bf16 "$dir/refdata"
  refdata_case refdata-fp8 refdata-fp8 "$dir/refdata/fp8"
  refdata_case refdata-e4m3 refdata-e4m3 "$dir/refdata"
  refdata_case refdata-fp8-e4m3 refdata-fp8-e4m3 "$dir/refdata/fp8"
  for layout in bf16 fp8; do
    refdata_case "refdata-ix$layout" "refdata-ix$layout" "$dir/refdata"
    refdata_case "refdata-fp8-ix$layout" "refdata-fp8-ix$layout" \
      "$dir/refdata/fp8"
  done
fi
if [[ $part == refdata ]]; then
  # The other --fp8-gemm modes: the generated kernels must pass too; the
  # library's block-scaled fp8 GEMM is measured, not judged (its ~14-bit
  # sums miss the indexer-prefill tolerance there: bench/gemm-notes.md).
  refdata_case refdata-fp8-kernels refdata-fp8-kernels "$dir/refdata/fp8"
  refdata_case refdata-fp8-fp8 refdata-fp8-fp8 "$dir/refdata/fp8" report
  exit $status
fi

if [[ $part == quick ]]; then
  run_case tiny tiny 40 40,13,1 2 ""
  run_case tiny-v41 tiny-v41 40 40,13,1 2 ""
  run_case v41-shared v41-shared 40 40,9 1 2,3,5,20,21,30
  run_case v4-flash-fp8 v4-flash 40 40,9 1 0,2,3
  run_case v4-flash-bf16 v4-flash-bf16 40 40,9 1 0,2,3
  run_case v4-pro-fp8 v4-pro 20 20,3 1 0,2
  run_case v4-pro-bf16 v4-pro-bf16 20 20,3 1 0,2
  run_case v4-flash-f8kv v4-flash-f8kv 40 40,9 1 0,2,3
  run_case v4-pro-f8kv v4-pro-f8kv 20 20,3 1 0,2
  run_case v4-flash-tp2 v4-flash-tp2 40 40,9 1 0,2,3
  refdata_case refdata-tp2 refdata-tp2 "$dir/refdata"
  exit $status
fi
# Spec section 6 boundaries: the window (128 for V4, 8 for tiny), the first
# compressed rows of ratio 4 and 128, sequences of 1 token, decode steps
# over each boundary, top-k past K (tiny keeps 4 of 75 rows). The reference
# (one thread per sequence, single-threaded inside) takes most of the time:
# a V4-Pro-sized layer needs minutes for 200 tokens.
if [[ $part == all || $part == boundaries ]]; then
  run_case tiny tiny 300 300,129,8,1 4 ""
  run_case tiny-v41 tiny-v41 300 300,129,8,1 4 ""
  run_case v41-shared v41-shared 160 160,129,1 2 2,3,5,20,21,30
  run_case v4-flash-fp8 v4-flash 260 260,129,1 2 0,2,3
  run_case v4-flash-bf16 v4-flash-bf16 260 260,129,1 2 2
  run_case v4-flash-f8kv v4-flash-f8kv 260 260,129,1 2 2,3
fi
# The indexer family against the loop path (packages built with
# --indexer-loops). Rows past k and past one split (256) so that the
# candidate buffer is cut and decode steps merge split lists: the
# reference's small model (k 16) at 6,000 tokens, and V4-Flash's ratio-4
# layer (k 512) at 9,000. (The strict --check does not hold there for
# either path: a ulp of difference upstream of the indexer's fp4 rounding
# swaps a pick now and then; compare.py's tolerance allows for it.)
# Bit for bit: the same picks give the same outputs. With --indexer-e4m3
# MXFP4 keys run on e4m3 MMAs, whose scores round relu(dot) to bf16 and sum
# the heads in the tensor cores' order: picks may differ where two scores
# lie within that rounding, so those outputs are compared row by row
# (bench/output_rows.py): the rows that differ are counted, and a row that
# is finite in one run only fails the case.
# The second package is the first's loop-path twin unless named.
run_pair() { # package prompt lengths decode layers package2 a b
  local args=(--random-weights 7 --prompt-len "$2" --lengths "$3"
              --decode-steps "$4")
  [[ -n $5 ]] && args+=(--layers "$5")
  timeout "${CASE_TIMEOUT:-120}" build/bin/v4a-run-package \
    "$dir/$1.v4apkg" "${args[@]}" --outputs "$7" > /dev/null &&
  timeout "${CASE_TIMEOUT:-120}" build/bin/v4a-run-package \
    "$dir/$6.v4apkg" "${args[@]}" --outputs "$8" > /dev/null
}
same_outputs() { # name package prompt lengths decode layers [package2]
  local name=$1 package=$2 second=${7:-$2-loops} a b
  a=$(mktemp --suffix=.safetensors) b=$(mktemp --suffix=.safetensors)
  if run_pair "$package" "$3" "$4" "$5" "$6" "$second" "$a" "$b" &&
     cmp -s "$a" "$b"; then
    echo "$name: $package and $second bitwise equal: PASS"
  else
    echo "$name: $package and $second differ (or a run failed): FAIL"
    status=1
  fi
  rm -f "$a" "$b"
}
near_outputs() { # name package prompt lengths decode layers [package2]
  local name=$1 package=$2 second=${7:-$2-loops} a b rows
  a=$(mktemp --suffix=.safetensors) b=$(mktemp --suffix=.safetensors)
  if run_pair "$package" "$3" "$4" "$5" "$6" "$second" "$a" "$b" &&
     rows=$(python3 bench/output_rows.py "$a" "$b" | tail -1); then
    echo "$name: $package against $second, $rows: PASS"
  else
    echo "$name: $package against $second: ${rows:-a run failed}: FAIL"
    status=1
  fi
  rm -f "$a" "$b"
}
if [[ $part == all || $part == indexer ]]; then
  same_outputs refdata-8k refdata-8k 6000 6000,4501,1 3 ""
  same_outputs v4-flash-64k v4-flash-64k 9000 9000,5000,1 2 2
  # 64 sequences at a decode step: 4 splits of 576 rows for the longest,
  # so that V4-Flash's lists of 512 are full when merged.
  same_outputs v4-flash-64k-batch v4-flash-64k 9000 \
    "9000,5000$(printf ',1%.0s' {1..62})" 2 2
  # 100 sequences: 2 splits of 1,152 rows.
  same_outputs v4-flash-64k-100 v4-flash-64k 9000 \
    "9000,5000$(printf ',1%.0s' {1..98})" 2 2
  near_outputs refdata-8k-e4m3 refdata-8k-e4m3 6000 6000,4501,1 3 "" \
    refdata-8k-loops
  near_outputs v4-flash-64k-e4m3 v4-flash-64k-e4m3 9000 9000,5000,1 2 2 \
    v4-flash-64k-loops
  near_outputs v4-flash-64k-e4m3-batch v4-flash-64k-e4m3 9000 \
    "9000,5000$(printf ',1%.0s' {1..62})" 2 2 v4-flash-64k-loops
  # The other index key layouts: the family against its loop path, and
  # MXFP4 keys (exact) against bf16 keys.
  for layout in bf16 fp8; do
    same_outputs "refdata-8k-ix$layout" "refdata-8k-ix$layout" 6000 \
      6000,4501,1 3 ""
    same_outputs "v4-flash-64k-ix$layout" "v4-flash-64k-ix$layout" 9000 \
      9000,5000,1 2 2
  done
  same_outputs v4-flash-64k-mxfp4-bf16 v4-flash-64k 9000 \
    9000,5000,1 2 2 v4-flash-64k-ixbf16
  same_outputs v4-flash-64k-mxfp4-batch v4-flash-64k 9000 \
    "9000,5000$(printf ',1%.0s' {1..62})" 2 2 v4-flash-64k-ixbf16
  # V4.1: the candidate source (layer 20) keeps 64 of up to 188 blocks and
  # 512 of up to 3,002 rows; layer 30 picks 512 of its 1,024 candidate
  # rows. The prefill has one split a token; the decode steps' 3 tokens
  # split their rows, so their lists are merged.
  same_outputs v41-shared-4k v41-shared-4k 3000 3000,1000,1 2 20,30
fi
if [[ $part == all || $part == large ]]; then
  CASE_TIMEOUT=240 run_case v4-pro-fp8 v4-pro 140 140,1 2 0,2
  CASE_TIMEOUT=200 run_case v4-pro-bf16 v4-pro-bf16 140 140,1 2 2
  # V4-sized top-k over more compressed rows than it keeps (2100 / 4 > 512).
  CASE_TIMEOUT=300 run_case v4-flash-topk v4-flash 2100 2100 1 2
fi
exit $status
