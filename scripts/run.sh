#!/usr/bin/env bash
# The main job: set up, build, and run the built-in default model
# (examples/tiny.json) end to end on the CPU with random weights, checking
# every layer against the reference. Arguments replace the defaults, e.g.
#   scripts/run.sh examples/tiny-v41.json --random-weights 3 --check
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build=${V4A_BUILD_DIR:-build}
if [ $# -eq 0 ]; then
  set -- examples/tiny.json --backend=cpu --random-weights 1 \
    --prompt-len 150 --decode-steps 8 --check
fi
"$build/bin/v4a-run" "$@"
