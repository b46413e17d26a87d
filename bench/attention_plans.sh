#!/usr/bin/env bash
# Fused against naive attention, planning only (no step runs):
# 1. GPT-2 small at batch 1 and 1024 to 16384 positions: the planned arena and
#    the activation bytes at the plan's peak (memfit plan --json), each form;
# 2. the longest sequence of GPT-2 small at batch 1 that fits 16 GiB (memfit
#    maxbatch --vary seq-len): naive, fused, fused with recomputation, fused
#    with --policy auto;
# 3. seq2seq (Luong, batch 128) at 50 + 50 and 200 + 200 steps, each form.
# Usage: bench/attention_plans.sh build/memfit
set -euo pipefail
memfit="$1"
field() { sed -n "s/^  \"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" <<<"$json"; }
activations() { grep -oE '"activations": [0-9]+' <<<"$json" | grep -oE '[0-9]+$'; }
gib() { awk -v b="$1" 'BEGIN { printf "%.2f GiB", b / 1073741824 }'; }

echo "GPT-2 small, batch 1: memfit plan --model gpt --batch 1 --seq-len T --attention FORM --json"
printf "%6s | %12s %12s | %12s %12s %6s\n" T naive_arena naive_activ fused_arena fused_activ x2
previous=0
for t in 1024 2048 4096 8192 16384; do
  json=$("$memfit" plan --model gpt --batch 1 --seq-len "$t" --attention naive --json)
  naive_arena=$(field arena_bytes) naive_activations=$(activations)
  json=$("$memfit" plan --model gpt --batch 1 --seq-len "$t" --attention fused --json)
  fused_activations=$(activations)
  growth=-
  [ "$previous" -gt 0 ] && growth=$(awk -v a="$fused_activations" -v b="$previous" 'BEGIN { printf "%.2f", a / b }')
  printf "%6s | %12s %12s | %12s %12s %6s\n" "$t" "$(gib "$naive_arena")" "$(gib "$naive_activations")" \
    "$(gib "$(field arena_bytes)")" "$(gib "$fused_activations")" "$growth"
  previous=$fused_activations
done

echo
echo "GPT-2 small, batch 1, the longest sequence under 16 GiB:"
echo "  memfit maxbatch --model gpt --batch 1 --budget 16GiB --vary seq-len --json FLAGS"
printf "%-42s %11s %10s %22s\n" FLAGS max_seq_len arena predicted_step_seconds
for flags in "--attention naive" "--attention fused" "--attention naive --recompute optimal" \
             "--attention fused --recompute optimal" "--attention fused --policy auto"; do
  # shellcheck disable=SC2086
  json=$("$memfit" maxbatch --model gpt --batch 1 --budget 16GiB --vary seq-len --json $flags)
  printf "%-42s %11s %10s %22s\n" "$flags" "$(field max_seq_len)" "$(gib "$(field arena_bytes)")" \
    "$(field predicted_step_seconds)"
done

echo
echo "seq2seq, batch 128: memfit plan --model seq2seq --batch 128 --seq-len T --attention FORM --json"
printf "%6s %-6s %12s %12s %7s\n" T form arena lower_bound nodes
for t in 50 200; do
  for form in naive fused; do
    json=$("$memfit" plan --model seq2seq --batch 128 --seq-len "$t" --attention "$form" --json)
    printf "%6s %-6s %12s %12s %7s\n" "$t" "$form" "$(gib "$(field arena_bytes)")" \
      "$(gib "$(field lower_bound_bytes)")" "$(field num_nodes)"
  done
done
