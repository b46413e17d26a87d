"""One call's settings must not change the next call's: a Python process that plans
or trains several times must get, for each call, what a fresh `memfit` process gets
with the same flags. Checked for flags that change the plan (no_sharing, recompute,
policy) and for threads=, which sets OpenMP's process-wide thread count
(make_cpu_backend): a later call without threads= must get the default back. That
case runs in a child process, so that a leak could not spread to the other tests."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import memfit


def test_technique_flags_do_not_leak(cli):
    args = ["--model", "lenet", "--batch", "8"]
    fresh = cli("plan", *args, "--json").json()
    memfit.plan(model="lenet", batch=8, no_sharing=True)
    memfit.plan(model="lenet", batch=8, recompute="sqrt")
    memfit.plan(model="lenet", batch=8, policy="auto", budget="64MiB")
    assert memfit.plan(model="lenet", batch=8) == fresh


def in_child(code):
    """Runs ``code`` in a fresh interpreter with this one's environment and
    returns what it prints, as JSON."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_threads_do_not_leak(cli):
    fresh = cli("plan", "--model", "lenet", "--batch", "16", "--json").json()
    before, after = in_child("""
        import json, memfit
        before = memfit.plan(model="lenet", batch=16)
        memfit.plan(model="lenet", batch=16, threads=1 if before["threads"] > 1 else 2)
        after = memfit.plan(model="lenet", batch=16)
        print(json.dumps([before, after]))
    """)
    assert before == fresh
    assert after["threads"] == fresh["threads"]
    assert after == fresh
