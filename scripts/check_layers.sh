#!/usr/bin/env bash
# Checks that the layers of docs/design.md include only downward: a file may
# include headers of its own layer and of the layers below it, never of a
# layer above. Scans every #include "..." of the C++ files in src/,
# include/memfit/, tools/ and python/ (the Python module's binding, on top
# with tools/) under ROOT (default: this repository) and prints
# one line per violation: file:line, its layer, the header and its layer.
# A folder or public header without a layer, or an include not written from
# src/ or include/, is a violation too, so a new one must be given its place
# below. Exits 1 if there is any violation.
# Usage: scripts/check_layers.sh [ROOT]
set -euo pipefail

# Bottom first: src/<layer>/ for each, and tools/ on top.
layers=(core ir ops autodiff memory dist runtime backends cost passes models onnx step train tools)
# The public headers (include/memfit/) and their layers.
declare -A public=(
  [status.h]=core [bytes.h]=core [attrs.h]=ir [op_list.h]=ir [ir.h]=ir [optimizer.h]=autodiff
  [builder.h]=models [techniques.h]=passes [step.h]=step [train.h]=train [plan.h]=train [dist.h]=dist)

declare -A rank
for i in "${!layers[@]}"; do rank[${layers[$i]}]=$i; done

# Sets `layer` to the layer of a header as it is included ("ops/op_table.h",
# "memfit/ir.h"), or to "" if it has none.
header_layer() {
  layer=""
  case $1 in
    memfit/*/*) ;;
    memfit/*) layer=${public[${1#memfit/}]:-} ;;
    python/*) layer=tools ;;
    */*) if [[ -n ${rank[${1%%/*}]:-} ]]; then layer=${1%%/*}; fi ;;
  esac
}

# Sets `layer` to the layer of a file (a path under ROOT), or to "" if it has none.
file_layer() {
  layer=""
  case $1 in
    src/memfit/*) ;;
    src/*/*) header_layer "${1#src/}" ;;
    include/memfit/*) header_layer "${1#include/}" ;;
    tools/* | python/*) layer=tools ;;
  esac
}

cd "${1:-$(dirname "$0")/..}"
dirs=()
for dir in src include/memfit tools python; do
  if [[ -d $dir ]]; then dirs+=("$dir"); fi
done
if ((${#dirs[@]} == 0)); then
  echo "nothing to check: no src/, include/memfit/ or tools/ in $PWD" >&2
  exit 1
fi
failed=0
violation() {
  echo "$1"
  failed=1
}

while IFS= read -r file; do
  file_layer "$file"
  own=$layer
  if [[ -z $own ]]; then
    violation "$file: has no layer (give it one in scripts/check_layers.sh)"
    continue
  fi
  while IFS=: read -r line text; do
    header=${text#*\"}
    header=${header%%\"*}
    header_layer "$header"
    if [[ -z $layer ]]; then
      violation "$file:$line: $own includes $header, which has no layer (include headers by their path under src/ or include/)"
    elif ((rank[$layer] > rank[$own])); then
      violation "$file:$line: $own includes $header ($layer)"
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
done < <(find "${dirs[@]}" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cc' \
  -o -name '*.cu' -o -name '*.cuh' \) | sort)
exit "$failed"
