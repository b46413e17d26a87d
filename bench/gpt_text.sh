#!/usr/bin/env bash
# A GPT learns English from byte tokens (vocabulary 256): the license texts
# every Debian system ships (/usr/share/common-licenses, package
# base-files), 90% to train on and 10% to validate, as flat uint16 token
# files; `memfit train --tokens` prints the validation loss in nats after
# every epoch (uniform guessing: ln 256 = 5.55 nats a byte). docs/data.md.
# Usage: bench/gpt_text.sh MEMFIT [EPOCHS]
set -euo pipefail
memfit=$(realpath "$1")
epochs=${2:-8}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat /usr/share/common-licenses/* >"$dir/text" 2>/dev/null || true
/usr/bin/python3 - "$dir" <<'PY'
import sys, numpy as np
d = sys.argv[1]
t = np.fromfile(d + "/text", np.uint8).astype(np.uint16)
cut = len(t) * 9 // 10
t[:cut].tofile(d + "/train.u16"); t[cut:].tofile(d + "/val.u16")
print(f"text: {len(t)} bytes of /usr/share/common-licenses/*, {cut} to train on, {len(t) - cut} to validate")
PY
"$memfit" train --model gpt --vocab 256 --seq-len 128 --depth 4 --width 128 --batch 16 \
  --tokens "$dir/train.u16" --val-tokens "$dir/val.u16" --epochs "$epochs" \
  --optimizer adamw --lr 0.002 --warmup-steps 50 --schedule cosine --min-lr 0.0002 --log-every 1000
