"""Numerical cross-check: memfit's models are PyTorch's networks.

For each model: PyTorch builds the twin (bench/peer/models.py) without
dropout, draws its weights and one batch, and writes both in memfit's
checkpoint format (src/train/checkpoint.h); build/bench/peer_grads runs memfit's
model on them and writes its loss and the gradient of every parameter; this
script compares them with PyTorch's, computed in float32 like memfit's.

Relative error of a tensor: ||g_memfit - g_torch|| / ||g_torch|| (2-norms);
the check passes when the loss and every gradient are under --tolerance
(1e-4). The same error of PyTorch's float32 result against PyTorch in
float64 is printed beside it: the rounding noise of float32 itself.

A ReLU whose input is within float32 rounding of zero makes the gradient
jump: two float32 implementations (or PyTorch in float32 and in float64) may
pass or block that element's gradient, which moves whole gradient tensors by
1e-3 (resnet18 at 224x224 and batch 2 has an input at 2.5e-7 of its tensor's
RMS; see docs/peer.md). So the script measures, in float64, the smallest
|ReLU input| / RMS of its tensor over the forward pass, and refuses a case
whose margin is below --min-margin (1e-6): it could not be compared to 1e-4.
The default cases are sized so that their margins are clear.

  bench/peer/.venv/bin/python bench/peer/crosscheck.py --peer-grads build/bench/peer_grads
"""

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import models

MAGIC = b"MEMFITCK"
VERSION = 3  # src/train/checkpoint.h kCheckpointVersion

# (name, memfit size flags, batch): the models of the check, at sizes that
# run in seconds on two cores; resnet18 at full width and depth (every one of
# its 62 parameter tensors) on 64x64 images, whose ReLU margin is 3.8e-6.
CASES = [
    ("lenet", {}, 8),
    ("resnet18", {"image_size": 64}, 2),
    ("lstm-lm", {"depth": 2, "width": 64, "seq_len": 12, "vocab": 100}, 8),
    ("gpt", {"depth": 2, "width": 128, "seq_len": 64, "vocab": 512}, 4),
]


def write_checkpoint(path, model_name, tensors):
    """tensors: (name, float32 tensor) pairs, written as memfit's checkpoint."""
    payload = bytearray()

    def string(s):
        b = s.encode()
        payload.extend(struct.pack("<I", len(b)))
        payload.extend(b)

    string(model_name)
    # epoch, micro_step, optimizer_step; the run settings (batch, accumulate,
    # train_examples, epochs, schedule, seed, data); the tensor count.
    payload.extend(struct.pack("<qqq", 0, 0, 0))
    payload.extend(struct.pack("<qqqqqQ", 0, 0, 0, 0, 0, 0))
    string("")
    payload.extend(struct.pack("<I", len(tensors)))
    for name, t in tensors:
        t = t.detach().to(torch.float32).contiguous()
        string(name)
        payload.extend(struct.pack("<I", t.dim()))
        payload.extend(struct.pack(f"<{t.dim()}q", *t.shape))
        payload.extend(t.numpy().astype("<f4").tobytes())
    header = MAGIC + struct.pack("<IQI", VERSION, len(payload), zlib.crc32(payload))
    with open(path, "wb") as f:
        f.write(header + payload)


