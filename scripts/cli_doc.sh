#!/usr/bin/env bash
# Writes the generated blocks of docs/cli.md: each block is the output of
# `memfit ... --help` for the command its opening marker names,
#   <!-- generated: memfit plan --help -->
#   ...
#   <!-- end generated -->
# in a fenced code block; every line outside the blocks is prose written by
# hand and is kept as it is. With --check, changes nothing and fails (status
# 1) when a block differs from the program's help (naming the command and
# showing the difference), when a command of `memfit --help` has no block,
# or when a block names a command the program does not have.
# Usage: scripts/cli_doc.sh [--check] [MEMFIT] [DOC]
#   MEMFIT: the program (default: build/memfit); DOC: default docs/cli.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [[ ${1:-} == --check ]]; then
  check=1
  shift
fi
memfit=${1:-$root/build/memfit}
doc=${2:-$root/docs/cli.md}
name=${2:-docs/cli.md}
regenerate="scripts/cli_doc.sh${1:+ $1}"
[[ -x $memfit ]] || { echo "cli_doc: no program at $memfit (build it: cmake --build build --target memfit)" >&2; exit 2; }
[[ -f $doc ]] || { echo "cli_doc: no $doc" >&2; exit 2; }

begin='^<!-- generated: memfit( [a-z]+)? --help -->$'
end='<!-- end generated -->'
fence='```'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The help of `memfit $1 --help` ($1 empty: the top level), fenced.
help_block() {
  local out
  # shellcheck disable=SC2086  # $1 is one word or none
  if ! out=$("$memfit" $1 --help 2>&1); then
    echo "cli_doc: \`memfit${1:+ $1} --help\` failed: $out" >&2
    return 1
  fi
  printf '%s\n%s\n%s\n' "$fence" "$out" "$fence"
}

# The document with every block regenerated; the commands found go to $tmp/commands.
failed=0
: >"$tmp/commands"
{
  in_block=0
  command=""
  while IFS= read -r line || [[ -n $line ]]; do
    if ((in_block)); then
      if [[ $line == "$end" ]]; then
        in_block=0
        if ! help_block "$command" >"$tmp/new.$command"; then failed=1; fi
        cat "$tmp/new.$command"
        printf '%s\n' "$line"
      else
        printf '%s\n' "$line" >>"$tmp/old.$command"
      fi
      continue
    fi
    printf '%s\n' "$line"
    if [[ $line =~ $begin ]]; then
      in_block=1
      command=${BASH_REMATCH[1]# }
      echo "$command" >>"$tmp/commands"
      : >"$tmp/old.$command"
    fi
  done <"$doc"
  if ((in_block)); then
    echo "cli_doc: $name: the block of \`memfit${command:+ $command} --help\` has no '$end'" >&2
    failed=1
  fi
} >"$tmp/doc"
((failed == 0)) || exit 2

if ((check == 0)); then
  if ! cmp -s "$tmp/doc" "$doc"; then
    cp "$tmp/doc" "$doc"
    echo "cli_doc: wrote $doc"
  fi
  exit 0
fi

# Every command the program lists (and the top level) must have a block.
mapfile -t commands < <("$memfit" --help | sed -n '/^Subcommands:/,$p' | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p')
for command in "" "${commands[@]}"; do
  if ! grep -qx -- "$command" "$tmp/commands"; then
    echo "$name has no block of \`memfit${command:+ $command} --help\`: add the line" \
         "'<!-- generated: memfit${command:+ $command} --help -->' and '$end' where it goes," \
         "then run $regenerate"
    failed=1
  fi
done
while IFS= read -r command; do
  if ! cmp -s "$tmp/old.$command" "$tmp/new.$command"; then
    echo "$name: the block of \`memfit${command:+ $command} --help\` differs from the" \
         "program's help (- the document, + the program); run $regenerate to regenerate it"
    diff -u --label "$name" --label "memfit${command:+ $command} --help" \
      "$tmp/old.$command" "$tmp/new.$command" | tail -n +3 || true
    failed=1
  fi
done <"$tmp/commands"
exit "$failed"
