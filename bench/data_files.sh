#!/usr/bin/env bash
# The user's data files, measured (docs/data.md):
# 1. Throughput: `memfit train` on a .npz (stored, as numpy.savez writes
#    it) and on a token file against --synthetic, same model, batch and
#    examples, runs interleaved ROUNDS times; examples/s is the run's own
#    (--json's examples_per_second), the ratio that of the medians.
# 2. Resident memory: a GPT trained on token files of 256 MiB, 1 GiB and
#    4 GiB (sparse: every id 0) inside a cgroup (v1) whose memory limit,
#    LIMIT_MIB, is below the largest file; the peak resident set is
#    /usr/bin/time's (maximum resident set size).
# Usage: bench/data_files.sh MEMFIT [ROUNDS] [LIMIT_MIB]   (as root, for the cgroup)
set -euo pipefail
memfit=$(realpath "$1")
rounds=${2:-3}
limit_mib=${3:-1024}
py=/usr/bin/python3
dir=$(mktemp -d)
trap 'rm -rf "$dir"; rmdir /sys/fs/cgroup/memory/memfit-bench 2>/dev/null || true' EXIT
cd "$dir"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"

"$py" - <<'PY'
import numpy as np
rng = np.random.default_rng(0)
n = 8192
np.savez("images.npz", images=rng.standard_normal((n, 1, 28, 28), dtype=np.float32),
         labels=rng.integers(0, 10, n))
rng.integers(0, 256, 4 * 1024 * 1024, dtype=np.uint16).tofile("tokens.u16")
PY
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
speed() { "$memfit" train "$@" --epochs 1 --json 2>/dev/null |
          "$py" -c 'import json, sys; print(json.load(sys.stdin)["examples_per_second"])'; }
lenet=(--model lenet --batch 64 --limit 8192)
gpt=(--model gpt --vocab 256 --seq-len 128 --depth 2 --width 128 --batch 16 --limit 2048)
for r in $(seq "$rounds"); do
  speed "${lenet[@]}" --synthetic >>lenet-synthetic
  speed "${lenet[@]}" --data images.npz >>lenet-npz
  speed "${gpt[@]}" --synthetic >>gpt-synthetic
  speed "${gpt[@]}" --tokens tokens.u16 >>gpt-tokens
done
for model in lenet gpt; do
  other=$([ $model = lenet ] && echo npz || echo tokens)
  s=$(median <$model-synthetic); f=$(median <$model-$other)
  awk -v m=$model -v o=$other -v s="$s" -v f="$f" -v r="$rounds" 'BEGIN {
    printf "%-6s --synthetic %8.0f examples/s, --%s %8.0f examples/s: ratio %.3f (medians of %d)\n",
           m, s, (o == "npz" ? "data .npz" : "tokens"), f, f / s, r }'
done

# Resident memory inside a memory limit.
cg=/sys/fs/cgroup/memory/memfit-bench
mkdir -p "$cg"
echo $((limit_mib * 1024 * 1024)) >"$cg/memory.limit_in_bytes"
small=(--model gpt --vocab 256 --seq-len 64 --depth 2 --width 64 --batch 16 --epochs 1 --limit 20000)
for size in 256M 1G 4G; do
  truncate -s "$size" "big-$size.u16"
  rss=$(sh -c "echo \$\$ >$cg/tasks; exec /usr/bin/time -f %M \"$memfit\" train ${small[*]} --tokens big-$size.u16 >/dev/null" 2>&1 | tail -1)
  echo "token file $size (memory limit ${limit_mib} MiB): peak resident set $((rss / 1024)) MiB"
  rm "big-$size.u16"
done