def read_checkpoint(path):
    """The tensors of a memfit checkpoint, by name."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path} is not a memfit checkpoint")
    version, length, crc = struct.unpack_from("<IQI", data, 8)
    payload = data[24:24 + length]
    if version != VERSION or len(payload) != length or zlib.crc32(payload) != crc:
        raise ValueError(f"{path}: wrong version, truncated or corrupt")
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from(fmt, payload, pos)
        pos += struct.calcsize(fmt)
        return values

    def string():
        nonlocal pos
        (n,) = take("<I")
        pos += n
        return payload[pos - n:pos].decode()

    string()
    take("<qqq")  # the counters
    take("<qqqqqQ")  # the run settings
    string()  # the data
    (count,) = take("<I")
    out = {}
    for _ in range(count):
        name = string()
        (rank,) = take("<I")
        shape = take(f"<{rank}q")
        elements = 1
        for d in shape:
            elements *= d
        values = torch.frombuffer(bytearray(payload[pos:pos + 4 * elements]), dtype=torch.float32)
        pos += 4 * elements
        out[name] = values.reshape(shape)
    return out


def make_model(name, sizes):
    torch.manual_seed(0)
    model = models.build(name, p=0.0, **sizes) if name in ("gpt", "lstm-lm") else \
        models.build(name, **sizes)
    # Normalization layers away from their identity start, so that their
    # gradients and the ones through them are not special cases.
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.LayerNorm)):
            torch.nn.init.uniform_(m.weight, 0.5, 1.5)
            torch.nn.init.uniform_(m.bias, -0.5, 0.5)
    if name == "gpt":  # GPT-2's embedding scale; N(0, 1) would saturate the tied logits
        torch.nn.init.normal_(model.wte.weight, std=0.02)
        torch.nn.init.normal_(model.wpe.weight, std=0.02)
    return model.train()


def make_batch(name, sizes, batch, model):
    g = torch.Generator().manual_seed(1)
    if name in ("gpt", "lstm-lm"):
        vocab, t = sizes["vocab"], sizes["seq_len"]
        return {"tokens": torch.randint(0, vocab, (batch, t), generator=g),
                "labels": torch.randint(0, vocab, (batch, t), generator=g)}
    s = sizes.get("image_size", 28)
    channels = 1 if name == "lenet" else 3
    classes = model.fc2.out_features if name == "lenet" else model.fc.out_features
    return {"images": torch.randn(batch, channels, s, s, generator=g),
            "labels": torch.randint(0, classes, (batch,), generator=g)}


def torch_gradients(model, inputs, dtype):
    """The loss and the gradient of every parameter (memfit names), in dtype."""
    model = model.to(dtype)
    model.zero_grad(set_to_none=True)
    x = inputs["images"].to(dtype) if "images" in inputs else inputs["tokens"]
    loss = models.Whole(model)(x, inputs["labels"])
    loss.backward()
    grads = {models.memfit_name(n): p.grad.detach().clone() for n, p in model.named_parameters()}
    return loss.detach(), grads


class ReluMargin(TorchFunctionMode):
    """Records min |x| / rms(x) over the inputs of every ReLU run inside it."""

    def __init__(self):
        super().__init__()
        self.margin = float("inf")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (F.relu, torch.relu):
            x = args[0].detach()
            rms = x.pow(2).mean().sqrt().clamp_min(1e-300)
            self.margin = min(self.margin, (x.abs().min() / rms).item())
        return func(*args, **(kwargs or {}))


def relu_margin(model, inputs):
    """The smallest relative ReLU margin of the forward pass, in float64."""
    model = model.to(torch.float64)
    x = inputs["images"].double() if "images" in inputs else inputs["tokens"]
    watch = ReluMargin()
    with torch.no_grad(), watch:
        models.Whole(model)(x, inputs["labels"])
    return watch.margin


def relative_error(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def check(name, sizes, batch, peer_grads, threads, backend, tolerance, min_margin, workdir,
          verbose):
    model = make_model(name, sizes)
    inputs = make_batch(name, sizes, batch, model)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    margin = relu_margin(model, inputs)
    model = model.to(torch.float32)
    model.load_state_dict(initial)
    if margin < min_margin:
        raise SystemExit(f"{name}: a ReLU input lies {margin:.1e} of its tensor's RMS from zero, "
                         f"below --min-margin {min_margin:g}: float32 rounding may flip it and "
                         "move the gradients by far more than the tolerance; choose another "
                         "size or batch")
    state = [(models.memfit_name(n), t) for n, t in model.state_dict().items()
             if not n.endswith("num_batches_tracked")]
    weights = os.path.join(workdir, f"{name}.weights.ckpt")
    batch_file = os.path.join(workdir, f"{name}.batch.ckpt")
    out = os.path.join(workdir, f"{name}.grads.ckpt")
    write_checkpoint(weights, name, state)
    write_checkpoint(batch_file, name, [(k, v.to(torch.float32)) for k, v in inputs.items()])
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in sizes.items()]
    cmd = [peer_grads, "--model", name, "--batch", str(batch), *flags, "--weights", weights,
           "--inputs", batch_file, "--out", out, "--threads", str(threads), "--backend", backend]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    memfit = read_checkpoint(out)

    loss32, grads32 = torch_gradients(model, inputs, torch.float32)
    model.load_state_dict(initial)  # batch norm moved its running statistics
    loss64, grads64 = torch_gradients(model, inputs, torch.float64)

    rows = [("loss", relative_error(memfit["loss"].reshape(()), loss32),
             relative_error(loss32, loss64))]
    if set(grads32) != {k[:-5] for k in memfit if k.endswith(".grad")}:
        raise SystemExit(f"{name}: memfit's parameters differ from PyTorch's: "
                         f"{sorted(set(grads32) ^ {k[:-5] for k in memfit if k != 'loss'})}")
    for pname, g in grads32.items():
        mine = memfit[pname + ".grad"]
        if mine.shape != g.shape:
            raise SystemExit(f"{name}: {pname}: memfit shape {tuple(mine.shape)}, "
                             f"PyTorch {tuple(g.shape)}")
        rows.append((pname, relative_error(mine, g), relative_error(g, grads64[pname])))
    if verbose:
        for row in rows:
            print(f"  {row[0]:40s} {row[1]:.2e}  (float32 vs float64: {row[2]:.2e})")
    worst = max(rows, key=lambda r: r[1])
    ok = worst[1] < tolerance
    params = sum(p.numel() for p in model.parameters())
    print(f"{name}: batch {batch}, {params} parameters in {len(rows) - 1} tensors; loss "
          f"memfit {memfit['loss'].item():.7g}, PyTorch {loss32.item():.7g}; ReLU margin "
          f"{'none (no ReLU)' if margin == float('inf') else f'{margin:.1e}'}")
    print(f"  worst relative error: {worst[1]:.2e} ({worst[0]}); float32 PyTorch vs float64 "
          f"there: {worst[2]:.2e}; worst float32 vs float64 of all: "
          f"{max(r[2] for r in rows):.2e} -> {'ok' if ok else 'FAIL'}")
    return ok, worst


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--peer-grads", default="build/bench/peer_grads")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--backend", choices=["cpu", "reference"], default="cpu",
                   help="memfit's backend: cpu (oneDNN) or reference (plain loops)")
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--min-margin", type=float, default=1e-6,
                   help="refuse a case with a ReLU input closer to zero, relative to its RMS")
    p.add_argument("--verbose", action="store_true", help="print the error of every tensor")
    p.add_argument("--models", default=",".join(c[0] for c in CASES))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    wanted = args.models.split(",")
    failed = []
    with tempfile.TemporaryDirectory() as workdir:
        for name, sizes, batch in CASES:
            if name in wanted:
                ok, _ = check(name, sizes, batch, args.peer_grads, args.threads, args.backend,
                              args.tolerance, args.min_margin, workdir, args.verbose)
                if not ok:
                    failed.append(name)
    if failed:
        print(f"cross-check FAILED for {', '.join(failed)} (tolerance {args.tolerance:g})")
        return 1
    print(f"cross-check passed: every relative error under {args.tolerance:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
