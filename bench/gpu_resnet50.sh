#!/usr/bin/env bash
# ResNet-50 under a step-memory budget on one device: for each memory
# technique, the largest batch whose step fits (memfit maxbatch) and, at that
# batch, the measured step time and high-water mark of real training steps on
# synthetic data (memfit train --profile: the mean of the steps after the
# first). The batch of each technique is also given against sharing alone,
# the ratio TFLMS reports (4.7x for ResNet-50 on a 16 GB GPU).
#
#   bench/gpu_resnet50.sh build/memfit [OUTDIR]
#
# Settings from the environment: BACKEND (cuda), IMAGE (224), BUDGET (16GiB),
# STEPS (5 training steps per technique), LIMIT_S (240: seconds each memfit
# command may take), POLICIES (a list of flag sets,
# separated by ';'). On the cpu backend, e.g. BACKEND=cpu IMAGE=32
# BUDGET=256MiB, it checks the script itself in a few minutes.
set -uo pipefail
memfit=${1:?usage: gpu_resnet50.sh MEMFIT [OUTDIR]}
out=${2:-.}
backend=${BACKEND:-cuda}
image=${IMAGE:-224}
budget=${BUDGET:-16GiB}
steps=${STEPS:-5}
limit_s=${LIMIT_S:-240}
policies=${POLICIES:-"--policy none;--policy share;--policy recompute;--policy swap;--policy auto;--swap tflms"}
mkdir -p "$out"
field() { sed -n "s/^  \"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" <<<"$2"; }
gib() { awk -v b="$1" 'BEGIN { if (b == "") print "-"; else printf "%.2f", b / 1073741824 }'; }

echo "ResNet-50 ${image}x${image} on --backend $backend, --budget $budget; $steps steps per technique"
printf "%-24s %9s %8s %9s %9s %9s %10s %11s\n" FLAGS max_batch vs_share arena_GiB hwm_GiB host_GiB "step_s" "images/s"
share_batch=0
IFS=';' read -r -a flag_sets <<<"$policies"
for flags in "${flag_sets[@]}"; do
  name=$(tr -c 'a-z0-9' '_' <<<"$flags" | sed 's/^_*//; s/_*$//')
  # shellcheck disable=SC2086
  plan=$(timeout "$limit_s" "$memfit" maxbatch --model resnet50 --image-size "$image" --budget "$budget" \
    --backend "$backend" --json $flags 2>"$out/maxbatch_$name.err")
  batch=$(field max_batch "$plan")
  if [ -z "$batch" ]; then
    printf "%-24s maxbatch failed: %s\n" "$flags" "$(tail -1 "$out/maxbatch_$name.err")"
    continue
  fi
  [ "$flags" = "--policy share" ] && share_batch=$batch
  # shellcheck disable=SC2086
  timeout "$limit_s" "$memfit" train --model resnet50 --image-size "$image" --batch "$batch" --budget "$budget" \
    --backend "$backend" --synthetic --limit $((batch * steps)) --epochs 1 --profile --json \
    $flags >"$out/train_$name.json" 2>"$out/train_$name.err"
  report=$(cat "$out/train_$name.json")
  step=$(sed -n 's/^profile: \([0-9.e+-]*\) s per step.*/\1/p' "$out/train_$name.err")
  ratio=$(awk -v a="$batch" -v b="$share_batch" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
  rate=$(awk -v b="$batch" -v s="$step" 'BEGIN { if (s > 0) printf "%.1f", b / s; else print "-" }')
  printf "%-24s %9s %8s %9s %9s %9s %10s %11s\n" "$flags" "$batch" "$ratio" \
    "$(gib "$(field arena_bytes "$plan")")" "$(gib "$(field high_water_bytes "$report")")" \
    "$(gib "$(field host_bytes "$plan")")" "${step:-failed}" "$rate"
  [ -n "$step" ] || tail -3 "$out/train_$name.err"
done
