#!/usr/bin/env bash
# A short run of `memfit train` through the command line: progress lines with
# examples per second, the test accuracy, a checkpoint, and a resume from it.
set -euo pipefail
memfit="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
log=$("$memfit" train --model mlp --epochs 2 --stop-after 1 --batch 50 --limit 1000 --log-every 5 --save "$dir/mlp.ckpt")
echo "$log"
grep -Eq "^epoch 1 step 5 loss [0-9.]+ [0-9]+ examples/s$" <<<"$log"
grep -q "final test accuracy" <<<"$log"
[ -s "$dir/mlp.ckpt" ]
log=$("$memfit" train --model mlp --epochs 2 --batch 50 --limit 1000 --resume "$dir/mlp.ckpt")
echo "$log"
grep -q "resumed from" <<<"$log"
grep -q "epoch 2 done" <<<"$log"
# --profile: the phases and the op kinds of the steps after the first;
# --trace: a Chrome trace of the last step.
log=$("$memfit" train --model lenet --synthetic --epochs 1 --batch 16 --limit 64 --profile --trace "$dir/step.json")
echo "$log"
grep -Eq "^model lenet: [0-9]+ nodes per step; kernels: cpu [0-9]+, reference 0$" <<<"$log"
grep -Eq "^profile: [0-9.]+ s per step \(mean of 3 steps\)$" <<<"$log"
grep -Eq "^  backward +[0-9]+ +[0-9.]+ +[0-9.]+%$" <<<"$log"
grep -Eq "^  conv2d_grad_weight +2 +[0-9.]+ +[0-9.]+%  cpu$" <<<"$log"
grep -q "trace of the last step written to $dir/step.json" <<<"$log"
grep -q '"traceEvents"' "$dir/step.json"
grep -q '"name": "thread_name", "args": {"name": "copy engine"}' "$dir/step.json"
# Output paths are checked before training: a missing directory, a FIFO
# (left a FIFO) and a directory are refused at once, naming the reason;
# --resume refuses what is not a regular file (/dev/zero, a FIFO) instead of
# reading it.
mkfifo "$dir/fifo"
refused() {  # refused EXPECTED-TEXT ARGS...: exit 1 with the text, before any epoch
  local expected="$1" out
  shift
  if out=$(timeout 60 "$memfit" "$@" 2>&1); then
    echo "accepted: $*"
    exit 1
  fi
  echo "$out"
  grep -q "$expected" <<<"$out"
  if grep -q "^epoch" <<<"$out"; then
    echo "trained before refusing: $*"
    exit 1
  fi
}
refused "directory $dir/nodir: No such file or directory" \
  train --model lenet --synthetic --epochs 1 --limit 64 --save "$dir/nodir/ck.bin"
refused "it is a FIFO" train --model lenet --synthetic --epochs 1 --limit 64 --save "$dir/fifo"
[ -p "$dir/fifo" ]
refused "it is a directory" train --model lenet --synthetic --epochs 1 --limit 64 --save "$dir"
refused "directory $dir/nodir" train --model lenet --synthetic --epochs 1 --limit 64 --trace "$dir/nodir/t.json"
refused "not a regular file" train --model lenet --synthetic --epochs 1 --limit 64 --resume /dev/zero
refused "not a regular file" train --model lenet --synthetic --epochs 1 --limit 64 --resume "$dir/fifo"
refused "directory $dir/nodir" plan --model lenet --batch 8 --timeline "$dir/nodir/t.svg"
echo "cli_train: ok"
# A run that needs more memory than the machine has is refused before
# anything is allocated, naming both sizes and the flags that help (GPT-2
# small at its default batch plans about 147 GiB), never a crash.
refused "but this machine has" train --model gpt --synthetic --epochs 1
refused "make the step smaller: --budget BYTES" train --model mlp --synthetic --batch 10000000000 --epochs 1
echo "cli_train: memory ok"
# Evaluation fits the budget training is given: Fashion-MNIST's test batches
# of 1000 would plan more than this budget, so smaller ones are chosen, and
# said.
log=$("$memfit" train --model lenet --batch 64 --budget 12000000 --epochs 1 --limit 1000)
echo "$log"
grep -Eq "^evaluation: batches of [0-9]+ test examples, not 1000: the largest whose plan fits --budget$" <<<"$log"
grep -q "final test accuracy" <<<"$log"
echo "cli_train: budget ok"
