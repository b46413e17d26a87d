#!/usr/bin/env bash
# Writes the plan of every zoo model at one batch under the policies none,
# sqrt, swap and auto, one set of files per model and policy in OUT: as
# `memfit plan --json` reports it (the arena, the host pool, the lower bound,
# every role's bytes, the live bytes at every step of the schedule, the
# techniques' counts, the predicted time), its --timeline SVG, and, with
# PLAN_SLICES (the test tool tests/tools/plan_slices of the same build), the
# graph the executor runs and every value's and workspace's slice. Two
# builds whose OUTs are the same (diff -r) plan every zoo step to the byte.
# Usage: [PLAN_SLICES=build/tests/plan_slices] scripts/plan_fingerprints.sh MEMFIT OUT [BATCH]
set -euo pipefail
memfit=$1
out=$2
batch=${3:-2}
slices=${PLAN_SLICES:-}
mkdir -p "$out"
models=$("$memfit" models | awk 'NR > 1 { print $1 }')
for model in $models; do
  # auto and swap aim at sharing's arena less half its activations at the peak.
  budget=$("$memfit" plan --model "$model" --batch "$batch" --json |
           python3 -c 'import json, sys; p = json.load(sys.stdin)
print(p["arena_bytes"] - p["by_role"]["activations"] // 2)')
  for policy in none sqrt swap auto; do
    case $policy in
      none) flags=(--policy none) ;;
      sqrt) flags=(--recompute sqrt) ;;
      swap) flags=(--policy swap --budget "$budget") ;;
      auto) flags=(--policy auto --budget "$budget") ;;
    esac
    file="$out/$model-$policy"
    # A plan over the budget is an error whose message names the smallest
    # arena: it is compared too.
    rc=0
    "$memfit" plan --model "$model" --batch "$batch" "${flags[@]}" --json \
      --timeline "$file.svg" > "$file.json" 2> "$file.err" || rc=$?
    echo "exit $rc" >> "$file.err"
    if [ -n "$slices" ] && [ "$rc" = 0 ]; then
      case $policy in
        none) args=(--policy none) ;;
        sqrt) args=(--recompute sqrt) ;;
        *) args=(--policy "$policy" --budget "$budget") ;;
      esac
      "$slices" "$model" "$batch" "${args[@]}" > "$file.slices"
    fi
    echo "$model $policy: exit $rc, $(wc -c < "$file.json") bytes of JSON"
  done
done
