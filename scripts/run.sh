#!/usr/bin/env bash
# The main job: set up, build, and compile the built-in default model
# (examples/v4-flash.json, or the config given as the first argument).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
config=${1:-examples/v4-flash.json}
build=${V4A_BUILD_DIR:-build}
"$build/bin/v4a-compile" "$config" --emit=v4a
