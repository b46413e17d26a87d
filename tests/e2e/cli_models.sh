#!/usr/bin/env bash
# `memfit models` lists every model with its exact parameter count, input
# shape and classes; `memfit plan` takes the model size flags; `memfit train`
# refuses a model that is not for Fashion-MNIST with a clear message.
set -uo pipefail
memfit="$1"
fail() { echo "FAIL: $*"; exit 1; }
out=$("$memfit" models) || fail "memfit models exited $?"
for row in "resnet18 +11689512 +3x224x224 +1000" "resnet50 +25557032 +3x224x224 +1000" \
           "resnet152 +60192808 " "resnet-cifar +1703258 +3x32x32 +10" "vgg16 +138357544 " \
           "lenet .*1x28x28 +10"; do
  grep -Eq "^$row" <<<"$out" || fail "memfit models has no row matching '$row': $out"
done
out=$("$memfit" plan --model resnet-cifar --depth 20 --image-size 16 --batch 2 --json) ||
  fail "plan with model flags exited $?"
grep -q '"arena_bytes"' <<<"$out" || fail "plan --json printed no arena: $out"
out=$("$memfit" plan --model resnet-cifar --depth 21 --batch 2 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "a bad depth exited $rc, not 1"
grep -q "9n+2" <<<"$out" || fail "a bad depth: no hint: $out"
out=$("$memfit" train --model resnet18 --limit 1000 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "training resnet18 exited $rc, not 1"
grep -q "synthetic data" <<<"$out" || fail "training resnet18: unclear message: $out"
echo "ok"
