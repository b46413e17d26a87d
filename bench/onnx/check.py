"""memfit's ONNX import checked against PyTorch and onnxruntime (docs/onnx.md).

For torchvision's resnet18 and resnet50 and a 2-layer GPT-2 (bench/peer's
twin of memfit's gpt, naive attention), exported by torch.onnx at opset 17:
  params   the trainable parameters PyTorch counts and memfit imports;
  forward  memfit's evaluation output (build/bench/peer_grads --forward)
           against onnxruntime's on the same file and batch, as the relative
           error ||a - b|| / ||b||;
  grads    memfit's loss and parameter gradients (peer_grads, float32)
           against PyTorch's in float32, the largest relative error over the
           tensors, within bench/peer's tolerance (1e-4); a tensor over it
           passes when memfit is as close to PyTorch's float64 gradient as
           PyTorch's float32 one is (within a factor of 2), since float32
           itself can be farther than 1e-4 from the exact gradient;
  plan     memfit plan of the imported model against the zoo's twin;
  trained  memfit train --synthetic for a few steps, --save-onnx, then
           onnxruntime on the saved file against memfit's forward from its
           checkpoint of the same run.
gpt2@13 is the GPT-2 exported at opset 13, where layer normalization is
written out in ReduceMean, Sub, Pow, Sqrt and Div.
Prints one table (Markdown) and exits 1 when a check fails. Run by
bench/onnx/run.sh, which installs its packages first.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peer"))
import models  # noqa: E402  bench/peer's PyTorch twins of the zoo
from crosscheck import read_checkpoint, relative_error, write_checkpoint  # noqa: E402

FORWARD_TOLERANCE = 1e-5
GRAD_TOLERANCE = 1e-4


class GptLogits(torch.nn.Module):
    """bench/peer's gpt twin as one module: tokens (N, T) -> logits (N*T, V)."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, tokens):
        x = tokens
        for block in self.gpt.blocks:
            x = block(x)
        return x


def make_case(name, seq_len, image_size=224):
    """The module, a batch of its inputs and labels, and memfit's zoo twin's flags."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if name.startswith("resnet"):
        model = getattr(torchvision.models, name)(weights=None)
        # Batch norm away from its identity start, so its gradients are not special cases.
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                torch.nn.init.uniform_(m.weight, 0.5, 1.5)
                torch.nn.init.uniform_(m.bias, -0.5, 0.5)
        batch = 2
        x = torch.randn(batch, 3, image_size, image_size, generator=g)
        labels = torch.randint(0, 1000, (batch,), generator=g)
        return model, {"images": x}, labels, ["--model", name, "--image-size", str(image_size)]
    gpt = models.Gpt(depth=2, seq_len=seq_len, p=0.0, attention="naive")
    torch.nn.init.normal_(gpt.wte.weight, std=0.02)
    torch.nn.init.normal_(gpt.wpe.weight, std=0.02)
    for m in gpt.modules():
        if isinstance(m, torch.nn.LayerNorm):
            torch.nn.init.uniform_(m.weight, 0.5, 1.5)
            torch.nn.init.uniform_(m.bias, -0.5, 0.5)
    batch = 2
    tokens = torch.randint(0, 50257, (batch, seq_len), generator=g)
    labels = torch.randint(0, 50257, (batch, seq_len), generator=g)
    return GptLogits(gpt), {"tokens": tokens}, labels, [
        "--model", "gpt", "--depth", "2", "--seq-len", str(seq_len), "--attention", "naive",
        "--no-dropout"]


def export(model, inputs, path, training, opset=17):
    """torch.onnx (TorchScript exporter) at opset 17, batch dynamic, without
    constant folding (which would store the transpose of a tied weight as an
    initializer of its own, a separate parameter). Training mode keeps batch
    norm on batch statistics (onnxruntime too); evaluation mode on the
    running ones."""
    name = next(iter(inputs))
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    model.train(training)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(inputs.values()), path, opset_version=opset, dynamo=False,
                          training=mode, do_constant_folding=False, input_names=[name],
                          output_names=["logits"],
                          dynamic_axes={name: {0: "batch"}, "logits": {0: "batch"}})


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stdout}{done.stderr}")
    return done.stdout


def ort_outputs(path, inputs):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feed = {k: v.numpy() for k, v in inputs.items()}
    return torch.from_numpy(session.run(["logits"], feed)[0])


def memfit_forward(tools, path, inputs, batch, workdir, weights=None):
    batch_file = os.path.join(workdir, "forward.batch.ckpt")
    out = os.path.join(workdir, "forward.out.ckpt")
    write_checkpoint(batch_file, "onnx", [(k, v.to(torch.float32)) for k, v in inputs.items()])
    cmd = [tools["peer_grads"], "--onnx", path, "--batch", str(batch), "--forward",
           "--inputs", batch_file, "--out", out, "--threads", str(tools["threads"])]
    if weights:
        cmd += ["--weights", weights]
    run(cmd)
    return read_checkpoint(out)["logits"]


def memfit_gradients(tools, path, inputs, labels, batch, workdir):
    batch_file = os.path.join(workdir, "grads.batch.ckpt")
    out = os.path.join(workdir, "grads.out.ckpt")
    tensors = [(k, v.to(torch.float32)) for k, v in inputs.items()]
    tensors.append(("labels", labels.to(torch.float32)))
    write_checkpoint(batch_file, "onnx", tensors)
    run([tools["peer_grads"], "--onnx", path, "--batch", str(batch), "--inputs", batch_file,
         "--out", out, "--threads", str(tools["threads"])])
    return read_checkpoint(out)


def torch_gradients(model, inputs, labels, dtype):
    """The loss and every parameter's gradient in `dtype` (which `model` takes)."""
    model = model.to(dtype).train()
    x = next(iter(inputs.values()))
    logits = model(x.to(dtype) if x.is_floating_point() else x)
    loss = F.cross_entropy(logits, labels.reshape(-1))
    loss.backward()
    return loss.detach(), {n: p.grad.detach() for n, p in model.named_parameters()}


