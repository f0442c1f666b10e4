#!/usr/bin/env bash
# Builds the fuzz targets with clang and runs each for SECONDS (default 600),
# one after the other, one process each (the machine is shared).
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]     TARGET: frontend, ir, pipeline, safetensors, npy, image
#
# Inputs go up to 1 MiB (-max_len), long enough for tokens of more than 16 KB
# and 30,000-term expressions; the dictionaries hold the tokens of each
# grammar; the seeds (make_seeds.py) hold the examples, the golden tests and
# one input per class of hostile input. A unit slower than 10 s is a failure
# (-timeout), and the slowest units are reported, never cut from the log.
# Logs go to build/fuzz/fuzz_TARGET.log, crashes to tests/fuzz/crash-*.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frontend ir pipeline safetensors npy image)
dir=build/fuzz
CC=clang cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBURSTC_FUZZ=ON -DBURSTC_WERROR=OFF > /dev/null
cmake --build "$dir" -j2 --target $(printf 'fuzz_%s ' "${targets[@]}")
burstc=${BURSTC:-build/test/tools/burstc}   # a built burstc adds printed and planned examples to the IR seeds
[ -x "$burstc" ] || burstc=
tests/fuzz/make_seeds.py tests/fuzz/corpus-seeds $burstc
status=0
for t in "${targets[@]}"; do
  corpus=tests/fuzz/corpus-$t
  mkdir -p "$corpus"
  dict=tests/fuzz/burst.dict
  [ "$t" = ir ] && dict=tests/fuzz/ir.dict
  [ "$t" = safetensors ] && dict=tests/fuzz/safetensors.dict
  [ "$t" = npy ] && dict=tests/fuzz/npy.dict
  [ "$t" = image ] && dict=tests/fuzz/npy.dict   # no grammar: the seeds carry the structure
  log=$dir/fuzz_$t.log
  echo "== fuzz_$t for ${secs}s (log: $log)"
  if ! "$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=1048576 -timeout=10 \
      -rss_limit_mb=4096 -report_slow_units=2 -print_final_stats=1 \
      -dict="$dict" -artifact_prefix=tests/fuzz/crash-$t- "$corpus" tests/fuzz/corpus-seeds/$t > "$log" 2>&1; then
    status=1
  fi
  # What matters, in full: findings, slow units, and the final statistics.
  grep -E "ERROR|SUMMARY|Slowest unit|slow-unit|timeout|crash-|Done [0-9]+ runs|stat::" "$log" || true
done
exit $status
