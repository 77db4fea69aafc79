#!/usr/bin/env bash
# Runs every libFuzzer target of the sanitizer build for a bounded time
# (V4A_FUZZ_SECONDS, default 60) from its seed corpus. Fails on any crash,
# leak or sanitizer report. New inputs go to a scratch copy of the corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${V4A_SAN_BUILD_DIR:-build-san}
seconds=${V4A_FUZZ_SECONDS:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
# See scripts/sanitize.sh for allow_user_poisoning.
export ASAN_OPTIONS=detect_leaks=1:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for target in config safetensors run_flags checkpoint_index package; do
  mkdir -p "$work/$target"
  echo "fuzz_$target: ${seconds}s from test/fuzz/corpus/$target"
  if ! "$build/test/fuzz/fuzz_$target" -max_total_time="$seconds" \
      -print_final_stats=1 -artifact_prefix="$artifacts/" -timeout=10 \
      $( [ -f "test/fuzz/$target.dict" ] && echo "-dict=test/fuzz/$target.dict") \
      "$work/$target" "test/fuzz/corpus/$target" 2>"$work/$target.log"; then
    status=1
    tail -40 "$work/$target.log"
    echo "reproducers kept in $artifacts:"
    ls "$artifacts" | grep -E '^(crash|leak|timeout|oom)-' || true
  fi
  grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$work/$target.log" || true
done
exit $status
