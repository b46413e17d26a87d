#!/usr/bin/env bash
# Builds memfit and runs the default test suite (everything but the `slow` label),
# then installs the Python package into a virtual environment and runs its
# tests there, then the fuzz targets of the readers for a few seconds each
# (fuzz/, clang).
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
# The Python package as a user installs it: `pip install .` (pyproject.toml;
# it builds in build-python/) into a fresh virtual environment that sees
# Debian's numpy and pytest, then the Python tests against it, from outside
# the checkout. Nothing is downloaded (--no-index).
if [ "${1:-}" != "--sanitize" ]; then
  rm -rf build-python/venv
  /usr/bin/python3 -m venv --system-site-packages build-python/venv
  build-python/venv/bin/pip install -q --no-index .
  (cd build-python && MEMFIT_PROGRAM="$PWD/../build/memfit" MEMFIT_TEST_TOOLS="$PWD/../build/tests" \
     OMP_WAIT_POLICY=passive venv/bin/python -m pytest -q -p no:cacheprovider ../python/tests)
fi
# The readers' fuzz targets (fuzz/), built with clang under ASan and UBSan,
# each run for a few seconds; the sanitizer run leaves them to the default one.
if [ "${1:-}" != "--sanitize" ]; then
  cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ >/dev/null
  cmake --build build-fuzz -j"$(nproc)"
  ctest --test-dir build-fuzz --output-on-failure -V
fi
