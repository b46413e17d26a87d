#!/usr/bin/env bash
# --swap tflms through the command line: plan, maxbatch and train accept its
# knobs and report them; bad values (negative or zero lb, lb > ub, an unknown
# trigger, a negative count or threshold) and knobs without --swap tflms are
# refused with a message naming the flag (usage, exit 2).
set -uo pipefail
memfit="$1"
fail() { echo "FAIL: $*"; exit 1; }
number() { sed -n "s/^  \"$1\": \([0-9]*\),\$/\1/p" <<<"$json"; }
model=(--model resnet-cifar --depth 11 --image-size 8 --batch 4)

# refused: the flags and the words the message must hold.
refused() {
  local words="$1"; shift
  for cmd in plan maxbatch train; do
    local args=("${model[@]}")
    [ "$cmd" = maxbatch ] && args=(--model resnet-cifar --depth 11 --image-size 8 --budget 64MiB)
    [ "$cmd" = train ] && args+=(--synthetic --epochs 1 --limit 8)
    out=$("$memfit" "$cmd" "${args[@]}" "$@" 2>&1); rc=$?
    [ "$rc" -eq 2 ] || fail "$cmd $* exited $rc, not 2: $out"
    grep -q -- "$words" <<<"$out" || fail "$cmd $*: no '$words' in: $out"
  done
}
refused "--swap-lb must be at least 1" --swap tflms --swap-lb -1
refused "--swap-lb must be at least 1" --swap tflms --swap-lb 0
refused "--swap-ub (3) must be at least --swap-lb (4)" --swap tflms --swap-lb 4 --swap-ub 3
refused "unknown swap trigger 'nearest'; use chain_rule or direct_order" \
  --swap tflms --swap-trigger nearest
refused "--swap-n-tensors must be -1 (all)" --swap tflms --swap-n-tensors -2
refused "--swap-branch-threshold must be at least 0" --swap tflms --swap-branches \
  --swap-branch-threshold -1
refused "--swap-lb is a knob of --swap tflms" --swap-lb 3
refused "--swap-branch-threshold is a knob of --swap-branches" --swap tflms --swap-branch-threshold 5
refused "--swap-fuse is a knob of --swap tflms" --swap budget --swap-fuse
refused "--swap-trigger is a knob of --swap tflms" --swap refcount --swap-trigger direct_order

# plan: the knobs and the swap-ins are reported; n_tensors limits the count.
json=$("$memfit" plan "${model[@]}" --swap tflms --json) || fail "plan --swap tflms exited $?"
grep -q '"tflms": "n_tensors -1, lb 1, ub 10000, chain_rule, fuse off, branches off",' \
  <<<"$json" || fail "no tflms key: $json"
all=$(number swapped_values)
[ "$all" -gt 2 ] || fail "tflms swapped $all values: $json"
[ "$(number swap_ins)" -gt "$all" ] || fail "not fused: expected more swap-ins than values: $json"
json=$("$memfit" plan "${model[@]}" --swap tflms --swap-n-tensors 2 --swap-fuse --json) ||
  fail "plan --swap-n-tensors 2 exited $?"
[ "$(number swapped_values)" -eq 2 ] || fail "--swap-n-tensors 2: $json"
[ "$(number swap_ins)" -eq 2 ] || fail "--swap-fuse: one swap-in per value expected: $json"
out=$("$memfit" plan "${model[@]}" --swap tflms --swap-trigger direct_order --swap-lb 3 \
      --swap-ub 5 --swap-branches --swap-branch-threshold 2) || fail "plan with every knob exited $?"
grep -q "tflms  *n_tensors -1, lb 3, ub 5, direct_order, fuse off, branches on (threshold 2)" \
  <<<"$out" || fail "no tflms line: $out"
grep -Eq "^  swap-ins +[0-9]+ \([1-9][0-9]* branch swaps, 0 chain_rule fallbacks\)" <<<"$out" ||
  fail "no branch swaps: $out"

# maxbatch and train run with it.
json=$("$memfit" maxbatch --model resnet-cifar --depth 11 --image-size 8 --budget 16MiB \
       --swap tflms --json) || fail "maxbatch --swap tflms exited $?"
[ "$(number max_batch)" -ge 1 ] && [ "$(number host_bytes)" -gt 0 ] || fail "maxbatch: $json"
out=$("$memfit" train "${model[@]}" --synthetic --epochs 1 --limit 8 --threads 1 --poison \
      --swap tflms --swap-branches) || fail "train --swap tflms exited $?: $out"
grep -Eq "tflms: [0-9]+ swap-ins, [1-9][0-9]* branch swaps" <<<"$out" || fail "no tflms line: $out"
echo OK
