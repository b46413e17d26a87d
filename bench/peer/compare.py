"""Side-by-side training steps of memfit and PyTorch on the same networks.

For each model of the list, eight programs are started and kept loaded
(compilation and warm-up paid once, outside the timing):
  torch plain        eager PyTorch
  torch ckpt sqrt    torch.utils.checkpoint, non-reentrant, sqrt(n) segments of blocks
  compile 0.5/0.1    torch.compile with activation_memory_budget 0.5 and 0.1
  memfit no-share    memfit, every value in a slice of its own (no planning)
  memfit planned     memfit's planned arena (the default)
  memfit sqrt        memfit with --recompute sqrt
  memfit optimal     memfit with --recompute optimal (rotor-style dynamic programming)
  memfit plain       memfit planned with --plain-layouts (every value row-major)
then the driver asks each in turn for a few steps, round after round, so that
a slower or busier moment of the machine falls on all of them alike. Each
program reports the wall-clock seconds of every step; the table gives the
median, and the memory each one measured (see torch_step.py and
peer_step.cpp): for PyTorch the allocator's peak over a step and the process's
peak resident memory, for memfit the planned arena and the process's peak
resident memory. Ratios are memfit / PyTorch plain.

  bench/peer/.venv/bin/python bench/peer/compare.py [--models lenet,resnet18:32] [--rounds 3]
      [--programs "torch plain,memfit planned"]

A model may carry its batch after a colon (resnet18:32); --programs keeps
the named programs only (the ratios are against the first one kept).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (memfit size flags, batch, steps per round, note). Sizes keep the
# whole run under ~20 minutes on two cores.
MODELS = {
    "lenet": ({}, 64, 4, "28x28"),
    "resnet18": ({"image-size": 224}, 8, 2, "224x224"),
    "resnet50": ({"image-size": 224}, 4, 1, "224x224, small batch: slow on 2 cores"),
    "lstm-lm": ({}, 20, 2, "2x650, 35 steps, vocab 10000 (Zaremba medium)"),
    "gpt": ({"depth": 4, "width": 256, "seq-len": 256, "vocab": 8192}, 8, 2,
            "4 layers, width 256, 256 positions, vocab 8192"),
}

PROGRAMS = [
    ("torch plain", "torch", ["--mode", "plain"]),
    ("torch ckpt sqrt", "torch", ["--mode", "checkpoint"]),
    ("compile 0.5", "torch", ["--mode", "compile", "--budget", "0.5"]),
    ("compile 0.1", "torch", ["--mode", "compile", "--budget", "0.1"]),
    ("memfit no-share", "memfit", ["--no-sharing"]),
    ("memfit planned", "memfit", []),
    ("memfit sqrt", "memfit", ["--recompute", "sqrt"]),
    ("memfit optimal", "memfit", ["--recompute", "optimal"]),
    ("memfit plain", "memfit", ["--plain-layouts"]),
]


class Worker:
    """One program, loaded, answering 'run K' and 'done'."""

    def __init__(self, label, cmd, env, log):
        self.label = label
        start = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, text=True, env=env)
        self.ready = self._read()
        self.setup_seconds = time.perf_counter() - start
        self.seconds = []

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.label} exited with status {self.proc.wait()}; "
                             "see the log of the run")
        return json.loads(line)

    def run(self, steps):
        self.proc.stdin.write(f"run {steps}\n")
        self.proc.stdin.flush()
        self.seconds += self._read()["seconds"]

    def done(self):
        self.proc.stdin.write("done\n")
        self.proc.stdin.flush()
        report = self._read()
        self.proc.wait()
        return report


def median(values):
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def mib(b):
    return f"{b / 2**20:.1f}"


def run_model(name, args, env, log, batch=None):
    sizes, default_batch, steps, note = MODELS[name]
    batch = batch or default_batch
    size_flags = []
    for k, v in sizes.items():
        size_flags += [f"--{k}", str(v)]
    common = ["--model", name, "--batch", str(batch), *size_flags, "--threads", str(args.threads)]
    workers = []
    for label, kind, flags in programs(args):
        if kind == "torch":
            cmd = [sys.executable, os.path.join(HERE, "torch_step.py"), *common, *flags]
        else:
            cmd = [args.peer_step, *common, *flags]
        print(f"  starting {label} ...", end="", flush=True)
        log.write(f"== {name}: {' '.join(cmd)}\n")
        log.flush()
        workers.append(Worker(label, cmd, env, log))
        print(f" ready in {workers[-1].setup_seconds:.1f} s", flush=True)
    for r in range(args.rounds):
        # Rotate the order each round, so that no program always runs first.
        order = workers[r % len(workers):] + workers[:r % len(workers)]
        for w in order:
            w.run(steps)
    rows = []
    for w in workers:
        report = w.done()
        rows.append({"program": w.label, "median_seconds": median(w.seconds),
                     "steps": len(w.seconds), "setup_seconds": w.setup_seconds, **report})
    return {"model": name, "batch": batch, "sizes": sizes, "note": note, "rows": rows}


def programs(args):
    if not args.programs:
        return PROGRAMS
    wanted = args.programs.split(",")
    known = [label for label, _, _ in PROGRAMS]
    for label in wanted:
        if label not in known:
            raise SystemExit(f"unknown program '{label}' (known: {', '.join(known)})")
    return [p for p in PROGRAMS if p[0] in wanted]


def print_table(result, out):
    rows = result["rows"]
    plain = rows[0]
    out.write(f"\n{result['model']} (batch {result['batch']}, {result['note']}): "
              f"{rows[0]['steps']} timed steps per program\n\n")
    out.write("| program | median step s | time / torch plain | allocator peak or arena MiB"
              " | / torch plain | peak RSS MiB | / torch plain | RSS at start MiB |\n")
    out.write("|---|---:|---:|---:|---:|---:|---:|---:|\n")
    for row in rows:
        memory = row.get("allocator_peak_bytes", row.get("arena_bytes"))
        plain_memory = plain["allocator_peak_bytes"]
        out.write(f"| {row['program']} | {row['median_seconds']:.3f} | "
                  f"{row['median_seconds'] / plain['median_seconds']:.2f} | {mib(memory)} | "
                  f"{memory / plain_memory:.2f} | {mib(row['peak_rss_bytes'])} | "
                  f"{row['peak_rss_bytes'] / plain['peak_rss_bytes']:.2f} | "
                  f"{mib(row['start_rss_bytes'])} |\n")


def versions(args, env):
    """torch's version, BLAS and oneDNN (from torch.__config__.show()); memfit's oneDNN."""
    code = ("import json, torch; print(json.dumps([torch.__version__, torch.__config__.show(), "
            "torch.get_num_threads()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout
    version, config, threads = json.loads(out.strip().splitlines()[-1])
    lines = [line.strip(" -") for line in config.splitlines()]
    blas = [line for line in lines if "Math Kernel Library" in line or "OpenBLAS" in line]
    blas += [item[item.index("BLAS_INFO"):] for line in lines for item in line.split(", ")
             if "BLAS_INFO=" in item]
    onednn = [line for line in lines if "MKL-DNN" in line or "oneDNN" in line]
    memfit = json.loads(subprocess.run([args.peer_step, "--version-info"], capture_output=True,
                                       text=True, check=True).stdout)
    return {"torch": version, "torch_threads": threads, "torch_blas": blas,
            "torch_onednn": onednn, "memfit_onednn": memfit["onednn"],
            "memfit_blas": "none: matmul and linear run oneDNN's own kernels",
            "memfit_cpu_runtime": memfit["cpu_runtime"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--peer-step", default="build/bench/peer_step")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--programs", default="",
                   help="comma-separated labels of the programs to run (default: all)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               OMP_WAIT_POLICY="passive", PYTHONPATH=HERE)
    info = versions(args, env)
    info["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}"
    info["threads"] = args.threads
    print(json.dumps(info, indent=1))
    results = []
    with open(os.path.join(args.out, "log.txt"), "w") as log:
        for spec in args.models.split(","):
            name, _, batch = spec.partition(":")
            if name not in MODELS:
                raise SystemExit(f"unknown model '{name}' (known: {', '.join(MODELS)})")
            if batch and not batch.isdigit():
                raise SystemExit(f"bad batch in '{spec}': use NAME:BATCH, e.g. resnet18:32")
            print(f"{spec}:", flush=True)
            results.append(run_model(name, args, env, log, int(batch) if batch else None))
            print_table(results[-1], sys.stdout)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"info": info, "results": results}, f, indent=1)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        for r in results:
            print_table(r, f)
    print(f"\nwritten: {args.out}/table.md, results.json, log.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
