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
