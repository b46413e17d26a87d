#!/usr/bin/env bash
# Data parallel over MPI, end to end: `mpirun -np 2 memfit train` at --batch B
# against one process at --batch 2B, 20 optimizer steps each on the same
# examples, for mlp, lenet and resnet-cifar-20. Every rank's state is checked
# bit-identical to rank 0's after every step (--check-replicas); the losses
# of every step and the checkpoints' parameters and optimizer state are
# compared.
#
# Tolerances (relative, |a - b| / (1 + |b|)): mlp and lenet differ only by
# the order in which float sums round (measured about 2e-7 after 20 steps):
# 1e-5. resnet-cifar-20 normalizes each rank's 8 rows with their own batch
# statistics, as DistributedDataParallel does, where one process normalizes
# all 16 together: the runs compute different (equally valid) functions, so
# only the losses' agreement (within 10%) and training's progress are checked.
# ZeRO's two stages must give the unsharded run's bits. Then a rank killed
# with SIGKILL must end the job, and its checkpoint resume.
# Usage: cli_mpi.sh MEMFIT CHECKPOINT_DIFF MPIEXEC
set -euo pipefail
memfit="$1"
diff_tool="$2"
mpiexec="$3"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The per-step losses of a log, one per line.
losses() { sed -n 's/^epoch 1 step [0-9]* loss \([0-9.]*\) .*/\1/p' "$1"; }

run_pair() {  # NAME FLAGS...: 2 ranks at 8, one process at 16
  local name=$1
  shift
  local common=(--synthetic --limit 320 --epochs 1 --schedule constant --threads 1 --log-every 1
    --seed 7 "$@")
  "$mpiexec" -np 2 "$memfit" train --batch 8 --check-replicas --save "$dir/$name.2.ckpt" \
    "${common[@]}" >"$dir/$name.2.log" 2>&1 || { cat "$dir/$name.2.log"; exit 1; }
  "$memfit" train --batch 16 --save "$dir/$name.1.ckpt" "${common[@]}" >"$dir/$name.1.log" 2>&1 ||
    { cat "$dir/$name.1.log"; exit 1; }
  cat "$dir/$name.2.log"
  grep -q "data parallel: 2 ranks (mpi), 16 examples per micro-batch (8 per rank)" "$dir/$name.2.log"
  # Rank 0 alone logs: one line per step.
  [ "$(losses "$dir/$name.2.log" | wc -l)" -eq 20 ]
  [ "$(losses "$dir/$name.1.log" | wc -l)" -eq 20 ]
}

compare_losses() {  # NAME TOLERANCE
  paste <(losses "$dir/$1.2.log") <(losses "$dir/$1.1.log") |
    awk -v tol="$2" -v name="$1" '{ d = $1 - $2; if (d < 0) d = -d;
      if (d > tol * (1 + $2)) { print name ": step " NR " loss " $1 " against " $2; bad = 1 } }
      END { exit bad }'
}

for model in mlp lenet; do
  run_pair "$model" --model "$model" --no-dropout
  # Losses print with 4 decimals: they agree to the last one shown.
  compare_losses "$model" 2e-4
  "$diff_tool" "$dir/$model.2.ckpt" "$dir/$model.1.ckpt" 1e-5
done

# ZeRO over MPI: two ranks sharding the optimizer state, and the gradients,
# give the unsharded ranks' parameters and optimizer state bit for bit (with
# two ranks, the reduce-scatter and the all-reduce both add the same two
# partial sums); the checkpoint holds the same per-parameter state.
for shard in optimizer gradients; do
  "$mpiexec" -np 2 "$memfit" train --batch 8 --check-replicas --save "$dir/lenet.$shard.ckpt" \
    --model lenet --no-dropout --optimizer adamw --shard "$shard" --synthetic --limit 320 \
    --epochs 1 --schedule constant --threads 1 --log-every 1 --seed 7 >"$dir/$shard.log" 2>&1 ||
    { cat "$dir/$shard.log"; exit 1; }
