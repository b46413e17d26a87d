#!/usr/bin/env bash
# ONNX models through the command line: `memfit plan` (table and JSON, the
# same arena for the same model written twice) and `memfit maxbatch` on
# --onnx files; `memfit train --onnx` on Fashion-MNIST with --save-onnx (the
# loss falls; the trained file plans and differs from the input) and on
# synthetic tokens; and the usage errors of the ONNX flags.
# Usage: cli_onnx.sh MEMFIT MAKE_ONNX_MODELS
set -uo pipefail
memfit="$1"
make_models="$2"
fail() { echo "FAIL: $*" >&2; exit 1; }  # also from inside $(...)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/a" "$dir/b"
"$make_models" "$dir/a" || fail "make_onnx_models exited $?"
"$make_models" "$dir/b" || fail "make_onnx_models exited $?"
lenet="$dir/a/lenet.onnx"
gpt="$dir/a/gpt.onnx"
cmp -s "$lenet" "$dir/b/lenet.onnx" || fail "make_onnx_models wrote two different LeNets"

# plan: the table and the JSON; the arena of a model depends only on the model.
out=$("$memfit" plan --onnx "$lenet" --batch 8) || fail "plan exited $?: $out"
grep -q "^memfit plan: lenet, batch 8," <<<"$out" || fail "plan does not name the model: $out"
grep -q "planned arena" <<<"$out" || fail "no planned arena: $out"
arena() {  # arena FILE: the arena_bytes of `memfit plan --onnx FILE --batch 8 --json`
  local json
  json=$("$memfit" plan --onnx "$1" --batch 8 --json) || fail "plan --json $1 exited $?"
  grep -q "\"model\": \"$(basename "$1" .onnx)\"" <<<"$json" ||
    fail "the JSON does not name the model: $json"
  sed -n 's/^  "arena_bytes": \([0-9]*\),$/\1/p' <<<"$json"
}
first=$(arena "$lenet")
second=$(arena "$dir/b/lenet.onnx")
[ -n "$first" ] && [ "$first" -gt 0 ] || fail "no arena_bytes in the JSON"
[ "$first" = "$second" ] || fail "the same model planned $first and $second bytes"
"$memfit" plan --onnx "$gpt" --batch 4 >/dev/null || fail "plan of the GPT exited $?"

# maxbatch: the largest batch under a budget.
out=$("$memfit" maxbatch --onnx "$lenet" --budget 64MiB) || fail "maxbatch exited $?: $out"
grep -Eq "^  max batch +[0-9]+$" <<<"$out" || fail "no max batch: $out"

# train on Fashion-MNIST: the loss falls; the trained weights are written
# into a copy of the file, which plans like the original.
log=$("$memfit" train --onnx "$lenet" --batch 32 --epochs 1 --limit 1000 --optimizer adamw \
      --schedule constant --log-every 8 --save-onnx "$dir/trained.onnx" 2>&1) ||
  fail "train exited $?: $log"
echo "$log"
losses=$(sed -n 's/^epoch 1 step [0-9]* loss \([0-9.]*\) .*/\1/p' <<<"$log")
first_loss=$(head -n 1 <<<"$losses")
last_loss=$(tail -n 1 <<<"$losses")
[ -n "$first_loss" ] && [ -n "$last_loss" ] || fail "no loss lines"
awk -v a="$first_loss" -v b="$last_loss" 'BEGIN { exit !(b < 0.8 * a) }' ||
  fail "the loss did not fall: $first_loss, then $last_loss"
grep -q "saved the trained model to $dir/trained.onnx" <<<"$log" || fail "no save line"
[ -s "$dir/trained.onnx" ] || fail "no trained file"
cmp -s "$lenet" "$dir/trained.onnx" && fail "the trained file equals the input"
"$memfit" plan --onnx "$dir/trained.onnx" --batch 8 >/dev/null ||
  fail "plan of the trained file exited $?"
[ "$(arena "$dir/trained.onnx")" = "$first" ] || fail "the trained file plans another arena"

# --loss mse: one-hot targets of Fashion-MNIST's classes.
log=$("$memfit" train --onnx "$lenet" --loss mse --batch 32 --epochs 1 --limit 256 2>&1) ||
  fail "train --loss mse exited $?: $log"
grep -q "final test accuracy" <<<"$log" || fail "the mse run did not finish: $log"

# train a token model on synthetic data.
log=$("$memfit" train --onnx "$gpt" --synthetic --batch 8 --epochs 1 --limit 128 2>&1) ||
  fail "train of the GPT exited $?: $log"
grep -q "final test accuracy" <<<"$log" || fail "the GPT did not finish: $log"

# Usage errors: a non-zero exit and a message that says what is wrong.
refused() {  # refused EXPECTED-TEXT ARGS...
  local expected="$1" out
  shift
  if out=$("$memfit" "$@" 2>&1); then fail "accepted: $*"; fi
  grep -qF -- "$expected" <<<"$out" || fail "'$*' did not say '$expected': $out"
}
refused "--model excludes --onnx" plan --onnx "$lenet" --model lenet --batch 8
refused "--loss applies to --onnx models" plan --model lenet --loss mse --batch 8
refused "--save-onnx needs a model from --onnx" \
  train --model mlp --limit 64 --save-onnx "$dir/x.onnx"
refused "--image-size sizes a zoo model" plan --onnx "$lenet" --image-size 32 --batch 8
refused "cannot open ONNX file $dir/missing.onnx" plan --onnx "$dir/missing.onnx" --batch 8
head -c 1000 "$lenet" >"$dir/corrupt.onnx"
refused "is not a valid ONNX model" plan --onnx "$dir/corrupt.onnx" --batch 8
refused "--vary seq-len needs a zoo sequence model" \
  maxbatch --onnx "$gpt" --budget 64MiB --vary seq-len
refused "synthetic data gives only for images" \
  train --onnx "$gpt" --loss mse --synthetic --batch 4 --limit 8
refused "--attention chooses a zoo model's attention" plan --onnx "$gpt" --attention naive --batch 4
[ -e "$dir/x.onnx" ] && fail "a refused run wrote $dir/x.onnx"
echo "cli_onnx: ok"
