#!/usr/bin/env bash
# memfit's ONNX import against PyTorch and onnxruntime, by one command (after
# ./scripts/build.sh):
#   1. installs PyTorch, torchvision, onnx and onnxruntime into bench/onnx/.venv
#      (the CPU-only PyTorch wheel from download.pytorch.org when that index
#      answers, else the default wheel from PyPI);
#   2. builds build/bench/peer_grads (memfit's loss, gradients and forward);
#   3. runs bench/onnx/check.py: torchvision's resnet18 and resnet50 and a
#      2-layer GPT-2 exported at opset 17, their parameter counts, forward
#      outputs against onnxruntime, loss and gradients against PyTorch, plans
#      against the zoo's twins, and a trained model saved with --save-onnx
#      and run in onnxruntime. The table goes to bench/onnx/results/run.txt.
# Arguments go to check.py, e.g. bench/onnx/run.sh --models resnet18.
# Exits 1 when a check fails. Takes about 5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=bench/onnx/.venv

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" || {
    echo "run.sh: cannot create a virtual environment; install python3-venv" >&2
    exit 1
  }
fi
cpu_index=https://download.pytorch.org/whl/cpu
if curl -sfI -m 15 "$cpu_index/torch/" >/dev/null 2>&1; then
  echo "PyTorch: the CPU-only wheel from $cpu_index"
  "$venv/bin/pip" install -q --index-url "$cpu_index" --extra-index-url https://pypi.org/simple \
    torch torchvision numpy onnx onnxruntime
else
  echo "PyTorch: $cpu_index does not answer; the default wheel from PyPI (with CUDA libraries)"
  "$venv/bin/pip" install -q torch torchvision numpy onnx onnxruntime
fi

[ -f build/CMakeCache.txt ] || {
  echo "run.sh: no build/ here; run ./scripts/build.sh first" >&2
  exit 1
}
cmake --build build --target memfit peer_grads -j"$(nproc)" >/dev/null

export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OMP_WAIT_POLICY=passive
mkdir -p bench/onnx/results
{
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  "$venv/bin/python" bench/onnx/check.py --build build --threads 2 "$@"
} 2>&1 | tee bench/onnx/results/run.txt
