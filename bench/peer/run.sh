#!/usr/bin/env bash
# memfit against PyTorch, by one command (after ./scripts/build.sh):
#   1. installs the newest PyTorch release into bench/peer/.venv (its own
#      virtual environment): the CPU-only wheel from download.pytorch.org when
#      that index answers, else the default wheel from PyPI (with its CUDA
#      libraries, several GB; they are loaded but unused);
#   2. builds bench/peer's two memfit programs (peer_step, peer_grads);
#   3. the numerical cross-check (crosscheck.py): the same weights and batch in
#      both, the loss and every gradient within a relative error of 1e-4;
#   4. the side-by-side steps (compare.py): the table of docs/peer.md, written
#      to bench/peer/results/ (run.txt: everything this script printed).
# Arguments go to compare.py, e.g. bench/peer/run.sh --models lenet,gpt --rounds 2.
# Exits 1 when the cross-check fails. Takes about 20 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=bench/peer/.venv

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" || {
    echo "run.sh: cannot create a virtual environment; install python3-venv" >&2
    exit 1
  }
fi
cpu_index=https://download.pytorch.org/whl/cpu
if curl -sfI -m 15 "$cpu_index/torch/" >/dev/null 2>&1; then
  echo "PyTorch: the CPU-only wheel from $cpu_index"
  "$venv/bin/pip" install -q --upgrade --index-url "$cpu_index" \
    --extra-index-url https://pypi.org/simple torch numpy
  echo "$cpu_index" >"$venv/torch-index.txt"
else
  echo "PyTorch: $cpu_index does not answer; the default wheel from PyPI (with CUDA libraries)"
  "$venv/bin/pip" install -q --upgrade torch numpy
  echo "https://pypi.org/simple (default wheel)" >"$venv/torch-index.txt"
fi

[ -f build/CMakeCache.txt ] || {
  echo "run.sh: no build/ here; run ./scripts/build.sh first" >&2
  exit 1
}
cmake --build build --target peer_step peer_grads -j"$(nproc)" >/dev/null

export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OMP_WAIT_POLICY=passive PYTHONPATH=bench/peer
mkdir -p bench/peer/results
{
  echo "PyTorch index: $(cat "$venv/torch-index.txt")"
  echo "== cross-check: loss and gradients, memfit against PyTorch"
  "$venv/bin/python" bench/peer/crosscheck.py --peer-grads build/bench/peer_grads --threads 2
  echo "== training steps, side by side"
  "$venv/bin/python" bench/peer/compare.py --peer-step build/bench/peer_step --threads 2 "$@"
} 2>&1 | tee bench/peer/results/run.txt
