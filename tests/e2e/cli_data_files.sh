#!/usr/bin/env bash
# `memfit train` on the user's own files: Fashion-MNIST written as a .npz
# trains to the very losses of the built-in reader, and `memfit evaluate`
# gives its checkpoint the run's last validation loss and accuracy; a GPT learns English
# from a flat file of byte tokens (the license texts every Debian system
# ships); and every bad file is refused with a message naming what is wrong,
# leaving an earlier checkpoint as it was.
set -euo pipefail
memfit="$1"
py=/usr/bin/python3  # Debian's, with python3-numpy
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"

# Fashion-MNIST's first 1000 training and test examples, normalized as the
# built-in reader does (in float32), as arrays named after lenet's inputs.
"$py" - <<'PY'
import gzip, numpy as np
root = "/usr/share/datasets/fashion-mnist/"
def images(name):
    raw = np.frombuffer(gzip.open(root + name).read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    x = raw[:1000].astype(np.float32)
    return (x / np.float32(255) - np.float32(0.2860)) / np.float32(0.3530)
def labels(name):
    return np.frombuffer(gzip.open(root + name).read(), np.uint8, offset=8)[:1000].astype(np.int64)
np.savez("fashion.npz", images=images("train-images-idx3-ubyte.gz"),
         labels=labels("train-labels-idx1-ubyte.gz"))
np.savez_compressed("fashion-test.npz", images=images("t10k-images-idx3-ubyte.gz"),
                    labels=labels("t10k-labels-idx1-ubyte.gz"))
PY
settings=(--model lenet --batch 50 --epochs 2 --json)
"$memfit" train "${settings[@]}" --limit 1000 >builtin.json
"$memfit" train "${settings[@]}" --data fashion.npz --val-data fashion-test.npz --save arrays.ckpt \
  >arrays.json
# memfit evaluate: the checkpoint on the validation file, as the run's last evaluation.
"$memfit" evaluate --model lenet --batch 50 --checkpoint arrays.ckpt --data fashion-test.npz \
  --json >evaluate.json
"$py" - <<'PY'
import json
a, b = json.load(open("builtin.json")), json.load(open("arrays.json"))
assert a["data"] == "fashion-mnist" and b["data"] == "arrays", (a["data"], b["data"])
assert len(a["losses"]) == 40 and a["losses"] == b["losses"], "the losses differ"
# Evaluation: batches of 1000 built in, of 50 (the training batch) for files.
assert a["test_accuracy"] == b["test_accuracy"], (a["test_accuracy"], b["test_accuracy"])
assert all(abs(x - y) < 1e-5 * x for x, y in zip(a["test_loss"], b["test_loss"])), (a, b)
e = json.load(open("evaluate.json"))
assert e["examples"] == 1000 and e["loss"] == b["test_loss"][-1], (e, b["test_loss"])
assert e["accuracy"] == b["test_accuracy"][-1], (e, b["test_accuracy"])
print("npz = built-in: 40 losses identical, test accuracy", b["test_accuracy"][-1])
PY

# Byte tokens of English text: 90% to train on, the rest to validate.
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/LGPL-3 \
    /usr/share/common-licenses/Apache-2.0 /usr/share/common-licenses/GPL-2 \
    /usr/share/common-licenses/MPL-2.0 /usr/share/common-licenses/GFDL-1.3 >text
"$py" - <<'PY'
import numpy as np
t = np.fromfile("text", np.uint8).astype(np.uint16)
cut = len(t) * 9 // 10
t[:cut].tofile("train.u16"); t[cut:].tofile("val.u16")
PY
gpt=(--model gpt --vocab 256 --seq-len 64 --depth 2 --width 64 --batch 16)
log=$("$memfit" train "${gpt[@]}" --tokens train.u16 --val-tokens val.u16 --epochs 3 \
      --optimizer adamw --lr 0.003 --warmup-steps 20 2>&1)
echo "$log"
grep -Eq "^data: uint16 tokens of train.u16 \([0-9]+ windows of 65\)" <<<"$log"
# Uniform guessing is ln 256 = 5.55 nats a byte; the model must do far better.
last=$(grep -Eo "validation loss [0-9.]+ nats" <<<"$log" | tail -1 | awk '{print $3}')
[ "$(grep -c "validation loss" <<<"$log")" -eq 3 ]
awk -v l="$last" 'BEGIN { exit !(l < 3.5) }' || { echo "validation loss $last is not below 3.5"; exit 1; }

# Bad files. An earlier checkpoint must survive each refusal unchanged.
"$memfit" train --model lenet --synthetic --limit 128 --batch 64 --epochs 1 --save keep.ckpt >/dev/null
before=$(cksum <keep.ckpt)
refused() {  # refused MESSAGE FLAGS...: the run fails and says MESSAGE
  local message=$1; shift
  local out
  if out=$("$memfit" train --batch 8 --epochs 1 --save keep.ckpt "$@" 2>&1); then
    echo "accepted: $*"; echo "$out"; exit 1
  fi
  grep -qF -- "$message" <<<"$out" || { echo "expected '$message' for $*, got: $out"; exit 1; }
  [ "$(cksum <keep.ckpt)" = "$before" ] || { echo "the checkpoint changed: $*"; exit 1; }
}
"$py" - <<'PY'
import numpy as np
x = np.zeros((16, 1, 28, 28), np.float32); y = np.arange(16) % 10
np.savez("shape.npz", images=np.zeros((16, 1, 28, 27), np.float32), labels=y)
np.savez("dtype.npz", images=x, labels=y.astype(np.float32))
np.savez("missing.npz", images=x)
np.savez("extra.npz", images=x, labels=y, weights=y)
np.savez("range.npz", images=x, labels=np.where(np.arange(16) == 5, 10, y))
np.savez("counts.npz", images=x, labels=y[:15])
nan = x.copy(); nan[9, 0, 3, 3] = np.nan
np.savez("nan.npz", images=nan, labels=y)
np.array([1, 2, 3, 300, 4] * 40, np.uint16).tofile("vocab.u16")
PY
head -c 3000 fashion.npz >cut.npz
echo "not a zip" >text.npz
: >empty.npz
: >empty.u16
head -c 1001 train.u16 >odd.u16
refused "array 'images' is (16, 1, 28, 27) float32, but model lenet reads (N, 1, 28, 28) f32" \
  --model lenet --data shape.npz
refused "array 'labels' is (16,) float32, but model lenet reads (N) i32" --model lenet --data dtype.npz
refused "holds no array 'labels', which model lenet reads" --model lenet --data missing.npz
refused "holds array 'weights' (16,) int64, which model lenet does not read" --model lenet --data extra.npz
refused "value 10 at flat position 5 (example 5) is outside [0, 10)" --model lenet --data range.npz
refused "hold different numbers of examples (16 and 15" --model lenet --data counts.npz
refused "is neither a .npy array (numpy.save) nor a .npz archive" --model lenet --data text.npz
refused "is empty" --model lenet --data empty.npz
refused "cannot read it as a zip" --model lenet --data cut.npz
small=(--model gpt --vocab 256 --seq-len 8 --depth 1 --width 32)
refused "(element index in the file) is not below 256, the 256 rows of model gpt's embedding table" \
  "${small[@]}" --tokens vocab.u16
refused "token file empty.u16 is empty" "${small[@]}" --tokens empty.u16
refused "holds 1001 bytes, not a whole number of 2-byte (uint16) token ids" "${small[@]}" --tokens odd.u16
refused "token files feed models whose data inputs are tokens and labels" --model lenet --tokens train.u16
refused "--val-data goes with --data FILE" --model lenet --synthetic --val-data fashion.npz
refused "--tokens and --synthetic both give the training examples" "${small[@]}" --synthetic --tokens train.u16
# NaN in an input is read as it is, as PyTorch does: the run trains on until
# the loss or the state holds a NaN, and stops there saying so.
refused "training diverged and stopped" --model lenet --data nan.npz
echo "every bad file refused"
