#!/usr/bin/env bash
# The fuzz targets (fuzz/) for longer than the test suite runs them: each for
# SECONDS (default 300), from its seeds, printing libFuzzer's final figures
# (executions, coverage, corpus) and failing on any crash, sanitizer report or
# leak. Builds build-fuzz/ with clang first.
# Usage: bench/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-300}"
cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j"$(nproc)" >/dev/null
echo "fuzzing each target for $seconds s on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
targets="ir_text checkpoint idx"
[ -x build-fuzz/fuzz_onnx ] && targets="$targets onnx"  # built where libonnx-dev is
for target in $targets; do
  echo "== fuzz_$target"
  fuzz/run_fuzz.sh "build-fuzz/fuzz_$target" "fuzz/seeds/$target" "$seconds"
done
