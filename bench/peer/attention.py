"""Fused attention beside PyTorch's: memfit's gpt with --attention fused and
naive, and its PyTorch twin with torch.nn.functional.scaled_dot_product_attention
and with the composed form, side by side in one run (bench/peer/compare.py's
protocol: every program stays loaded, rounds rotate their order).

GPT-2 small's layers (width 768, 12 heads, vocabulary 50257) at batch 1:
1024 positions with 12 layers, and 4096 positions with 2 layers (the four
programs must fit this machine's memory at once). With the models' dropout
(0.1) and without it (--no-dropout: PyTorch's CPU flash kernel, unlike its
math kernel, may not take dropout). PyTorch flushes denormal floats to
zero (--flush-denormal): without it the GPT's tiny gradients made MKL's
sgemm, and so its steps, up to 6 times slower from the second step on;
memfit's kernels run at full speed without it. Prints, per program, the
median step time, and the memory: memfit's planned arena, PyTorch's
allocator peak over a step (torch_step.py says how it is measured).

  bench/peer/.venv/bin/python bench/peer/attention.py [--rounds 2] [--steps 2]
"""

import argparse
import os
import sys

from compare import HERE, Worker, median, mib

PROGRAMS = [
    ("memfit fused", "memfit", []),
    ("memfit naive", "memfit", ["--attention", "naive"]),
    ("torch sdpa", "torch", ["--mode", "plain", "--attention", "sdpa", "--flush-denormal"]),
    ("torch naive", "torch", ["--mode", "plain", "--attention", "naive", "--flush-denormal"]),
]
CONFIGS = [(1024, 12), (4096, 2)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--peer-step", default=os.path.join(HERE, "..", "..", "build", "bench", "peer_step"))
    args = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               OMP_WAIT_POLICY="passive", PYTHONPATH=HERE)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    log = open(os.path.join(HERE, "results", "attention_log.txt"), "w")
    print(f"{'positions':>9} {'layers':>6} {'dropout':>7} {'program':<13} {'step s':>8} "
          f"{'memory MiB':>11}  (memfit: planned arena; torch: allocator peak)")
    for t, depth in CONFIGS:
        for no_dropout in (False, True):
            common = ["--model", "gpt", "--batch", "1", "--seq-len", str(t), "--depth", str(depth),
                      "--threads", str(args.threads), "--warmup", "1"]
            if no_dropout:
                common.append("--no-dropout")
            workers = []
            for label, kind, flags in PROGRAMS:
                cmd = ([args.peer_step] if kind == "memfit"
                       else [sys.executable, os.path.join(HERE, "torch_step.py")]) + common + flags
                log.write(f"== {' '.join(cmd)}\n")
                log.flush()
                workers.append(Worker(label, cmd, env, log))
            for r in range(args.rounds):
                for w in workers[r % len(workers):] + workers[:r % len(workers)]:
                    w.run(args.steps)
            for w in workers:
                report = w.done()
                memory = report.get("arena_bytes", report.get("allocator_peak_bytes", 0))
                print(f"{t:>9} {depth:>6} {'0' if no_dropout else '0.1':>7} {w.label:<13} "
                      f"{median(w.seconds):>8.3f} {mib(memory):>11}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
