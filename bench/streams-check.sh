#!/usr/bin/env bash
# Graphs recorded over several streams (V4A_GRAPH_STREAMS) against graphs
# on one: a prefill of a varlen batch, then decode steps as graphs, every
# temporary poisoned first, the outputs compared bit for bit. A missing
# order between two ops that share memory shows as a difference (or a
# NaN from a poisoned byte read too early); it need not show every run,
# so each stream count runs REPEATS times.
#
#   bench/streams-check.sh PACKAGE:LAYERS:LENGTHS ...
#       LAYERS "all" or a list (0-2-3); LENGTHS the batch's prompt lengths
#       (3000-1700-0-1); on the GPU machine with build/bin/v4a-run-package.
#   STREAMS (default "2 4 8"), REPEATS (default 3), DECODE (default 3).
#
# Prints one PASS or FAIL line per package, lengths and stream count;
# exits 1 when any fails.
set -uo pipefail
[[ $# -gt 0 ]] || { echo "usage: bench/streams-check.sh PACKAGE:LAYERS:LENGTHS ..."; exit 2; }
run=$(dirname "$0")/../build/bin/v4a-run-package
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export V4A_FILL_TEMPORARIES=poison
status=0
outputs() { # streams file package layers lengths
  local select=()
  [[ $4 != all ]] && select=(--layers "${4//-/,}")
  local prompt=${5%%-*}
  V4A_GRAPH_STREAMS=$1 timeout 300 "$run" "$3" --random-weights 1 \
    "${select[@]}" --prompt-len "$prompt" --lengths "${5//-/,}" \
    --decode-steps "${DECODE:-3}" --graphs on --outputs "$2" > /dev/null
}
for spec in "$@"; do
  IFS=: read -r package layers lengths <<< "$spec"
  name="$(basename "$package") $layers $lengths"
  if ! outputs 1 "$scratch/one.safetensors" "$package" "$layers" "$lengths"; then
    echo "$name, one stream: run failed: FAIL"
    status=1
    continue
  fi
  for streams in ${STREAMS:-2 4 8}; do
    verdict=PASS
    for repeat in $(seq "${REPEATS:-3}"); do
      if ! outputs "$streams" "$scratch/many.safetensors" "$package" \
          "$layers" "$lengths"; then
        verdict="run $repeat failed: FAIL"
        break
      fi
      cmp -s "$scratch/one.safetensors" "$scratch/many.safetensors" ||
        { verdict="run $repeat differs: FAIL"; break; }
    done
    echo "$name, $streams streams against one: $verdict"
    [[ $verdict == PASS ]] || status=1
  done
done
exit $status
