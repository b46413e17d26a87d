"""plan, max_batch, train and models: the command line's commands."""

import json
import sys

from . import _memfit
from ._settings import to_args


def plan(**settings):
    """Plans one training step without running it, as ``memfit plan --json``.

    Takes the command line's step settings as keywords (``model``, ``batch``,
    ``accumulate``, ``optimizer``, ``policy``, ``recompute``, ``swap``,
    ``budget`` as bytes or a string with a unit, ...; see
    ``memfit plan --help``) and ``timeline`` (an SVG file to write). Returns
    the JSON report as a dict: ``arena_bytes``, ``lower_bound_bytes``,
    ``host_bytes``, ``by_role``, ``predicted_step_seconds``, ... A budget
    the step cannot fit raises :class:`memfit.Error` naming the smallest
    budget that can.
    """
    return json.loads(_memfit.plan(to_args("plan", settings)))


def max_batch(**settings):
    """The largest batch whose step fits ``budget`` (required), as
    ``memfit maxbatch --json``; ``vary="seq-len"`` searches the sequence
    length instead. Returns the JSON report as a dict (``max_batch`` or
    ``max_seq_len``, ``arena_bytes``, ...)."""
    return json.loads(_memfit.max_batch(to_args("maxbatch", settings)))


def _print_line(line):
    print(line, file=sys.stderr, flush=True)


def train(on_step=None, log=_print_line, **settings):
    """Trains as ``memfit train`` does, in this process.

    Settings are the command line's (``model``, ``batch``, ``epochs``,
    ``synthetic=True``, ``limit``, ``seed``, ``save`` a checkpoint, ...).
    ``on_step(record)`` is called after every optimizer step with a dict:
    ``epoch``, ``step``, ``steps`` (of the whole run), ``loss`` (the step's
    mean) and ``examples_per_second``; ``log(line)`` gets the progress lines
    ``memfit train`` prints (default: to stderr; ``None`` for none).

    Ctrl-C (KeyboardInterrupt) or an exception raised by ``on_step`` stops
    the run after its current step, writes the checkpoint of that position
    when ``save`` is set (``resume`` continues from it), and is raised again.

    Returns the report of ``memfit train --json`` as a dict (``losses``,
    ``test_accuracy``, ``examples_per_second``, ``arena_bytes``,
    ``high_water_bytes``, ``optimizer_steps``, ``stopped``), with
    ``parameters`` and ``state`` added: the trained parameters and the
    model state (batch norm's running statistics) by name, as numpy arrays
    that are views of memfit's memory (no copies).
    """
    text, trained = _memfit.train(to_args("train", settings), on_step, log)
    report = json.loads(text)
    report["parameters"], report["state"] = {}, {}
    for name, array, is_parameter in _memfit.trained_arrays(trained):
        report["parameters" if is_parameter else "state"][name] = array
    return report


def models():
    """The zoo, as ``memfit models`` lists it: a list of dicts (name,
    parameters, data, input, classes, description)."""
    return _memfit.models()
