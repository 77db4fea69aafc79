#!/usr/bin/env bash
# Builds v4a with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# (plus the libFuzzer targets) into ${V4A_SAN_BUILD_DIR:-build-san} and runs
# every test there.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${V4A_SAN_BUILD_DIR:-build-san}
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DLLVM_USE_LINKER=lld -DV4A_SANITIZE=ON -DV4A_FUZZ=ON -DV4A_WERROR=ON
fi
ninja -C "$build"
# LLVM's inline allocators poison memory that the uninstrumented libMLIR.so
# then uses legitimately; manual poisoning is ignored, real heap errors are not.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The other build's compiler, where there is one, must write what this one
# writes (test/Import/compiler-independence.test).
main_build=${V4A_BUILD_DIR:-build}
if [ -x "$main_build/bin/v4a-compile" ]; then
  V4A_OTHER_BUILD=$(realpath "$main_build")
  export V4A_OTHER_BUILD
fi
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
