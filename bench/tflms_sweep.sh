#!/usr/bin/env bash
# The TFLMS knobs side by side, planning only (no step runs): ResNet-50 at
# 224x224, the largest batch under 16 GiB per setting (memfit maxbatch); 3D
# U-Net at batch 1, the arena per cubic volume and setting (memfit plan), so
# the largest volume under 16 GiB can be read off. Usage:
#   bench/tflms_sweep.sh build/memfit
set -euo pipefail
memfit="$1"
field() { sed -n "s/^  \"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" <<<"$json"; }
gib() { awk -v b="$1" 'BEGIN { printf "%.2f GiB", b / 1073741824 }'; }

echo "ResNet-50 224x224, --budget 16GiB: memfit maxbatch --model resnet50 --image-size 224 --budget 16GiB --json FLAGS"
printf "%-52s %9s %8s %10s %11s %8s %9s\n" FLAGS max_batch vs_share arena host_pool swapped swap_ins
base=0
for flags in "" "--swap budget" "--swap tflms" "--swap tflms --swap-fuse" \
             "--swap tflms --swap-trigger direct_order" "--swap tflms --swap-lb 2" \
             "--swap tflms --swap-lb 3" "--swap tflms --swap-lb 5" "--swap tflms --swap-lb 10" \
             "--swap tflms --swap-lb 3 --swap-fuse" "--swap tflms --swap-n-tensors 100"; do
  # shellcheck disable=SC2086
  json=$("$memfit" maxbatch --model resnet50 --image-size 224 --budget 16GiB --json $flags)
  batch=$(field max_batch)
  [ "$base" -eq 0 ] && base=$batch
  swap_ins=$(field swap_ins)
  printf "%-52s %9s %7.2fx %10s %11s %8s %9s\n" "${flags:-(sharing only)}" "$batch" \
    "$(awk -v a="$batch" -v b="$base" 'BEGIN { print a / b }')" "$(gib "$(field arena_bytes)")" \
    "$(gib "$(field host_bytes)")" "$(field swapped_values)" "${swap_ins:--}"
done

echo
echo "3D U-Net, batch 1: memfit plan --model unet3d --batch 1 --volume V --json FLAGS (arena; * fits 16 GiB)"
volumes=(160 176 192 208 224 240)
printf "%-40s" FLAGS; for v in "${volumes[@]}"; do printf " %11s" "$v^3"; done; echo
for flags in "" "--swap budget" "--swap tflms" "--swap tflms --swap-branches" \
             "--swap tflms --swap-fuse"; do
  printf "%-40s" "${flags:-(sharing only)}"
  for v in "${volumes[@]}"; do
    # shellcheck disable=SC2086
    json=$("$memfit" plan --model unet3d --batch 1 --volume "$v" --json $flags)
    arena=$(field arena_bytes)
    mark=" "; [ "$arena" -le 17179869184 ] && mark="*"
    printf " %10s%s" "$(gib "$arena" | sed 's/ GiB//')" "$mark"
  done
  echo
done
