#!/usr/bin/env bash
# Sets up, builds and runs every test: lit and GoogleTest through ctest, the
# same suite again in an ASan + UBSan build, then each fuzz target for
# V4A_FUZZ_SECONDS (default 60). Fails when any of them fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build=${V4A_BUILD_DIR:-build}
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
scripts/sanitize.sh
scripts/fuzz.sh
