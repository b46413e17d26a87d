"""The PyTorch side of the side-by-side comparison (bench/peer/): training
steps (forward, backward, SGD with momentum 0.9) of a twin of a memfit model,
run on request by bench/peer/compare.py. It speaks the protocol of
bench/peer/peer_step.cpp:
  prints  {"ready": true, ...}   once built, compiled and warmed up
  reads   "run K"   runs K steps, prints {"seconds": [...]}
  reads   "done"    prints the memory it measured and exits

Modes:
  plain       eager PyTorch
  checkpoint  torch.utils.checkpoint (non-reentrant) over sqrt(n) segments of
              the model's n blocks, the last segment kept (checkpoint_sequential)
  compile     torch.compile (Inductor) with
              torch._functorch.config.activation_memory_budget = --budget

Memory, measured after the timed steps:
  allocator_peak_bytes  the bytes of live tensors at the start of a step
      (parameters, buffers, momentum, the batch; gradients are None) plus the
      highest running sum of the allocations and frees that the profiler
      (profile_memory=True) records during one more step: the peak of
      PyTorch's CPU allocator over a step
  peak_rss_bytes        getrusage's ru_maxrss before that profiled step: the
      process's peak resident memory (libraries, compiler, everything)
  start_rss_bytes       the resident memory once torch is imported, before the
      model exists: what the process holds before it trains anything
"""

import argparse
import json
import math
import resource
import sys
import time

import torch
import torch.nn.functional as F

import models

BATCHES = 4  # distinct random batches, used in turn


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, required=True)
    for size in ("image-size", "classes", "depth", "width", "seq-len", "vocab"):
        p.add_argument("--" + size, type=int, default=0)
    p.add_argument("--mode", choices=["plain", "checkpoint", "compile"], default="plain")
    p.add_argument("--budget", type=float, default=1.0,
                   help="compile: torch._functorch.config.activation_memory_budget")
    p.add_argument("--attention", choices=["naive", "sdpa"], default="naive",
                   help="gpt: attention composed of matmul and softmax, or "
                        "torch.nn.functional.scaled_dot_product_attention")
    p.add_argument("--no-dropout", action="store_true", help="dropout probability 0")
    p.add_argument("--flush-denormal", action="store_true",
                   help="torch.set_flush_denormal(True): denormal floats become zero (a GPT's "
                        "tiny gradients otherwise slow MKL's sgemm several times over)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.01)
    return p.parse_args()


def sizes_of(args):
    """The model's sizes as memfit names them, the 0s left out."""
    names = {"image_size": args.image_size, "classes": args.classes, "depth": args.depth,
             "width": args.width, "seq_len": args.seq_len, "vocab": args.vocab}
    return {k: v for k, v in names.items() if v}


def make_batches(args, model):
    """Random batches shaped as memfit's model reads them: (input, labels)."""
    g = torch.Generator().manual_seed(5)
    out = []
    for _ in range(BATCHES):
        if args.model in ("lstm-lm", "gpt"):
            vocab = model.decoder.out_features if args.model == "lstm-lm" else model.wte.num_embeddings
            t = args.seq_len
            tokens = torch.randint(0, vocab, (args.batch, t), generator=g)
            labels = torch.randint(0, vocab, (args.batch, t), generator=g)
            out.append((tokens, labels))
        else:
            channels = 1 if args.model == "lenet" else 3
            s = args.image_size
            classes = model.fc2.out_features if args.model == "lenet" else model.fc.out_features
            images = torch.randn(args.batch, channels, s, s, generator=g)
            out.append((images, torch.randint(0, classes, (args.batch,), generator=g)))
    return out


def loss_function(args, model):
    whole = models.Whole(model)
    if args.mode == "plain":
        return whole
    if args.mode == "checkpoint":
        blocks = model.blocks
        segments = max(1, round(math.sqrt(len(blocks))))

        def run(x, labels):
            logits = torch.utils.checkpoint.checkpoint_sequential(
                blocks, segments, x, use_reentrant=False)
            return F.cross_entropy(logits, labels.reshape(-1))
        return run
    torch._functorch.config.activation_memory_budget = args.budget
    return torch.compile(whole)


def live_bytes(tensors):
    """Bytes of the distinct storages among `tensors`."""
    seen = {}
    for t in tensors:
        if t is not None:
            s = t.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def allocator_peak(step, model, optimizer, batch):
    persistent = list(model.parameters()) + list(model.buffers()) + list(batch)
    for state in optimizer.state.values():
        persistent += [v for v in state.values() if torch.is_tensor(v)]
    optimizer.zero_grad(set_to_none=True)
    base = live_bytes(persistent)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True) as prof:
        step(batch)
    # Every allocation (nbytes > 0) and free (< 0) of the CPU allocator, in
    # time order; prof.events() would fold most of them into their ops.
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    running = peak = 0
    for e in events:
        running += e.nbytes()
        peak = max(peak, running)
    return base + peak


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def main():
    start_rss = resident_bytes()
    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.flush_denormal:
        torch.set_flush_denormal(True)
    torch.manual_seed(1)
    if args.model == "lenet":
        args.image_size = args.image_size or 28
    elif args.model.startswith("resnet"):
        args.image_size = args.image_size or 224
    elif args.model == "lstm-lm":
        args.seq_len = args.seq_len or 35
    elif args.model == "gpt":
        args.seq_len = args.seq_len or 1024
    extra = {"attention": args.attention} if args.model == "gpt" else {}
    if args.no_dropout:
        extra["p"] = 0.0
    model = models.build(args.model, **sizes_of(args), **extra)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = loss_function(args, model)
    batches = make_batches(args, model)
    steps = 0
    last_loss = 0.0

    def step(batch):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(*batch)
        loss.backward()
        optimizer.step()
        return loss

    def timed_step():
        nonlocal steps, last_loss
        start = time.perf_counter()
        loss = step(batches[steps % BATCHES])
        seconds = time.perf_counter() - start
        last_loss = loss.item()
        steps += 1
        return seconds

    start = time.perf_counter()
    for _ in range(args.warmup):
        timed_step()
    print(json.dumps({"ready": True, "warmup_seconds": time.perf_counter() - start,
                      "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        line = line.strip()
        if line.startswith("run "):
            seconds = [timed_step() for _ in range(int(line[4:]))]
            print(json.dumps({"seconds": seconds}), flush=True)
        elif line == "done":
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            peak = allocator_peak(step, model, optimizer, batches[steps % BATCHES])
            print(json.dumps({"allocator_peak_bytes": peak, "peak_rss_bytes": rss,
                              "start_rss_bytes": start_rss, "last_loss": last_loss}),
                  flush=True)
            return 0
        else:
            print(f"torch_step: unknown request '{line}' (expected 'run K' or 'done')",
                  file=sys.stderr)
            return 1
    print("torch_step: the driver closed the input before 'done'", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
