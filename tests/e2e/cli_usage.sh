#!/usr/bin/env bash
# The command line: --help exits 0, a bad flag or value prints the usage and
# exits 2, a run-time error exits 1 with a message.
set -uo pipefail
memfit="$1"
fail() { echo "FAIL: $*"; exit 1; }
# The help is captured before grep reads it: `grep -q` in a pipe stops reading
# at the first match, and with pipefail the writer's SIGPIPE would fail the line.
help=$("$memfit" --help) || fail "--help exited $?"
grep -q "train" <<<"$help" || fail "--help does not list train"
help=$("$memfit" train --help) || fail "train --help exited $?"
grep -q -- "--accumulate" <<<"$help" || fail "train --help does not list --accumulate"
for args in "train --bogus" "train --epochs 0" "train --model nonexistent" "train --optimizer rmsprop" "train --recompute log" "train --attention flash" "maxbatch --model gpt --budget 1GiB --vary depth" "nonexistent" ""; do
  out=$("$memfit" $args 2>&1); rc=$?
  [ "$rc" -eq 2 ] || fail "'memfit $args' exited $rc, not 2"
  grep -q "Usage" <<<"$out" || fail "'memfit $args' printed no usage"
done
# A zoo size flag with an ONNX model (the file need not exist: the flags are checked first).
out=$("$memfit" plan --onnx model.onnx --depth 2 --batch 2 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "--onnx with --depth exited $rc, not 2"
grep -q -- "--depth sizes a zoo model" <<<"$out" || fail "--onnx with --depth: $out"
# Values a step cannot use: a thread count past 1024, one class, a link
# too slow for the copy engine's clock (which it once overflowed or hung on).
for pair in "--threads 5000:--threads must be at most 1024" "--classes 1:--classes must be at least 2" \
            "--link-gbps 1e-6:--link-gbps must be 0 (unlimited) or at least 0.001" \
            "--comm-gbps 1e-20:--comm-gbps must be 0 (unlimited) or at least 0.001"; do
  out=$("$memfit" plan --model lenet --batch 2 ${pair%%:*} 2>&1); rc=$?
  [ "$rc" -eq 2 ] || fail "'plan ${pair%%:*}' exited $rc, not 2"
  grep -qF -- "${pair#*:}" <<<"$out" || fail "'plan ${pair%%:*}': $out"
done
out=$("$memfit" nonexistent 2>&1)
grep -q "unknown command 'nonexistent'; the commands are train, plan, maxbatch, evaluate, models" <<<"$out" ||
  fail "an unknown command is not named: $out"
# Number flags refuse nan, infinity and values out of their range (integers
# past int64 too, which the conversion would clamp or wrap), and say the
# range in words (never the largest double's 309 digits).
for args in "train --lr nan" "train --lr inf" "train --lr -0.1" "train --weight-decay -1" \
            "train --weight-decay nan" "train --batch 0" "train --epochs -2" \
            "plan --model mlp --batch 4 --link-gbps nan" "plan --model mlp --batch 4 --milp-seconds 0" \
            "train --seed -1" "train --seed 18446744073709551616" "train --epochs 99999999999999999999" \
            "plan --model mlp --batch 99999999999999999999" "plan --model mlp --batch 4 --ranks 9223372036854775808"; do
  out=$("$memfit" $args 2>&1); rc=$?
  [ "$rc" -eq 2 ] || fail "'memfit $args' exited $rc, not 2"
  grep -Eq "is not a finite number|must be more than 0, not|must be 0 or more, not|is out of range \(at most 9223372036854775807\)" <<<"$out" ||
    fail "'memfit $args' does not say the range: $out"
  if grep -q "1797693" <<<"$out"; then fail "'memfit $args' printed the largest double"; fi
done
# Data parallel flags: out of range, or sharding without ranks to shard over.
for args in "plan --model mlp --batch 4 --ranks 0" "plan --model mlp --batch 4 --bucket-mb -1" \
            "plan --model mlp --batch 4 --comm-gbps -1" "plan --model mlp --batch 4 --shard all"; do
  out=$("$memfit" $args 2>&1); rc=$?
  [ "$rc" -eq 2 ] || fail "'memfit $args' exited $rc, not 2"
done
for args in "plan --model mlp --batch 4 --shard optimizer" "train --shard gradients" \
            "plan --model mlp --batch 4 --ranks 2 --shard optimizer --accumulate 2"; do
  out=$("$memfit" $args 2>&1); rc=$?
  [ "$rc" -eq 2 ] || fail "'memfit $args' exited $rc, not 2"
  grep -Eq -- "--shard (divides|does not combine)" <<<"$out" || fail "'memfit $args': $out"
done
# Usage errors found by probing: each is refused before anything runs, with its reason.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
: > "$dir/ckpt" && ln "$dir/ckpt" "$dir/hard-link" || fail "cannot make a hard link in $dir"
while IFS='|' read -r args expected; do
  out=$("$memfit" $args 2>&1); rc=$?
  [ "$rc" -eq 2 ] || fail "'memfit $args' exited $rc, not 2: $out"
  grep -qF -- "$expected" <<<"$out" || fail "'memfit $args' does not say '$expected': $out"
done <<CASES
train --lr 1e-300|outside a 32-bit float's range
train --weight-decay 1e-45|outside a 32-bit float's range
train --lr 1e39|outside a 32-bit float's range
plan --model mlp --batch 4 --ranks 1048577|--ranks must be between 1 and 1048576
plan --model mlp --batch 4 --ranks 2 --profile|drop --ranks
train --save $dir/a --trace $dir/../$(basename "$dir")/a|--save and --trace both write
plan --model mlp --batch 4 --timeline $dir/t --trace $dir/t|--timeline and --trace both write
train --onnx $dir/m.onnx --batch 4 --save $dir/m.onnx|--save would overwrite $dir/m.onnx, which --onnx reads
train --onnx $dir/m.onnx --batch 4 --save-onnx $dir/./m.onnx|--save-onnx would overwrite $dir/m.onnx, which --onnx reads
train --resume $dir/c --trace $dir/c|--trace would overwrite $dir/c, which --resume reads
train --resume $dir/ckpt --trace $dir/hard-link|--trace would overwrite $dir/ckpt, which --resume reads
train --save $dir/ckpt --trace $dir/hard-link|--save and --trace both write
plan --onnx $dir/m.onnx --batch 4 --timeline $dir/m.onnx|--timeline would overwrite $dir/m.onnx, which --onnx reads
plan --model mlp --batch 4 --milp-seconds 5|--milp-seconds is a knob of --recompute milp
CASES
# A knob at its default changes nothing, beside any strategy.
out=$("$memfit" plan --model mlp --batch 4 --milp-seconds 30 2>&1) || fail "'--milp-seconds 30' alone: $out"
# --save over --resume is how a run continues: not a usage error (the
# checkpoint is missing here, an error of its own).
out=$("$memfit" train --model mlp --synthetic --resume "$dir/c" --save "$dir/c" 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "'--resume X --save X' exited $rc, not 1: $out"
grep -qF "cannot open" <<<"$out" || fail "'--resume X --save X': $out"
# An empty path (an unset shell variable) is refused, not taken as the flag left out.
for flag in --onnx --data --save --resume --trace --save-onnx; do
  out=$("$memfit" train "$flag" "" 2>&1); rc=$?
  [ "$rc" -eq 2 ] || fail "'train $flag \"\"' exited $rc, not 2: $out"
  grep -qF -- "$flag: is an empty path" <<<"$out" || fail "'train $flag \"\"': $out"
done
out=$("$memfit" plan --model mlp --batch 4 --timeline "" 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "'plan --timeline \"\"' exited $rc, not 2"
out=$("$memfit" train --data /nonexistent/dir 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "missing data exited $rc, not 1"
grep -q "dataset-fashion-mnist" <<<"$out" || fail "missing data: no install hint: $out"
out=$("$memfit" train --resume /nonexistent/file.ckpt --limit 1000 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "missing checkpoint exited $rc, not 1"
echo "ok"
