#!/usr/bin/env bash
# The layer check (scripts/check_layers.sh, given as $1) on small trees of its
# own: it passes a tree that includes only downward and fails, with one line
# per violation, one that includes upward or names a folder or header that
# has no layer, so that it cannot pass by checking nothing.
set -euo pipefail
check=$1
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

# Writes file $1 (under the tree) with the #include lines of the headers $2...
put() {
  local file=$root/$1
  shift
  mkdir -p "$(dirname "$file")"
  : >"$file"
  if (($#)); then printf '#include "%s"\n' "$@" >"$file"; fi
}

# Runs the check; fails unless it exits with $1 and prints exactly $2.
expect() {
  local output rc=0
  output=$("$check" "$root") || rc=$?
  if [[ $rc != "$1" || $output != "$2" ]]; then
    printf 'expected exit %s and output:\n%s\ngot exit %s and output:\n%s\n' "$1" "$2" "$rc" "$output"
    exit 1
  fi
}

put include/memfit/status.h
put include/memfit/ir.h memfit/status.h
put src/core/check.h memfit/status.h
put src/ops/op_table.h memfit/ir.h core/check.h
put src/backends/cpu/kernels.cpp ops/op_table.h backends/cpu/kernels.h
put tools/memfit/main.cpp memfit/plan.h
expect 0 ""

put src/ir/graph.cpp core/check.h ops/op_table.h
expect 1 "src/ir/graph.cpp:2: ir includes ops/op_table.h (ops)"

put include/memfit/ir.h memfit/status.h memfit/plan.h
expect 1 "include/memfit/ir.h:2: ir includes memfit/plan.h (train)
src/ir/graph.cpp:2: ir includes ops/op_table.h (ops)"

rm "$root/src/ir/graph.cpp" "$root/include/memfit/ir.h"
put src/extra/util.cpp core/check.h
put src/core/random.h check.h
put include/memfit/extra.h memfit/status.h
expect 1 "include/memfit/extra.h: has no layer (give it one in scripts/check_layers.sh)
src/core/random.h:1: core includes check.h, which has no layer (include headers by their path under src/ or include/)
src/extra/util.cpp: has no layer (give it one in scripts/check_layers.sh)"
echo "check_layers.sh: all cases as expected"
