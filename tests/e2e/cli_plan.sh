#!/usr/bin/env bash
# `memfit plan` through the command line: the table, one JSON object with the
# plan's numbers, a budget under the arena (exit 1), a bad budget (usage,
# exit 2), recomputation and the SVG timeline.
set -uo pipefail
memfit="$1"
fail() { echo "FAIL: $*"; exit 1; }
# A number field of the JSON in $json (one field per line at the top level).
number() { sed -n "s/^  \"$1\": \([0-9]*\),\$/\1/p" <<<"$json"; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

out=$("$memfit" plan --model lenet --batch 64) || fail "plan exited $?"
for word in "no sharing" "planned arena" "lower bound" "fragmentation" "parameters" \
            "gradients" "optimizer_state" "activations" "workspace" "nodes" "heap algorithm"; do
  grep -q "$word" <<<"$out" || fail "the table has no '$word': $out"
done

json=$("$memfit" plan --model lenet --batch 64 --json) || fail "plan --json exited $?"
[ "$(head -n 1 <<<"$json")" = "{" ] && [ "$(tail -n 1 <<<"$json")" = "}" ] ||
  fail "not one object: $json"
[ "$(grep -c '^{' <<<"$json")" -eq 1 ] || fail "more than one object: $json"
for key in arena_bytes lower_bound_bytes no_sharing_bytes by_role parameters gradients \
           optimizer_state activations workspace num_nodes model batch timeline; do
  grep -q "\"$key\": " <<<"$json" || fail "no key $key in: $json"
done
grep -q '"model": "lenet"' <<<"$json" || fail "model is not lenet"
grep -q '"batch": 64,' <<<"$json" || fail "batch is not 64"
arena=$(number arena_bytes)
[ -n "$arena" ] && [ "$arena" -gt 0 ] || fail "no arena_bytes number"

# A budget of exactly the arena fits; one byte less does not.
"$memfit" plan --model lenet --batch 64 --budget "$arena" >/dev/null || fail "budget = arena failed"
out=$("$memfit" plan --model lenet --batch 64 --budget $((arena - 1)) 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "budget under the arena exited $rc, not 1"
# The error names a strategy that fits (lenet's recomputation saves a little),
# or else the smallest arena any reaches.
grep -Eq -- "--recompute [a-z]+( --mirror)? fits in [0-9.]+ [KMG]iB \([0-9]+ bytes\)|smallest arena any reaches is" <<<"$out" ||
  fail "no strategy that fits and no smallest arena: $out"
out=$("$memfit" plan --model lenet --batch 64 --budget 1KiB 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "--budget 1KiB exited $rc, not 1"
grep -q "smallest arena" <<<"$out" || fail "--budget 1KiB: no smallest arena: $out"
# A --mirror of the user's own that the smallest plan leaves out is named to drop.
out=$("$memfit" plan --model resnet-cifar --depth 20 --batch 32 --mirror --budget 1MiB 2>&1)
grep -q -- "--swap budget (without --mirror); give a --budget" <<<"$out" ||
  fail "--mirror to drop is not named: $out"
# So are --swap tflms's knobs, which the named flags (another swap) refuse;
# the advice then works as given.
out=$("$memfit" maxbatch --model resnet-cifar --depth 20 --budget 1MiB --swap tflms --swap-fuse 2>&1)
least=$(sed -n 's/.*give a --budget of at least \([0-9]*\) bytes.*/\1/p' <<<"$out")
flags=$(sed -n 's/.*reaches is [^,]*, with \(--[a-z -]*[a-z]\) (without the --swap-\* knobs); give.*/\1/p' <<<"$out")
[ -n "$least" ] && [ -n "$flags" ] || fail "the --swap-* knobs to drop are not named: $out"
"$memfit" plan --model resnet-cifar --depth 20 --batch 1 --budget "$least" $flags >/dev/null ||
  fail "--budget $least $flags (named without the knobs) failed"

for args in "--budget 12XB" "--budget -5MiB" "--budget 0" "--budget ''" "--optimizer rmsprop" \
            "--accumulate 0" "--backend tpu" "--recompute log" "--recompute"; do
  out=$(eval "\"$memfit\" plan --model lenet --batch 64 $args" 2>&1); rc=$?
  [ "$rc" -eq 2 ] || fail "'plan $args' exited $rc, not 2"
  grep -q "Usage" <<<"$out" || fail "'plan $args' printed no usage"
done
out=$("$memfit" plan --model lenet --batch 64 --budget 12XB 2>&1)
grep -q "unknown unit 'XB'" <<<"$out" || fail "--budget 12XB does not name the unit: $out"
out=$("$memfit" plan --batch 64 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "plan without --model exited $rc, not 2"

# No sharing: the arena is the sum of every buffer.
json=$("$memfit" plan --model mlp --batch 32 --optimizer adamw --accumulate 2 --no-sharing --json)
[ "$(number arena_bytes)" = "$(number no_sharing_bytes)" ] || fail "--no-sharing: $json"

# Recomputation: the table says what was kept and recomputed; the arena shrinks.
out=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --recompute sqrt) ||
  fail "--recompute sqrt exited $?"
grep -Eq "^  recompute +sqrt$" <<<"$out" || fail "no recompute line: $out"
grep -Eq "^  checkpoints +[0-9]+ of [0-9]+ candidates$" <<<"$out" || fail "no checkpoints: $out"
grep -Eq "^  recomputed nodes +[1-9][0-9]*$" <<<"$out" || fail "no recomputed nodes: $out"
json=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --json)
plain=$(number arena_bytes)
json=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --json \
       --recompute budget)
grep -q '"recompute": "budget",' <<<"$json" || fail "no recompute key: $json"
[ "$(number arena_bytes)" -lt "$plain" ] || fail "--recompute budget did not shrink $plain: $json"
# recursive and mirror shrink it too, and say so.
for args in "--recompute recursive" "--mirror" "--recompute recursive --mirror"; do
  json=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --json $args) ||
    fail "$args exited $?"
  [ "$(number arena_bytes)" -lt "$plain" ] || fail "$args did not shrink $plain: $json"
  [ "$(number recomputed_nodes)" -gt 0 ] || fail "$args recomputed nothing: $json"