def plan_json(tools, flags, batch):
    out = run([tools["memfit"], "plan", *flags, "--batch", str(batch), "--json"])
    return json.loads(out)


def check_case(case, args, tools, workdir):
    """`case` is a model name, with "@N" for an opset other than 17."""
    name, _, opset = case.partition("@")
    opset = int(opset or 17)
    model, inputs, labels, zoo_flags = make_case(name, args.seq_len)
    batch = next(iter(inputs.values())).shape[0]
    path = os.path.join(workdir, f"{name}.onnx")
    export(model, inputs, path, training=False, opset=opset)
    row = {"model": f"{name}, opset {opset}", "torch_params": sum(p.numel() for p in model.parameters())}

    # Forward: the evaluation graph, batch norm on the running statistics.
    reference = ort_outputs(path, inputs)
    mine = memfit_forward(tools, path, inputs, batch, workdir).reshape(reference.shape)
    row["forward_error"] = relative_error(mine, reference)

    # Gradients of the mean cross-entropy in training mode (batch statistics),
    # against PyTorch in float32 as bench/peer compares, at bench/peer's
    # resnet size (64x64 images), whose float32 rounding stays under its tolerance.
    model, inputs_g, labels_g, _ = make_case(name, args.seq_len, image_size=64)
    path_g = os.path.join(workdir, f"{name}.train.onnx")
    export(model, inputs_g, path_g, training=True, opset=opset)
    grads = memfit_gradients(tools, path_g, inputs_g, labels_g, batch, workdir)
    memfit_params = {k[: -len(".grad")]: v for k, v in grads.items() if k.endswith(".grad")}
    row["memfit_params"] = sum(v.numel() for v in memfit_params.values())
    loss32, grads32 = torch_gradients(model, inputs_g, labels_g, torch.float32)
    model = make_case(name, args.seq_len, image_size=64)[0]  # the same weights afresh
    loss64, grads64 = torch_gradients(model, inputs_g, labels_g, torch.float64)
    mine = {"loss": grads["loss"].reshape(())}
    mine.update({n: memfit_params[n].reshape(g.shape) for n, g in grads32.items()
                 if n in memfit_params})  # ONNX names are PyTorch's
    grads32["loss"], grads64["loss"] = loss32, loss64
    errors, ratios = {}, {}
    for n, g in grads32.items():
        if n not in mine:  # a parameter memfit did not import
            errors[n] = ratios[n] = float("inf")
            continue
        errors[n] = relative_error(mine[n], g)
        # Where float32 itself is far from the exact gradient, memfit passes
        # when it is as close to float64 as PyTorch's float32 is (within 2x).
        rounding = relative_error(g, grads64[n])
        ratios[n] = relative_error(mine[n], grads64[n]) / max(rounding, 1e-300)
    worst = max(errors, key=errors.get)
    row["grad_error"], row["grad_worst"] = errors[worst], worst
    row["torch_rounding"] = max(relative_error(g, grads64[n]) for n, g in grads32.items())
    row["grad_ratio"] = max(ratios[n] for n in errors if errors[n] > GRAD_TOLERANCE) \
        if row["grad_error"] > GRAD_TOLERANCE else 0.0
    row["grad_ok"] = all(errors[n] <= GRAD_TOLERANCE or ratios[n] <= 2.0 for n in errors)

    # The plan of the imported model against the zoo's twin.
    imported = plan_json(tools, ["--onnx", path], args.plan_batch)
    zoo = plan_json(tools, zoo_flags, args.plan_batch)
    for key in ("arena_bytes", "lower_bound_bytes", "no_sharing_bytes"):
        row[f"onnx_{key}"], row[f"zoo_{key}"] = imported[key], zoo[key]

    # Train a few steps, save, and run the saved file in onnxruntime.
    trained = os.path.join(workdir, f"{name}.trained.onnx")
    checkpoint = os.path.join(workdir, f"{name}.ckpt")
    run([tools["memfit"], "train", "--onnx", path, "--synthetic", "--batch", str(batch),
         "--epochs", "1", "--limit", str(batch * args.train_steps), "--no-dropout",
         "--save", checkpoint, "--save-onnx", trained, "--threads", str(tools["threads"])])
    after = ort_outputs(trained, inputs)
    mine = memfit_forward(tools, path, inputs, batch, workdir, weights=checkpoint)
    row["trained_error"] = relative_error(mine.reshape(after.shape), after)
    row["trained_moved"] = relative_error(after, reference)
    row["ok"] = (row["forward_error"] <= FORWARD_TOLERANCE and row["grad_ok"]
                 and row["trained_error"] <= FORWARD_TOLERANCE and row["trained_moved"] > 0
                 and row["memfit_params"] == row["torch_params"])
    return row


