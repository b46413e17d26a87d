#!/usr/bin/env bash
# The Python entry point from nothing: a fresh virtual environment,
# `pip install .`, PyPI's torch, torchvision and onnx (torch.onnx needs it), then the README's ten-line
# example (bench/python/resnet18.py: a torchvision ResNet-18 planned under a
# budget, its largest batch, four training steps, the weights loaded back),
# and the Python tests with torch present (python/tests). Its output goes to
# bench/python/results/fresh_venv.txt, quoted in docs/python.md.
# Usage: bench/python/fresh_venv.sh [VENV] (default: a new directory in /tmp).
# Downloads torch (with its CUDA libraries, several GB) from PyPI; about
# 10 minutes on 2 cores, most of it building memfit (in a build directory of
# its own, inside VENV, so that nothing is reused).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${1:-$(mktemp -d /tmp/memfit-venv.XXXXXX)}
mkdir -p bench/python/results
{
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(/usr/bin/python3 --version)"
  /usr/bin/python3 -m venv "$venv"
  echo "\$ pip install .  (into the fresh virtual environment $venv, building in $venv/build)"
  start=$(date +%s)
  MEMFIT_BUILD_DIR=$venv/build "$venv/bin/pip" install -q .
  echo "pip install . took $(( $(date +%s) - start )) s"
  "$venv/bin/pip" install -q torch torchvision onnx pytest
  "$venv/bin/python" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)'
  echo "\$ python bench/python/resnet18.py"
  start=$(date +%s)
  (cd /tmp && OMP_NUM_THREADS=$(nproc) "$venv/bin/python" "$OLDPWD/bench/python/resnet18.py")
  echo "the example took $(( $(date +%s) - start )) s"
  echo "\$ pytest python/tests  (the installed package, torch present)"
  (cd /tmp && MEMFIT_PROGRAM=$OLDPWD/build/memfit MEMFIT_TEST_TOOLS=$OLDPWD/build/tests \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "$OLDPWD/python/tests" 2>&1 | tail -3)
} 2>&1 | tee bench/python/results/fresh_venv.txt
