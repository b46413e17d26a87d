#!/usr/bin/env bash
# Builds memfit and runs the default test suite (everything but the `slow` label).
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
