#!/usr/bin/env bash
# Configures (once) and builds v4a into ${V4A_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${V4A_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DLLVM_USE_LINKER=lld -DV4A_WERROR=ON "$@"
fi
ninja -C "$build"