done
grep -q '"mirror": true,' <<<"$json" || fail "no mirror key: $json"
# A budget no strategy meets names the smallest one that can be met; that one is met.
out=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --budget 1MiB 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "--budget 1MiB exited $rc, not 1"
least=$(sed -n 's/.*give a --budget of at least \([0-9]*\) bytes.*/\1/p' <<<"$out")
[ -n "$least" ] || fail "--budget 1MiB does not name the smallest budget: $out"
flags=$(sed -n 's/.*reaches is .*, with \(--recompute [a-z]*\( --mirror\)\{0,1\}\( --swap [a-z]*\)\{0,1\}\);.*/\1/p' <<<"$out")
[ -n "$flags" ] || fail "--budget 1MiB does not name the strategy: $out"
"$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --budget "$least" \
  $flags >/dev/null || fail "--budget $least $flags (the smallest named) failed"
# Under each --policy the named flags are a command line that meets the
# named budget: with that policy, or without it where the message says so.
for policy in share recompute swap auto; do
  out=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --budget 1MiB \
        --policy "$policy" 2>&1)
  least=$(sed -n 's/.*give a --budget of at least \([0-9]*\) bytes.*/\1/p' <<<"$out")
  flags=$(sed -n 's/.*reaches is [^,]*, with \(--[a-z -]*[a-z]\)\( (without --policy [a-z]*)\)\{0,1\}; give.*/\1/p' <<<"$out")
  [ -n "$least" ] && [ -n "$flags" ] || fail "--policy $policy: no smallest budget and flags: $out"
  grep -q "(without --policy $policy)" <<<"$out" || grep -q -- "--policy" <<<"$flags" ||
    flags="--policy $policy $flags"
  "$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --budget "$least" \
    $flags >/dev/null 2>&1 || fail "--policy $policy: --budget $least $flags (as named) failed: $out"
done

# optimal: predicted seconds in the table and the JSON; roofline costs by
# default (the same plan on every run), measured ones when asked.
out=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --recompute optimal) ||
  fail "--recompute optimal exited $?"
grep -Eq "^  predicted step +[0-9.]+ s  \(roofline cost model\)$" <<<"$out" || fail "no step: $out"
again=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --recompute optimal)
[ "$again" = "$out" ] || fail "two default optimal plans differ: $out / $again"
measured=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 \
           --recompute optimal --cost measured) || fail "--cost measured exited $?"
grep -Eq "^  predicted step +[0-9.]+ s  \(measured cost model\)$" <<<"$measured" ||
  fail "no measured step: $measured"
grep -Eq "^  of it, recompute +[0-9.]+ s$" <<<"$out" || fail "no recompute seconds: $out"
json=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --json \
       --recompute optimal --cost roofline)
