#!/bin/sh
# Runs the libFuzzer harnesses built in BUILD (by `make fuzz`): fuzz/run.sh BUILD SECONDS NAME...
# Each harness starts from its committed corpus (fuzz/corpus/NAME) and regression inputs
# (fuzz/regressions/NAME); new inputs go to BUILD/new-corpus/NAME, never into the repository.
# A crash is copied to fuzz/regressions/NAME/ (commit it with the fix: `make test` replays it)
# and makes this script fail after all harnesses ran.
#   FUZZ_MODE=merge fuzz/run.sh BUILD 0 NAME...  minimises fuzz/corpus/NAME together with what the
#   fuzzing runs found (BUILD/new-corpus/NAME), replacing fuzz/corpus/NAME.
set -u
mkdir -p "${FUZZ_LOG_DIR:-$1}"
build=$1; seconds=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
status=0
for name in "$@"; do
  bin="$build/fuzz_$name"
  corpus="$here/corpus/$name"; regressions="$here/regressions/$name"
  new="$build/new-corpus/$name"; crashes="$build/crashes/$name"
  mkdir -p "$new" "$crashes" "$corpus" "$regressions"
  if [ "${FUZZ_MODE:-fuzz}" = merge ]; then
    merged="$build/merged/$name"
    rm -rf "$merged"; mkdir -p "$merged"
    "$bin" -merge=1 -rss_limit_mb=2048 -timeout=60 "$merged" "$corpus" "$new" >"$build/merge-$name.log" 2>&1 ||
      { echo "fuzz: merging $name failed, see $build/merge-$name.log"; status=1; continue; }
    rm -rf "$corpus"; mkdir -p "$corpus"; cp "$merged"/* "$corpus"/ 2>/dev/null
    echo "fuzz: $name corpus minimised to $(ls "$corpus" | wc -l) inputs, $(du -sk "$corpus" | cut -f1) KiB"
    continue
  fi
  log="${FUZZ_LOG_DIR:-$build}/fuzz-$name.log"
  echo "fuzz: $name for ${seconds}s (log: $log)"
  # -timeout: an input that takes 60 s is a hang (a few are slow under ASan on a busy machine:
  # a sweep plan parses YAML per grid point); -rss_limit_mb: more than 2 GB is a runaway
  # allocation. Both count as crashes. Inputs are kept under 4 KiB (FUZZ_MAX_LEN): the large
  # regression inputs (deep nesting) would otherwise make every mutation slow.
  "$bin" -max_total_time="$seconds" -max_len="${FUZZ_MAX_LEN:-4096}" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$new" "$corpus" "$regressions" >"$log" 2>&1
  rc=$?
  # The final stats: executions and their rate.
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  echo "fuzz: $name: ${runs:-?} executions, ${speed:-?}/s, exit status $rc"
  found=0
  rm -f "$crashes"/slow-unit-*  # slow, not wrong: libFuzzer's note, not a finding
  for crash in "$crashes"/*; do
    [ -f "$crash" ] || continue
    found=1
    cp "$crash" "$regressions/"
    echo "fuzz: $name CRASH: $crash, kept as fuzz/regressions/$name/$(basename "$crash")"
  done
  if [ $rc -ne 0 ] || [ $found -ne 0 ]; then
    status=1
    grep -E -m 20 'ERROR|SUMMARY|runtime error|invariant broken|exception' "$log" | sed "s/^/fuzz: $name: /"
    rm -f "$crashes"/*  # kept in fuzz/regressions now
  fi
done
exit $status
