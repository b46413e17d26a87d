#!/usr/bin/env bash
# --policy through the command line: each family on plan, train and
# maxbatch; flags outside the policy's family refused as usage errors (exit 2)
# with a message that names the policy to use.
set -uo pipefail
memfit="$1"
fail() { echo "FAIL: $*"; exit 1; }
number() { sed -n "s/^  \"$1\": \([0-9]*\),\$/\1/p" <<<"$json"; }
model=(--model resnet-cifar --depth 20 --batch 16 --image-size 16)

json=$("$memfit" plan "${model[@]}" --policy none --json) || fail "--policy none exited $?"
grep -q '"policy": "none",' <<<"$json" || fail "--policy none: $json"
[ "$(number arena_bytes)" -eq "$(number no_sharing_bytes)" ] || fail "--policy none shared memory"
json=$("$memfit" plan "${model[@]}" --policy share --json) || fail "--policy share exited $?"
grep -q '"policy": "share",' <<<"$json" || fail "--policy share: $json"
share=$(number arena_bytes)
budget=$((share * 6 / 10))

# Under 60% of sharing alone: recompute (budget strategy by default), swap and auto fit.
for policy in recompute swap auto; do
  json=$("$memfit" plan "${model[@]}" --policy $policy --budget $budget --json) ||
    fail "--policy $policy --budget $budget exited $?"
  grep -q "\"policy\": \"$policy\"," <<<"$json" || fail "--policy $policy: $json"
  [ "$(number arena_bytes)" -le "$budget" ] || fail "--policy $policy is over the budget: $json"
done
grep -q '"recompute": "none",' <<<"$json" || fail "auto reported a recompute strategy: $json"
grep -Eq '"auto_choice": "[a-z+-]+",' <<<"$json" || fail "auto names no choice: $json"
json=$("$memfit" plan "${model[@]}" --policy recompute --budget $budget --json)
grep -q '"recompute": "budget",' <<<"$json" || fail "--policy recompute is not budget: $json"
json=$("$memfit" plan "${model[@]}" --policy recompute --recompute sqrt --json)
grep -q '"recompute": "sqrt",' <<<"$json" || fail "--policy recompute --recompute sqrt: $json"

# The table names auto's plan.
out=$("$memfit" plan "${model[@]}" --policy auto --budget $budget) || fail "auto table exited $?"
grep -Eq "^  policy +auto +\(plan chosen: " <<<"$out" || fail "no policy line: $out"
grep -Eq "^  recompute +by auto$" <<<"$out" || fail "the recompute row is not auto's: $out"
grep -Eq "^  swap +by auto$" <<<"$out" || fail "the swap row is not auto's: $out"

# Too small for anything: exit 1, naming the smallest arena.
out=$("$memfit" plan "${model[@]}" --policy auto --budget 64KiB 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "--policy auto --budget 64KiB exited $rc, not 1"
grep -q "smallest arena any reaches is" <<<"$out" || fail "no smallest arena: $out"

# maxbatch: auto reaches at least swap's batch, which beats sharing alone.
batch() { "$memfit" maxbatch --model resnet-cifar --depth 20 --image-size 16 --budget 16MiB \
            --policy "$1" --json | sed -n 's/^  "max_batch": \([0-9]*\),$/\1/p'; }
share_batch=$(batch share); swap_batch=$(batch swap); auto_batch=$(batch auto)
[ -n "$share_batch" ] && [ -n "$swap_batch" ] && [ -n "$auto_batch" ] || fail "maxbatch failed"
[ "$swap_batch" -gt "$share_batch" ] || fail "swap $swap_batch <= share $share_batch"
[ "$auto_batch" -ge "$swap_batch" ] || fail "auto $auto_batch < swap $swap_batch"

# train: auto under a budget runs, and a step over its --budget is refused.
out=$("$memfit" train --synthetic --model resnet-cifar --depth 11 --image-size 16 --batch 8 \
        --limit 16 --epochs 1 --policy auto --budget 4MiB 2>&1) || fail "train --policy auto: $out"
out=$("$memfit" train --synthetic --model resnet-cifar --depth 11 --image-size 16 --batch 8 \
        --limit 16 --epochs 1 --budget 64KiB 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "train over its --budget exited $rc, not 1: $out"

# Contradictions are usage errors.
refuse() {
  local says="$1"; shift
  out=$("$memfit" "$@" 2>&1); rc=$?
  [ "$rc" -eq 2 ] || fail "$* exited $rc, not 2: $out"
  grep -q -- "$says" <<<"$out" || fail "$*: no '$says' in: $out"
}
refuse "--policy recompute" plan "${model[@]}" --policy share --recompute sqrt
refuse "--policy swap" plan "${model[@]}" --policy none --swap budget
refuse "--policy auto" plan "${model[@]}" --policy recompute --swap budget
refuse "chooses recomputation and swapping per activation itself" \
  plan "${model[@]}" --policy auto --mirror
refuse "means --policy none" plan "${model[@]}" --policy share --no-sharing
refuse "means --policy none" train --synthetic "${model[@]}" --policy auto --no-plan
refuse "--policy auto" maxbatch --model lenet --budget 1GiB --policy swap --recompute sqrt
refuse "policy" plan "${model[@]}" --policy fastest
echo "ok"