def table(rows):
    lines = [
        "| model | parameters (PyTorch / memfit) | forward vs onnxruntime | loss and gradients vs "
        "PyTorch float32 (worst tensor) | PyTorch float32 vs float64 (worst) | over 1e-4: "
        "memfit vs float64 / PyTorch float32 vs float64 (worst) | trained, saved: onnxruntime "
        "vs memfit | pass |",
        "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['torch_params']:,} / {r['memfit_params']:,} | "
            f"{r['forward_error']:.1e} | {r['grad_error']:.1e} ({r['grad_worst']}) | "
            f"{r['torch_rounding']:.1e} | "
            f"{'-' if r['grad_ratio'] == 0 else format(r['grad_ratio'], '.2f')} | "
            f"{r['trained_error']:.1e} | "
            f"{'yes' if r['ok'] else 'NO'} |")
    lines += ["", "| model | plan: imported arena | zoo twin arena | imported lower bound | "
              "zoo twin lower bound | imported, no sharing | zoo twin, no sharing |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['onnx_arena_bytes']:,} | {r['zoo_arena_bytes']:,} | "
            f"{r['onnx_lower_bound_bytes']:,} | {r['zoo_lower_bound_bytes']:,} | "
            f"{r['onnx_no_sharing_bytes']:,} | {r['zoo_no_sharing_bytes']:,} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build", help="memfit's build directory")
    p.add_argument("--models", default="resnet18,resnet50,gpt2,gpt2@13",
                   help="resnet18, resnet50, gpt2; NAME@N exports at opset N (13 to 17)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=128, help="GPT-2's positions")
    p.add_argument("--plan-batch", type=int, default=8, help="the batch the plans compare at")
    p.add_argument("--train-steps", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    tools = {"memfit": os.path.join(args.build, "memfit"),
             "peer_grads": os.path.join(args.build, "bench", "peer_grads"),
             "threads": args.threads}
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, onnx "
          f"{onnx.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}")
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.models.split(","):
            start = time.time()
            rows.append(check_case(name, args, tools, workdir))
            print(f"{name}: {time.time() - start:.0f} s", flush=True)
    print(table(rows))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
