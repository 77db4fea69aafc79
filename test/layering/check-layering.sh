#!/usr/bin/env bash
# The build's include views enforce the layers of DESIGN.md: each layer's
# headers compile in its own view, and an include of a higher layer (or, for
# core and runtime, of LLVM/MLIR) fails there as a missing file (as gcc and
# clang word it). The core and
# runtime libraries hold no LLVM or MLIR symbol.
# usage: check-layering.sh CXX VIEWS_DIR BUILD_DIR LLVM_INCLUDE_DIR
set -uo pipefail
cxx=$1 views=$2 build=$3 llvm=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

# expect LAYER ok|missing HEADER [extra flags]
expect() {
  local layer=$1 want=$2 header=$3
  shift 3
  printf '#include "%s"\n' "$header" > "$work/probe.cpp"
  if "$cxx" -std=c++17 -fsyntax-only -I"$views/$layer" "$@" "$work/probe.cpp" \
      2> "$work/err"; then
    got=ok
  elif grep -qF -e "$header: No such file or directory" \
      -e "'$header' file not found" "$work/err"; then
    got=missing
  else
    got=error
  fi
  if [ "$got" = "$want" ]; then
    echo "ok: $layer includes $header: $got"
  else
    echo "FAIL: $layer includes $header: expected $want, got $got"
    head -5 "$work/err"
    status=1
  fi
}

expect core ok core/KVPlan.h
expect core ok v4a/ModelConfig.h
expect core missing runtime/Model.h
expect core missing dialects/V4A/IR/V4ADialect.h
expect core missing llvm/Support/JSON.h
expect core missing v4a/Engine.h

expect runtime ok runtime/Model.h
expect runtime ok runtime/SafeTensors.h
expect runtime missing dialects/V4A/IR/V4AOps.h
expect runtime missing lib/JIT/CpuJit.h
expect runtime missing lib/Engine/Checkpoint.h
expect runtime missing mlir/IR/Builders.h
expect runtime missing v4a/Engine.h

expect compiler ok dialects/V4A/IR/V4ADialect.h -I"$build" -isystem "$llvm"
expect compiler ok passes/Passes.h -I"$build" -isystem "$llvm"
expect compiler missing runtime/Model.h -I"$build" -isystem "$llvm"
expect compiler missing lib/Engine/Checkpoint.h -I"$build" -isystem "$llvm"
expect compiler missing v4a/Engine.h -I"$build" -isystem "$llvm"

for lib in "$build/core/libV4ACore.a" "$build/runtime/libV4ARuntime.a"; do
  symbols=$(nm -C "$lib" | grep -E '(llvm|mlir)::' | head -5)
  if [ -n "$symbols" ]; then
    echo "FAIL: $lib refers to LLVM or MLIR:"
    echo "$symbols"
    status=1
  else
    echo "ok: $(basename "$lib") holds no LLVM or MLIR symbol"
  fi
done
# The deployable C ABI library: the runtime alone, exporting v4a_* only.
runtime="$build/lib/libv4a_runtime.so"
needed=$(readelf -d "$runtime" | grep -E 'NEEDED.*lib(MLIR|LLVM)')
exported=$(nm -D --defined-only "$runtime" | awk '{print $3}' | grep -v '^v4a_')
if [ -n "$needed$exported" ]; then
  echo "FAIL: libv4a_runtime.so needs LLVM/MLIR or exports more than v4a_*:"
  echo "$needed$exported" | head -5
  status=1
else
  echo "ok: libv4a_runtime.so needs no LLVM or MLIR and exports v4a_* alone"
fi
exit $status
