#!/usr/bin/env bash
# Runs one fuzz target for SECONDS on a fresh corpus copied from its seeds and
# prints libFuzzer's last status line (executions, coverage, corpus). A crash,
# a sanitizer report or a leak fails it (libFuzzer exits non-zero and writes
# the input as crash-* beside the target).
# Usage: run_fuzz.sh TARGET SEED_DIR SECONDS [libFuzzer flags...]
set -euo pipefail
target="$1"
seeds="$2"
seconds="$3"
shift 3
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp -r "$seeds"/. "$corpus"/
log="$corpus.log"
status=0
"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$(dirname "$target")/" "$@" "$corpus" >"$log" 2>&1 || status=$?
grep -E "^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)" "$log" | tail -n 1 || true
grep -E "^stat::" "$log" || true
if [ "$status" -ne 0 ]; then
  tail -n 60 "$log"
  echo "$(basename "$target"): FAILED (exit $status)"
fi
rm -f "$log"
exit "$status"
