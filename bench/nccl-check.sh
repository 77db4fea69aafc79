#!/usr/bin/env bash
# The NCCL sum of tensor-parallel ranks (bench/tensor-parallel-notes.md).
#   bench/nccl-check.sh prepare   # here: compiles tiny's packages into build/gpu
#   bench/nccl-check.sh           # on the GPU machine, with build/bin,
#                                 # build/gpu and build/test/unittests carried
# Runs the Collective unit tests (a rank a GPU), tiny at degree 1 with the
# host sum and NCCL's (graphs on and off, one rank a process: outputs must be
# the same bytes), the degree-2 package with NCCL's sum when 2 GPUs exist,
# and a small decode benchmark with and without the sum.
set -uo pipefail
cd "$(dirname "$0")/.."
pkg=build/gpu
if [ "${1:-}" = prepare ]; then
  mkdir -p "$pkg"
  build/bin/v4a-compile examples/tiny.json --context 256 --target=sm_90a -o "$pkg/tiny.v4apkg" &&
    build/bin/v4a-compile examples/tiny.json --context 256 --tensor-parallel 2 --target=sm_90a -o "$pkg/tiny-tp2.v4apkg"
  exit
fi
export NCCL_NVLS_ENABLE=0
if [ -z "${V4A_NCCL_LIBRARY:-}" ]; then
  lib=$(ls /usr/local/cuda*/lib*/libnccl.so.2 2>/dev/null | head -1)
  [ -z "$lib" ] && lib=$(python3 -c 'import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  export V4A_NCCL_LIBRARY=$lib
fi
echo "nccl: $V4A_NCCL_LIBRARY"
out=${OUT:-$(mktemp -d)}
R=build/bin/v4a-run-package
A="--random-weights 3 --prompt-len 40 --lengths 40,13,1 --decode-steps 3 --check --tolerance 0.05"
timeout 120 build/test/unittests/v4a-runtime-tests --gtest_filter='Collective.*' | tail -4
timeout 60 $R $pkg/tiny-tp2.v4apkg $A | tail -1
timeout 60 $R $pkg/tiny.v4apkg $A --outputs "$out/host.st" | tail -1
timeout 60 $R $pkg/tiny.v4apkg $A --all-reduce nccl --outputs "$out/nccl.st" | tail -1
timeout 60 $R $pkg/tiny.v4apkg $A --all-reduce nccl --graphs off --outputs "$out/nccl-stream.st" | tail -1
timeout 60 $R $pkg/tiny.v4apkg $A --all-reduce nccl --tensor-rank 0 --outputs "$out/nccl-rank.st" | tail -1
if cmp "$out/host.st" "$out/nccl.st" && cmp "$out/host.st" "$out/nccl-stream.st" &&
  cmp "$out/host.st" "$out/nccl-rank.st"; then
  echo "outputs: the host sum and NCCL's (graphs, stream, a rank a process) are the same bytes"
else
  echo "outputs: DIFFER"
fi
timeout 120 $R $pkg/tiny-tp2.v4apkg $A --all-reduce nccl 2>&1 | tail -1
B="--random-weights 3 --bench --batch 4 --context 200 --tokens 1 --repeat 20 --graphs both"
timeout 60 $R $pkg/tiny.v4apkg $B --all-reduce nccl | tail -2
timeout 60 $R $pkg/tiny.v4apkg $B | tail -2
rm -f "$out"/*.st
