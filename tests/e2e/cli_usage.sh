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
grep -q "unknown command 'nonexistent'; the commands are train, plan, maxbatch, models" <<<"$out" ||
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
out=$("$memfit" train --data /nonexistent/dir 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "missing data exited $rc, not 1"
grep -q "dataset-fashion-mnist" <<<"$out" || fail "missing data: no install hint: $out"
out=$("$memfit" train --resume /nonexistent/file.ckpt --limit 1000 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "missing checkpoint exited $rc, not 1"
echo "ok"
