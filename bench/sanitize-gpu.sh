#!/usr/bin/env bash
# compute-sanitizer (memcheck and racecheck) over the validation's quick
# cases, on the GPU machine (carry build/bin/v4a-run-package and build/gpu
# from bench/validate-gpu.sh prepare). Prints each tool's summary per case;
# exits non-zero when a tool reports an error.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu
# Temporaries start as 0xff bytes, as in bench/validate-gpu.sh.
export V4A_FILL_TEMPORARIES=${V4A_FILL_TEMPORARIES:-poison}
status=0
sanitize() { # tool name package prompt lengths decode layers
  local tool=$1 name=$2 package=$3 prompt=$4 lengths=$5 decode=$6 layers=$7
  local args=("$dir/$package.v4apkg" --random-weights 7 --prompt-len "$prompt"
              --lengths "$lengths" --decode-steps "$decode" --check --tolerance 0.05)
  [[ -n $layers ]] && args+=(--layers "$layers")
  local log
  log=$(mktemp)
  timeout "${CASE_TIMEOUT:-240}" compute-sanitizer --tool "$tool" \
    --error-exitcode 3 build/bin/v4a-run-package "${args[@]}" > "$log" 2>&1
  local rc=$?
  echo "$tool $name: exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
  grep -E "check:" "$log" | sed "s/^/$tool $name: /"
  # The kernels named in the reports: v4a's own (step_*, meta_*) fail the
  # run; the library's (cuBLASLt) are listed apart.
  local ours theirs
  ours=$(grep -oE "(at|access at) (step|meta)_[a-z0-9_]+" "$log" |
         awk '{print $NF}' | sort | uniq -c | tr '\n' ';')
  theirs=$(grep -oE "(at|access at) [A-Za-z_][A-Za-z0-9_:<>, ]*\+0x" "$log" |
           grep -vE " (step|meta)_" | awk '{print $NF}' | sed 's/+0x//' |
           sort -u | wc -l)
  echo "$tool $name: v4a kernels reported: ${ours:-none}; library kernels reported: $theirs"
  if [[ -n $ours ]] || ! grep -q "check:.*PASS" "$log"; then
    status=1
    grep -m 12 -E "=========" "$log" | sed "s/^/$tool $name: /"
  fi
  rm -f "$log"
}
for tool in memcheck racecheck; do
  sanitize $tool tiny tiny 40 40,13,1 2 ""
  sanitize $tool tiny-v41 tiny-v41 40 40,13,1 2 ""
  sanitize $tool v4-flash-fp8 v4-flash 20 20,3 1 0,2,3
  # The indexer family cutting its candidate buffer (25 rows > k = 16).
  sanitize $tool refdata-8k refdata-8k 100 100,60 2 ""
done
exit $status
