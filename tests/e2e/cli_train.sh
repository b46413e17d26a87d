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
# Resuming a run that is over says so and fails, instead of training nothing.
if out=$("$memfit" train --model mlp --epochs 2 --batch 50 --limit 1000 --stop-after 1 --resume "$dir/mlp.ckpt" 2>&1); then
  echo "resuming a finished run succeeded: $out"; exit 1
fi
grep -q "is after epoch 1, and the run ends (--stop-after) at epoch 1: nothing is left to train" <<<"$out"
# A loss that becomes nan stops the run with a message naming the step.
if out=$("$memfit" train --model mlp --synthetic --epochs 3 --batch 32 --limit 256 --lr 1e30 2>&1); then
  echo "a diverging run succeeded: $out"; exit 1
fi
grep -Eq "the loss is (nan|infinite) at epoch [0-9]+, micro-batch [0-9]+ \(optimizer step [0-9]+\): training diverged and stopped" <<<"$out"
# SIGINT stops training after the current step, writes the checkpoint and
# exits 130; the resume continues from it. A second signal ends it at once.
"$memfit" train --model lenet --synthetic --batch 1024 --limit 8192 --epochs 3 --log-every 1 \
  --save "$dir/signal.ckpt" >"$dir/signal.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q "^epoch 1 step 1 " "$dir/signal.log" && break; sleep 0.05; done
kill -INT "$pid"
rc=0; wait "$pid" || rc=$?
cat "$dir/signal.log"
[ "$rc" -eq 130 ]
grep -q "^stopped at epoch 1, optimizer step [0-9]*, as asked$" "$dir/signal.log"
grep -q "memfit train: stopped by SIGINT, checkpoint $dir/signal.ckpt written" "$dir/signal.log"
log=$("$memfit" train --model lenet --synthetic --batch 1024 --limit 8192 --epochs 3 --stop-after 1 \
      --resume "$dir/signal.ckpt")
grep -q "^epoch 1 done" <<<"$log"
"$memfit" train --model lenet --synthetic --batch 1024 --limit 8192 --epochs 3 --log-every 1 \
  >"$dir/twice.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q "^epoch 1 step 1 " "$dir/twice.log" && break; sleep 0.05; done
# Step 2 is then under way (a step takes about a second): a signal sent at
# once could land between step 1's log line and the check that follows it,
# stopping the run before the second signal is sent.
sleep 0.3
kill -TERM "$pid"
for _ in $(seq 1 600); do grep -q "stopping after this step" "$dir/twice.log" && break; sleep 0.01; done
kill -TERM "$pid" 2>/dev/null || true
rc=0; wait "$pid" || rc=$?
cat "$dir/twice.log"
[ "$rc" -eq 143 ]
if grep -q "stopped at epoch" "$dir/twice.log"; then echo "the second signal did not stop at once"; exit 1; fi
echo "cli_train: signals ok"
# --policy auto says which plan it chose.
log=$("$memfit" train --model lenet --synthetic --epochs 1 --batch 16 --limit 32 --policy auto --budget 8MiB)
grep -Eq "^policy auto: plan [a-z+-]+ chosen \(" <<<"$log"
# Epochs whose micro-batches int64 cannot count, and a stop past the end, are refused.
if out=$("$memfit" train --model lenet --synthetic --batch 8 --limit 16 --epochs 9223372036854775807 2>&1); then
  echo "--epochs 2^63-1 trained: $out"; exit 1
fi
grep -q "more micro-batches than a run counts" <<<"$out"
if out=$("$memfit" train --model lenet --synthetic --batch 8 --limit 16 --epochs 2 --stop-after 3 2>&1); then
  echo "--stop-after past --epochs trained: $out"; exit 1
fi
grep -q -- "--stop-after 3 is past the run's end (--epochs 2)" <<<"$out"
# --check-replicas without mpirun says there is nothing to compare.
log=$("$memfit" train --model lenet --synthetic --epochs 1 --batch 16 --limit 32 --check-replicas)
grep -q "^--check-replicas: one rank, no replicas to compare" <<<"$log"
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
# A checkpoint trained on Fashion-MNIST does not resume on other examples,
# even with as many of them.
refused "the training data: Fashion-MNIST (training set CRC-32 [0-9a-f]*) in the checkpoint, synthetic images (10 classes) of images \[1,28,28\] now" \
  train --model mlp --epochs 2 --batch 50 --limit 1000 --synthetic --resume "$dir/mlp.ckpt"
echo "cli_train: ok"
# A run that needs more memory than the machine has is refused before
# anything is allocated, naming both sizes and the flags that help (GPT-2
# small at its default batch plans about 147 GiB), never a crash.
refused "but this machine has" train --model gpt --synthetic --epochs 1
refused "make the step smaller: --budget BYTES" train --model mlp --synthetic --batch 4000000000 --epochs 1
# More examples per step than any data set holds (2^32 - 1).
refused "more than any data set's 2^32 - 1 examples" train --model mlp --synthetic --batch 10000000000 --epochs 1
echo "cli_train: memory ok"
# Evaluation fits the budget training is given: Fashion-MNIST's test batches
# of 1000 would plan more than this budget, so smaller ones are chosen, and
# said.
# The budget: the training step's arena on this machine (its ISA decides the
# layouts' padding), and a little more.
arena=$("$memfit" plan --model lenet --batch 64 --json | sed -n 's/^  "arena_bytes": \([0-9]*\),$/\1/p')
log=$("$memfit" train --model lenet --batch 64 --budget $((arena + 100000)) --epochs 1 --limit 1000)
echo "$log"
grep -Eq "^evaluation: batches of [0-9]+ test examples, not 1000: the largest whose plan fits --budget$" <<<"$log"
grep -q "final test accuracy" <<<"$log"
echo "cli_train: budget ok"
# --json: stdout holds one JSON object (a loss per micro-batch, the arena,
# the steps), the progress lines go to stderr.
json=$("$memfit" train --model lenet --synthetic --epochs 1 --batch 16 --limit 64 --accumulate 2 --json 2>"$dir/progress.txt")
[ "$(head -n 1 <<<"$json")" = "{" ] && [ "$(tail -n 1 <<<"$json")" = "}" ]
grep -Eq '^  "losses": \[[0-9.]+, [0-9.]+, [0-9.]+, [0-9.]+\],$' <<<"$json"
grep -q '^  "optimizer_steps": 2,$' <<<"$json"
grep -q '^  "accumulate": 2,$' <<<"$json"
grep -Eq '^  "arena_bytes": [1-9][0-9]*,$' <<<"$json"
grep -q '^  "stopped": false$' <<<"$json"
grep -q "^memory plan: arena" "$dir/progress.txt"
! grep -q "training speed" <<<"$json"
echo "cli_train: json ok"
