#!/usr/bin/env bash
# bench/peer's memfit programs without PyTorch: peer_step speaks its protocol
# and runs the step `memfit plan` plans (the same arena, shared or not);
# peer_grads refuses a missing file with a message that names it. Kernel
# workspaces depend on the thread count, and `memfit plan` plans for one
# thread per core: peer_step runs with as many.
set -uo pipefail
memfit="$1" peer_step="$2" peer_grads="$3"
fail() { echo "FAIL: $*"; exit 1; }
field() { grep -oE "\"$1\": *[0-9]+" <<<"$2" | head -1 | grep -oE '[0-9]+$'; }
plan=$("$memfit" plan --model lenet --batch 8 --json) || fail "memfit plan exited $?"
for mode in shared no-sharing; do
  flags=(); [ "$mode" = no-sharing ] && flags=(--no-sharing)
  out=$(printf 'run 2\ndone\n' | "$peer_step" --model lenet --batch 8 --threads "$(nproc)" --warmup 1 \
        "${flags[@]}") || fail "peer_step ($mode) exited $?: $out"
  ready=$(sed -n 1p <<<"$out") steps=$(sed -n 2p <<<"$out") done=$(sed -n 3p <<<"$out")
  grep -q '"ready": true' <<<"$ready" || fail "no ready line: $out"
  grep -Eq '^\{"seconds": \[[0-9.]+, [0-9.]+\]\}$' <<<"$steps" || fail "not two step times: $out"
  want=$(field arena_bytes "$plan"); [ "$mode" = no-sharing ] && want=$(field no_sharing_bytes "$plan")
  [ "$(field arena_bytes "$done")" = "$want" ] ||
    fail "$mode: peer_step's arena $(field arena_bytes "$done"), memfit plan's $want"
  [ "$(field peak_rss_bytes "$done")" -gt "$(field arena_bytes "$done")" ] ||
    fail "$mode: the peak resident set is below the arena: $done"
done
out=$(echo "jump" | "$peer_step" --model lenet --batch 2 --warmup 0 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -q "unknown request 'jump'" <<<"$out" || fail "a bad request: $rc $out"
out=$("$peer_grads" --model lenet --batch 2 --weights /nonexistent/w.ckpt --inputs x --out y 2>&1)
rc=$?
[ "$rc" -eq 1 ] && grep -q "/nonexistent/w.ckpt" <<<"$out" || fail "a missing file: $rc $out"
echo "ok"
