#!/usr/bin/env bash
# Data parallel step time on this machine (training on synthetic data,
# rank 0's numbers, the first step left out):
# 1. Two ranks of one thread each (mpirun -np 2 --threads 1, --batch B)
#    against one process of two threads at --batch 2B, alternating, 3 runs
#    each: examples per second.
# 2. The all-reduce's overlap with the backward pass over bucket sizes, with
#    the communication thread limited to --comm-gbps G: the measured seconds
#    of the sums per step and the part of them the step waited for, beside
#    what `memfit plan --cost measured` predicts for the same step.
# Usage: bench/data_parallel_step_time.sh [MEMFIT] [MODEL FLAGS...]
# (default: --model resnet-cifar --depth 20 --batch 32; G 0.2)
set -euo pipefail
memfit=${1:-build/memfit}
shift || true
model=("$@")
[ ${#model[@]} -gt 0 ] || model=(--model resnet-cifar --depth 20)
batch=${BATCH:-32}
gbps=${GBPS:-0.2}
steps=${STEPS:-30}
mpi=(mpirun -np 2)
if [ "$(id -u)" = 0 ]; then mpi+=(--allow-run-as-root); fi
mpi+=(--oversubscribe)
common=(train "${model[@]}" --synthetic --epochs 1 --schedule constant --log-every 1000)

speed() { sed -n 's/^training speed: \([0-9]*\) examples\/s/\1/p'; }

echo "## 2 ranks x 1 thread against 1 process x 2 threads (examples/s)"
echo "| run | 2 ranks x 1 thread, --batch $batch | 1 process x 2 threads, --batch $((2 * batch)) | ratio |"
echo "|---:|---:|---:|---:|"
for run in 1 2 3; do
  two=$("${mpi[@]}" "$memfit" "${common[@]}" --batch "$batch" --threads 1 \
    --limit $((steps * 2 * batch)) | speed)
  one=$("$memfit" "${common[@]}" --batch $((2 * batch)) --threads 2 \
    --limit $((steps * 2 * batch)) | speed)
  echo "| $run | $two | $one | $(python3 -c "print('%.2f' % ($two / $one))") |"
done

echo
echo "## All-reduce overlap at --comm-gbps $gbps, 2 ranks x 1 thread, --batch $batch"
echo "| --bucket-mb | buckets | measured sums | measured not hidden | hidden | predicted sums | predicted not hidden | predicted hidden |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for mb in 0 0.1 0.5 2 25; do
  log=$("${mpi[@]}" "$memfit" "${common[@]}" --batch "$batch" --threads 1 --bucket-mb "$mb" \
    --comm-gbps "$gbps" --limit $((steps * 2 * batch)))
  line=$(grep "^all-reduce:" <<<"$log")
  buckets=$(sed -n 's/.*summed in \([0-9]*\) buckets.*/\1/p' <<<"$log")
  sums=$(awk '{print $2}' <<<"$line")
  waited=$(awk '{print $10}' <<<"$line")
  plan=$("$memfit" plan "${model[@]}" --batch "$batch" --threads 1 --ranks 2 --bucket-mb "$mb" \
    --comm-gbps "$gbps" --cost measured --json)
  read -r psums pexposed < <(python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print(r["predicted_comm_seconds"], r["predicted_exposed_comm_seconds"])' "$plan")
  python3 -c '
import sys
mb, buckets, sums, waited, psums, pexposed = sys.argv[1:]
sums, waited, psums, pexposed = map(float, (sums, waited, psums, pexposed))
print("| %s | %s | %.4f s | %.4f s | %.0f%% | %.4f s | %.4f s | %.0f%% |" % (
    mb, buckets, sums, waited, 100 * (1 - waited / sums), psums, pexposed, 100 * (1 - pexposed / psums)))
' "$mb" "$buckets" "$sums" "$waited" "$psums" "$pexposed"
done
echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