done
"$mpiexec" -np 2 "$memfit" train --batch 8 --save "$dir/lenet.adamw.ckpt" --model lenet \
  --no-dropout --optimizer adamw --synthetic --limit 320 --epochs 1 --schedule constant \
  --threads 1 --log-every 1 --seed 7 >"$dir/adamw.log" 2>&1 || { cat "$dir/adamw.log"; exit 1; }
for shard in optimizer gradients; do
  "$diff_tool" "$dir/lenet.$shard.ckpt" "$dir/lenet.adamw.ckpt" 0
done

run_pair resnet --model resnet-cifar --depth 20
compare_losses resnet 0.1
# Both trained: the last loss is below the first.
for log in "$dir/resnet.2.log" "$dir/resnet.1.log"; do
  losses "$log" | awk 'NR == 1 { first = $1 } END { exit !($1 < first) }'
done

# A rank killed with SIGKILL ends the whole job within a bounded time, with a
# message naming the rank; the checkpoint of the last epoch is intact and
# resumes with another number of ranks (one process at the same 16 examples
# per micro-batch).
common=(--model lenet --synthetic --limit 8000 --epochs 3 --schedule constant --threads 1
  --log-every 50 --seed 7)
"$mpiexec" -np 2 "$memfit" train --batch 8 --save "$dir/kill.ckpt" "${common[@]}" \
  >"$dir/kill.log" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "^saved" "$dir/kill.log" && break; sleep 0.2; done
grep -q "^saved" "$dir/kill.log" || { cat "$dir/kill.log"; echo "no checkpoint written"; exit 1; }
victim=""
for pid in $(pgrep -f "train --batch 8 --save $dir/kill.ckpt"); do
  if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then
    victim=$pid
  fi
done
[ -n "$victim" ] || { echo "rank 1 not found"; exit 1; }
killed_at=$(date +%s)
kill -9 "$victim"
status=0
wait "$job" || status=$?
took=$(($(date +%s) - killed_at))
cat "$dir/kill.log"
[ "$status" -ne 0 ]
[ "$took" -le 30 ] || { echo "the job took $took s to end after a rank died"; exit 1; }
grep -q "rank 1 .*signal 9" "$dir/kill.log"
! pgrep -f "train --batch 8 --save $dir/kill.ckpt" >/dev/null || { echo "a rank is left running"; exit 1; }
"$memfit" train --batch 16 --resume "$dir/kill.ckpt" "${common[@]}" >"$dir/resume.log" 2>&1 ||
  { cat "$dir/resume.log"; exit 1; }
grep -q "resumed from" "$dir/resume.log"
grep -q "epoch 3 done" "$dir/resume.log"

# Ranks started with different flags (here --batch) are refused by name,
# never a crash or a hang; --json says how many ranks ran.
mismatch=(train --model mlp --synthetic --epochs 1 --limit 64)
status=0
timeout 120 "$mpiexec" -np 1 "$memfit" "${mismatch[@]}" --batch 8 : -np 1 "$memfit" "${mismatch[@]}" \
  --batch 4 >"$dir/mismatch.log" 2>&1 || status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { cat "$dir/mismatch.log"; echo "mismatch: $status"; exit 1; }
grep -q "the ranks were started with different settings (.*; rank 1.s differ from rank 0.s)" "$dir/mismatch.log" ||
  { cat "$dir/mismatch.log"; exit 1; }
"$mpiexec" -np 2 "$memfit" "${mismatch[@]}" --batch 8 --json >"$dir/ranks.json" 2>/dev/null
grep -q '^  "ranks": 2,$' "$dir/ranks.json" || { cat "$dir/ranks.json"; exit 1; }

echo "data parallel over MPI: mlp and lenet match one process at twice the batch; resnet-cifar-20 trains"
