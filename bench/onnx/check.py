"""memfit's ONNX import checked against PyTorch and onnxruntime (docs/onnx.md).

For torchvision's resnet18 and resnet50 and a 2-layer GPT-2 (bench/peer's
twin of memfit's gpt, naive attention), exported by torch.onnx at opset 17:
  params   the trainable parameters PyTorch counts and memfit imports;
  forward  memfit's evaluation output (build/bench/peer_grads --forward)
           against onnxruntime's on the same file and batch, as the relative
           error ||a - b|| / ||b||;
  grads    memfit's loss and parameter gradients (peer_grads, float32)
           against PyTorch's in float64, the largest relative error over the
           tensors (bench/peer's tolerance, 1e-4);
  plan     memfit plan of the imported model against the zoo's twin;
  trained  memfit train --synthetic for a few steps, --save-onnx, then
           onnxruntime on the saved file against memfit's forward from its
           checkpoint of the same run.
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


def make_case(name, seq_len):
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
        x = torch.randn(batch, 3, 224, 224, generator=g)
        labels = torch.randint(0, 1000, (batch,), generator=g)
        return model, {"images": x}, labels, ["--model", name]
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


def export(model, inputs, path):
    """torch.onnx (TorchScript exporter) at opset 17 in training mode, batch
    dynamic, without constant folding (which would store the transpose of a
    tied weight as an initializer of its own, a separate parameter)."""
    name = next(iter(inputs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.train(), tuple(inputs.values()), path, opset_version=17,
                          dynamo=False, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False,
                          input_names=[name], output_names=["logits"],
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


def torch_gradients(model, inputs, labels):
    model = model.double().train()
    model.zero_grad(set_to_none=True)
    x = next(iter(inputs.values()))
    logits = model(x.double() if x.is_floating_point() else x)
    loss = F.cross_entropy(logits, labels.reshape(-1))
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    model.float()
    return loss.detach(), grads


def plan_json(tools, flags, batch):
    out = run([tools["memfit"], "plan", *flags, "--batch", str(batch), "--json"])
    return json.loads(out)


def check_case(name, args, tools, workdir):
    model, inputs, labels, zoo_flags = make_case(name, args.seq_len)
    batch = next(iter(inputs.values())).shape[0]
    path = os.path.join(workdir, f"{name}.onnx")
    export(model, inputs, path)
    row = {"model": name, "file_mb": os.path.getsize(path) / 1e6}
    row["torch_params"] = sum(p.numel() for p in model.parameters())

    # Forward: the evaluation graph, batch norm on the running statistics.
    model.eval()
    with torch.no_grad():
        reference = ort_outputs(path, inputs)
    mine = memfit_forward(tools, path, inputs, batch, workdir).reshape(reference.shape)
    row["forward_error"] = relative_error(mine, reference)

    # Gradients of the mean cross-entropy, training mode (batch statistics).
    grads = memfit_gradients(tools, path, inputs, labels, batch, workdir)
    memfit_params = {k[: -len(".grad")]: v for k, v in grads.items() if k.endswith(".grad")}
    row["memfit_params"] = sum(v.numel() for v in memfit_params.values())
    loss, reference_grads = torch_gradients(model, inputs, labels)
    errors = {"loss": relative_error(grads["loss"].reshape(()), loss)}
    for n, g in reference_grads.items():
        if n not in memfit_params:  # ONNX names are PyTorch's
            errors[n] = float("inf")
            continue
        errors[n] = relative_error(memfit_params[n].reshape(g.shape), g)
    worst = max(errors, key=errors.get)
    row["grad_error"], row["grad_worst"] = errors[worst], worst

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
    row["ok"] = (row["forward_error"] <= FORWARD_TOLERANCE and row["grad_error"] <= GRAD_TOLERANCE
                 and row["trained_error"] <= FORWARD_TOLERANCE and row["trained_moved"] > 0
                 and row["memfit_params"] == row["torch_params"])
    return row


def table(rows):
    lines = [
        "| model | parameters (PyTorch / memfit) | forward vs onnxruntime | loss and gradients vs "
        "PyTorch (worst tensor) | trained, saved, onnxruntime vs memfit | pass |",
        "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['torch_params']:,} / {r['memfit_params']:,} | "
            f"{r['forward_error']:.1e} | {r['grad_error']:.1e} ({r['grad_worst']}) | "
            f"{r['trained_error']:.1e} | {'yes' if r['ok'] else 'NO'} |")
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
    p.add_argument("--models", default="resnet18,resnet50,gpt2")
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
