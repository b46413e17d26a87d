#!/usr/bin/env bash
# GPT-2 small at batch 1 and 3,338 positions (memfit's naive form's longest
# under 16 GiB, docs/attention.md): memfit fused and naive, PyTorch's
# scaled_dot_product_attention with and without dropout, each program alone
# (together they would not fit 24 GiB): a warm-up step, 2 timed steps, then
# its memory, as JSON lines (bench/peer/compare.py's protocol). A program
# killed for memory prints nothing and a non-zero status.
#   bench/peer/attention_longest.sh   (after ./scripts/build.sh and run.sh's venv)
set -uo pipefail
cd "$(dirname "$0")"
export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OMP_WAIT_POLICY=passive PYTHONPATH=$PWD
common="--model gpt --batch 1 --seq-len 3338 --threads 2 --warmup 1"
run() {
  echo "== $1"
  shift
  printf 'run 2\ndone\n' | timeout 900 "$@" 2>/dev/null | grep -v USDT
  echo "status $?"
}
run "memfit fused" ../../build/bench/peer_step $common
run "memfit naive" ../../build/bench/peer_step $common --attention naive
run "torch sdpa, dropout 0.1" .venv/bin/python torch_step.py $common --attention sdpa --flush-denormal
run "torch sdpa, no dropout" .venv/bin/python torch_step.py $common --attention sdpa --flush-denormal --no-dropout
run "memfit fused, no dropout" ../../build/bench/peer_step $common --no-dropout
