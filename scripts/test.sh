#!/usr/bin/env bash
# Builds memfit and runs the default test suite (everything but the `slow` label),
# then the fuzz targets of the readers for a few seconds each (fuzz/, clang).
# With --sanitize, builds in build-sanitize/ with AddressSanitizer and
# UndefinedBehaviorSanitizer instead, with every memory plan checked by the
# independent verifier, and runs the same tests under them.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build
flags=(-DCMAKE_BUILD_TYPE=Release)
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-sanitize
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMFIT_SANITIZE=ON -DMEMFIT_VERIFY_PLANS=ON)
fi
cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
ctest --test-dir "$dir" -j"$(nproc)" --output-on-failure -LE slow
# The readers' fuzz targets (fuzz/), built with clang under ASan and UBSan,
# each run for a few seconds; the sanitizer run leaves them to the default one.
if [ "${1:-}" != "--sanitize" ]; then
  cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ >/dev/null
  cmake --build build-fuzz -j"$(nproc)"
  ctest --test-dir build-fuzz --output-on-failure -V
fi
