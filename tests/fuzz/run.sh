#!/usr/bin/env bash
# Builds the fuzz targets with clang and runs each for SECONDS (default 600).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-600}
dir=build/fuzz
CC=clang cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBURSTC_FUZZ=ON -DBURSTC_WERROR=OFF \
  -DBURSTC_DIRS="ir;grammar;frontend;tests" > /dev/null
cmake --build "$dir" -j"$(nproc)" --target fuzz_ir fuzz_frontend
for t in ir frontend; do
  corpus=tests/fuzz/corpus-$t
  mkdir -p "$corpus"
  if [ $t = ir ]; then
    burstc=${BURSTC:-build/test/tools/burstc}   # any built burstc turns the examples into IR seeds
    if [ -x "$burstc" ]; then
      for f in examples/*/*.burst; do "$burstc" "$f" > "$corpus/$(basename "$f" .burst).ir" 2>/dev/null || true; done
    fi
    find tests/lit -name '*.ir' -exec cp {} "$corpus/" \;
  else
    cp examples/*/*.burst "$corpus/"
    find tests/lit -name '*.burst' -exec cp {} "$corpus/" \;
  fi
  echo "== fuzz_$t for ${secs}s"
  "$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=65536 -timeout=60 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix=tests/fuzz/crash- "$corpus" 2>&1 | tail -25
done
