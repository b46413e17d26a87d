#!/usr/bin/env bash
# Per-rank plans of data-parallel steps (planning only, no process started):
# ResNet-50 at 224^2, 32 images per rank, and GPT-2 small at 1024 positions,
# 4 sequences per rank, both with AdamW, at N = 1, 2, 4 and 8 ranks, with
# --shard none, optimizer (ZeRO-1) and gradients (ZeRO-2), and a
# network of --comm-gbps 12.5 (100 Gb/s Ethernet). Prints one markdown row
# per plan: the arena, its parts at the peak, the gradient buckets, and the
# predicted all-reduce seconds and the part the backward pass does not hide.
# Usage: bench/data_parallel_plans.sh [MEMFIT] [EXTRA FLAGS...]
set -euo pipefail
memfit=${1:-build/memfit}
shift || true
echo "| model | ranks | shard | arena | parameters | gradients | optimizer state | activations | buckets | summed | predicted step | all-reduce | not hidden |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for spec in "resnet50 --batch 32" "gpt --batch 4"; do
  for shard in none optimizer gradients; do
  for ranks in 1 2 4 8; do
    [ "$ranks" = 1 ] && [ "$shard" != none ] && continue
    # shellcheck disable=SC2086
    "$memfit" plan --model $spec --optimizer adamw --ranks "$ranks" --shard "$shard" \
      --comm-gbps 12.5 --json "$@" |
      python3 -c '
import json, sys
r = json.load(sys.stdin)
gib = lambda b: "%.2f GiB" % (b / 2**30)
mib = lambda b: "%.1f MiB" % (b / 2**20)
role = r["by_role"]
print("| %s | %d | %s | %s | %s | %s | %s | %s | %d | %s | %.3f s | %.3f s | %.3f s |" % (
    r["model"], r["ranks"], r["shard"], gib(r["arena_bytes"]), mib(role["parameters"]), mib(role["gradients"]),
    mib(role["optimizer_state"]), mib(role["activations"]), r["buckets"], mib(r["reduced_bytes"]),
    r["predicted_step_seconds"], r["predicted_comm_seconds"], r["predicted_exposed_comm_seconds"]))'
  done
  done
done
