#!/usr/bin/env bash
# Sets up, builds and runs every test (lit and GoogleTest, through ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build=${V4A_BUILD_DIR:-build}
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
