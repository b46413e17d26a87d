#!/usr/bin/env bash
# The README's main job: lenet for two epochs on Fashion-MNIST must reach at
# least 89% test accuracy and print its examples per second.
set -euo pipefail
memfit="$1"
log=$("$memfit" train --model lenet --epochs 2)
echo "$log"
grep -q "examples/s" <<<"$log"
accuracy=$(sed -n 's/^final test accuracy: \([0-9.]*\)%$/\1/p' <<<"$log")
awk -v a="$accuracy" 'BEGIN { exit !(a >= 89.0) }' || { echo "accuracy $accuracy% < 89%"; exit 1; }
