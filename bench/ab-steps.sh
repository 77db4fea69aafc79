#!/usr/bin/env bash
# Two packages of one model side by side, for a change to their step
# times: queueStep step times (device tensors, stream then graph replay,
# each graph's outputs compared bitwise with the stream's), the packages
# alternating over ROUNDS rounds in one process tree, then (with the
# runtime library installed, bench/embed.sh prepare) the whole step's
# nodes by kind and gaps from bench/graph_overhead.py for each.
#
#   bench/ab-steps.sh A.v4apkg B.v4apkg [SHAPE ...]
#       SHAPE: LAYERS:BATCH:CONTEXT, LAYERS "all" or a list (0-2-3);
#       default all:32:16384 0-2-3:128:65536
#       (on the GPU machine; carry build/bin, build/prefix and both
#       packages; ROUNDS default 2, REPEAT default 10)
#   A_RUN / B_RUN, A_LIBRARY / B_LIBRARY: a side's own v4a-run-package and
#   runtime library (default build/bin's and build/prefix's), for a change
#   to the runtime alone.
#   A_ENV / B_ENV: environment settings for one side's runs, so that one
#   package can face itself, e.g. the graph over several streams:
#   A_ENV=V4A_GRAPH_STREAMS=1 B_ENV=V4A_GRAPH_STREAMS=4 \
#     bench/ab-steps.sh P.v4apkg P.v4apkg
#
# One JSON line per run, with "side" (A or B) and "round" added, to
# standard output and $OUT/ab-steps.jsonl when $OUT is set.
set -uo pipefail
usage="usage: bench/ab-steps.sh A.v4apkg B.v4apkg [LAYERS:BATCH:CONTEXT ...]"
a=$(realpath "${1:?$usage}") || exit 1
b=$(realpath "${2:?$usage}") || exit 1
shift 2
shapes=("$@")
[[ ${#shapes[@]} -gt 0 ]] || shapes=(all:32:16384 0-2-3:128:65536)
cd "$(dirname "$0")/.."
run=build/bin/v4a-run-package
lines=${OUT:+$OUT/ab-steps.jsonl}
lines=${lines:-/dev/null}
status=0
tag() { # side round
  python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{"):
        row = json.loads(line)
        row["layers"] = sys.argv[3] if sys.argv[3] == "all" else row["layers"]
        row.update(side=sys.argv[1], round=int(sys.argv[2]))
        print(json.dumps(row), flush=True)
' "$1" "$2" "$3"
}
for shape in "${shapes[@]}"; do
  IFS=: read -r layers batch context <<< "$shape"
  select=()
  [[ $layers != all ]] && select=(--layers "${layers//-/,}")
  for round in $(seq "${ROUNDS:-2}"); do
    for side in A B; do
      package=$a settings=${A_ENV:-} runner=${A_RUN:-$run}
      [[ $side == B ]] && package=$b settings=${B_ENV:-} runner=${B_RUN:-$run}
      env $settings timeout 300 "$runner" "$package" --random-weights 1 "${select[@]}" --bench \
        --batch "$batch" --context "$context" --tokens 1 \
        --repeat "${REPEAT:-10}" --graphs both --device-tensors |
        tag "$side" "$round" "$layers" | tee -a "$lines"
      [[ ${PIPESTATUS[0]} == 0 ]] || { echo "$side $shape: FAIL"; status=1; }
    done
  done
done
library=${V4A_LIBRARY:-$PWD/build/prefix/lib/libv4a_runtime.so.2}
if [[ -f $library ]]; then
  for side in A B; do
    package=$a settings=${A_ENV:-} own=${A_LIBRARY:-$library}
    [[ $side == B ]] && package=$b settings=${B_ENV:-} own=${B_LIBRARY:-$library}
    env $settings PYTHONPATH=$PWD/python V4A_LIBRARY=$own timeout 200 \
      python3 bench/graph_overhead.py "$package" 32 256 8 --graphs on 2>&1 |
      grep '^{' | tag "$side" 1 all | tee -a "$lines"
  done
fi
exit $status