grep -q '"cost_model": "roofline",' <<<"$json" || fail "no cost_model: $json"
grep -Eq '^  "predicted_recompute_seconds": [0-9.e+-]+,$' <<<"$json" || fail "no seconds: $json"
[ "$(number arena_bytes)" -lt "$plain" ] || fail "--recompute optimal did not shrink $plain: $json"
out=$("$memfit" plan --model resnet-cifar --depth 110 --batch 2 --recompute milp 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "milp on a large graph exited $rc, not 1"
grep -q "recompute optimal" <<<"$out" || fail "milp refusal does not suggest optimal: $out"
json=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --json \
       --recompute recursive) || fail "--recompute recursive exited $?"
[ "$(number checkpoint_levels)" -gt 0 ] || fail "recursive: no checkpoint_levels: $json"
json=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --json \
       --recompute milp --mirror --milp-seconds 5 --cost roofline) || fail "milp --mirror exited $?"
grep -q '"mirror": true,' <<<"$json" || fail "milp --mirror: no mirror key: $json"
[ "$(number arena_bytes)" -lt "$plain" ] || fail "milp --mirror did not shrink $plain: $json"

# Swapping: the arena shrinks, the host pool holds the swapped copies.
json=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --json \
       --swap budget --link-gbps 4)
grep -q '"swap": "budget",' <<<"$json" || fail "no swap key: $json"
[ "$(number arena_bytes)" -lt "$plain" ] || fail "--swap budget did not shrink $plain: $json"
[ "$(number host_bytes)" -gt 0 ] || fail "--swap budget: no host bytes: $json"
out=$("$memfit" plan --model resnet-cifar --depth 20 --batch 8 --image-size 16 --swap refcount) ||
  fail "--swap refcount exited $?"
grep -Eq "^  swapped +[0-9]+ of [0-9]+ candidates, " <<<"$out" || fail "no swapped line: $out"
grep -Eq "^  host pool " <<<"$out" || fail "no host pool line: $out"

# maxbatch: swapping fits a larger batch than sharing alone; the JSON has the keys.
json=$("$memfit" maxbatch --model resnet-cifar --depth 11 --image-size 16 --budget 12MiB --json) ||
  fail "maxbatch exited $?"
shared=$(number max_batch)
json=$("$memfit" maxbatch --model resnet-cifar --depth 11 --image-size 16 --budget 12MiB --json \
       --swap budget) || fail "maxbatch --swap budget exited $?"
[ "$(number max_batch)" -gt "$shared" ] || fail "maxbatch --swap budget not above $shared: $json"
grep -q '"predicted_step_seconds": ' <<<"$json" || fail "maxbatch: no predicted_step_seconds: $json"
grep -q '"at_search_limit": false' <<<"$json" || fail "maxbatch: no at_search_limit: $json"
# A budget larger than the search's largest probe needs: maxbatch says so.
out=$("$memfit" maxbatch --model mlp --budget 1000000GiB) || fail "maxbatch under 1000000GiB exited $?"
grep -Eq "^  max batch +16777216 \(the search's largest probe: larger batches were not tried\)$" <<<"$out" ||
  fail "maxbatch at its largest probe does not say so: $out"
# A batch whose step cannot be built ends the search, and the report says why.
out=$("$memfit" maxbatch --model resnet18 --image-size 4096 --budget 16000PiB) ||
  fail "maxbatch past 2^48 elements exited $?"
grep -Eq "^  max batch +1048576$" <<<"$out" || fail "maxbatch past 2^48 elements: $out"
grep -q "^  larger               batch 1048577 does not plan: .*more than 2^48 elements" <<<"$out" ||
  fail "maxbatch does not say why larger batches fail: $out"
json=$("$memfit" maxbatch --model resnet18 --image-size 4096 --budget 16000PiB --json) ||
  fail "maxbatch --json past 2^48 elements exited $?"
