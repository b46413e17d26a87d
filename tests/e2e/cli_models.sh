#!/usr/bin/env bash
# `memfit models` lists every model with its exact parameter count, input
# shape and classes; `memfit plan` takes the model size flags; `memfit train`
# refuses a model that is not for Fashion-MNIST with a clear message, and
# trains any model with --synthetic.
set -uo pipefail
memfit="$1"
fail() { echo "FAIL: $*"; exit 1; }
out=$("$memfit" models) || fail "memfit models exited $?"
for row in "resnet18 +11689512 +images +3x224x224 +1000" "resnet50 +25557032 +images +3x224x224 +1000" \
           "resnet152 +60192808 " "resnet-cifar +1703258 +images +3x32x32 +10" "vgg16 +138357544 " \
           "lenet .*1x28x28 +10" "gpt +124439808 +tokens +1024 +50257" "lstm-lm .* tokens +35 " \
           "seq2seq .* pairs +50 " "transformer .* pairs " "unet3d .* volumes +1x128x128x128 +3"; do
  grep -Eq "^$row" <<<"$out" || fail "memfit models has no row matching '$row': $out"
done
out=$("$memfit" plan --model resnet-cifar --depth 20 --image-size 16 --batch 2 --json) ||
  fail "plan with model flags exited $?"
grep -q '"arena_bytes"' <<<"$out" || fail "plan --json printed no arena: $out"
# Without dropout the GPT's step holds no dropout masks: a smaller arena.
# (Naive attention: the fused op drops probabilities inside its tiles.)
with=$("$memfit" plan --model gpt --depth 1 --width 16 --seq-len 8 --vocab 12 --batch 2 \
       --attention naive --json) || fail "plan gpt exited $?"
without=$("$memfit" plan --model gpt --depth 1 --width 16 --seq-len 8 --vocab 12 --batch 2 \
          --attention naive --no-dropout --json) || fail "plan gpt --no-dropout exited $?"
field() { grep -oE "\"$1\": *[0-9]+" <<<"$2" | grep -oE '[0-9]+$'; }
[ "$(field arena_bytes "$without")" -lt "$(field arena_bytes "$with")" ] ||
  fail "--no-dropout did not shrink the arena: $(field arena_bytes "$without") vs $(field arena_bytes "$with")"
# Four dropout layers and their four gradients are gone.
[ $(($(field num_nodes "$with") - $(field num_nodes "$without"))) -eq 8 ] ||
  fail "--no-dropout: $(field num_nodes "$without") nodes, with dropout $(field num_nodes "$with")"
out=$("$memfit" plan --model resnet-cifar --depth 21 --batch 2 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "a bad depth exited $rc, not 1"
grep -q "9n+2" <<<"$out" || fail "a bad depth: no hint: $out"
out=$("$memfit" train --model resnet18 --limit 1000 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "training resnet18 exited $rc, not 1"
grep -q -- "--synthetic" <<<"$out" || fail "training resnet18: unclear message: $out"
# Any model trains on its synthetic data set.
for args in "resnet18 --image-size 32 --width 8 --classes 4 --batch 4" \
            "lstm-lm --depth 1 --width 16 --seq-len 6 --vocab 12 --batch 4" \
            "transformer --depth 1 --width 16 --seq-len 5 --vocab 12 --batch 4" \
            "unet3d --width 2 --volume 16 --batch 2"; do
  out=$("$memfit" train --model $args --synthetic --limit 32 --epochs 1 --optimizer adamw 2>&1) ||
    fail "train --synthetic --model $args exited $?: $out"
  grep -q "data: synthetic" <<<"$out" || fail "no data line: $out"
  grep -Eq "^final test accuracy: [0-9.]+%" <<<"$out" || fail "no accuracy: $out"
done
echo "ok"