grep -q '"larger_refused": ".*more than 2^48 elements"' <<<"$json" || fail "no larger_refused: $json"
out=$("$memfit" maxbatch --model lenet --budget 1KiB 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "maxbatch under 1KiB exited $rc, not 1"
grep -q "even batch 1 does not fit" <<<"$out" || fail "maxbatch under 1KiB: $out"
out=$("$memfit" maxbatch --model lenet 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "maxbatch without --budget exited $rc, not 2"
# maxbatch --vary seq-len: the longest sequence of a small GPT at batch 2;
# fused attention (the default) reaches further than the naive form, and a
# model of images is refused.
gpt=(--model gpt --depth 2 --width 64 --vocab 50 --batch 2 --budget 32MiB --vary seq-len --json)
json=$("$memfit" maxbatch "${gpt[@]}") || fail "maxbatch --vary seq-len exited $?"
fused=$(number max_seq_len)
grep -q '"batch": 2' <<<"$json" || fail "maxbatch --vary seq-len: no batch: $json"
json=$("$memfit" maxbatch "${gpt[@]}" --attention naive) || fail "maxbatch --attention naive exited $?"
[ "$fused" -gt "$(number max_seq_len)" ] ||
  fail "fused attention's longest sequence $fused is not above naive's: $json"
out=$("$memfit" maxbatch --model lenet --budget 1GiB --vary seq-len 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "maxbatch --vary seq-len of lenet exited $rc, not 1"
grep -q "needs a sequence model; lenet reads images" <<<"$out" || fail "lenet --vary seq-len: $out"

"$memfit" plan --model lenet --batch 64 --timeline "$dir/lenet.svg" >/dev/null || fail "--timeline"
head -c 5 "$dir/lenet.svg" | grep -q "<svg " || fail "the timeline does not start with <svg"
tail -n 1 "$dir/lenet.svg" | grep -q "^</svg>$" || fail "the timeline does not end with </svg>"
for word in "<polyline" forward backward update "planned arena" "lower bound"; do
  grep -q "$word" "$dir/lenet.svg" || fail "the timeline has no $word"
done
out=$("$memfit" plan --model lenet --batch 64 --timeline /nonexistent/dir/t.svg 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "an unwritable timeline exited $rc, not 1"

# --profile runs the planned step on synthetic data and says where its time goes.
out=$("$memfit" plan --model lenet --batch 8 --recompute sqrt --profile) || fail "plan --profile exited $?"
grep -q "planned arena" <<<"$out" || fail "plan --profile printed no plan: $out"
grep -Eq "^profile: [0-9.]+ s per step \(mean of 5 steps\)$" <<<"$out" || fail "no profile: $out"
grep -Eq "^  recompute +[1-9][0-9]* " <<<"$out" || fail "sqrt's profile has no recompute nodes: $out"
grep -q "test accuracy" <<<"$out" && fail "plan --profile printed training progress: $out"
"$memfit" plan --model lenet --batch 8 --profile --json >/dev/null 2>&1
[ $? -eq 2 ] || fail "--profile with --json is not a usage error"
echo "ok"
# --backend cuda is refused before anything runs, saying what it needs (a
# CUDA build, a GPU); on a GPU it plans.
rc=0
out=$("$memfit" plan --model resnet-cifar --batch 2 --backend cuda 2>&1) || rc=$?
if [ "$rc" = 0 ]; then
  grep -q "planned arena" <<<"$out" || fail "plan --backend cuda on a GPU printed no plan: $out"
else
  [ "$rc" = 1 ] || fail "plan --backend cuda exited $rc"
  grep -Eq "^memfit plan: --backend cuda(: this memfit was built without CUDA| needs a GPU)" <<<"$out" ||
    fail "plan --backend cuda said: $out"
fi
# --fastest-kernels chooses cuDNN's and cuBLAS's algorithms: cuda only.
rc=0
out=$("$memfit" plan --model lenet --batch 2 --fastest-kernels 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "plan --fastest-kernels on cpu exited $rc (not a usage error)"
grep -q "^memfit plan: --fastest-kernels .* needs --backend cuda" <<<"$out" ||
  fail "plan --fastest-kernels on cpu said: $out"
echo "cli_plan: cuda ok"

# --dump-graphs: the step graph after each pass that changed it, in the
# pipeline's order, the last one being what runs (the unit test reads them
# back); the same plan as without the flag; a file in the way is refused.
dumps="$dir/dumps"
json=$("$memfit" plan --model lenet --batch 64 --json) || fail "plan --json exited $?"
out=$("$memfit" plan --model lenet --batch 64 --dump-graphs "$dumps" --json) ||
  fail "plan --dump-graphs exited $?"
[ "$out" = "$json" ] || fail "--dump-graphs changed the plan"
listed=$(cd "$dumps" && ls)
expected="step-00-model.ir
step-01-fuse_forward_ops.ir
step-02-autodiff.ir
step-03-assign_layouts.ir
step-04-schedule.ir"
[ "$listed" = "$expected" ] || fail "--dump-graphs wrote: $listed"
head -n 1 "$dumps/step-02-autodiff.ir" | grep -q '^memfit-graph 1$' || fail "a dump is not IR text"
touch "$dir/file"
rc=0
out=$("$memfit" plan --model lenet --batch 8 --dump-graphs "$dir/file" 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "--dump-graphs onto a file exited $rc"
grep -q "^memfit plan: --dump-graphs .*/file: not a directory" <<<"$out" ||
  fail "--dump-graphs onto a file said: $out"
echo "cli_plan: dump-graphs ok"
