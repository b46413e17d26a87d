"""Stopping memfit.train: an on_step callback that raises (KeyboardInterrupt, or any
exception) at step k ends the run after that step, the same exception propagates,
no further callback runs, and with save= the checkpoint of step k is written; a run
resumed from it continues exactly where the interrupted one stopped (its losses and
trained parameters equal the tail of an uninterrupted run with the same settings).
A real SIGINT, sent by another thread while training runs without the GIL, raises
KeyboardInterrupt from memfit.train with the checkpoint of the step it stopped at."""

import os
import signal
import threading

import numpy as np
import pytest

import memfit

# 16 optimizer steps of one epoch; a step index k in 1..15 stops inside the epoch.
RUN = dict(model="lenet", synthetic=True, epochs=1, limit=256, batch=16, seed=3, log=None)
STEPS = 16


class Stop(Exception):
    pass


def stopping_at(step, exception, records):
    def on_step(record):
        records.append(record["step"])
        if record["step"] == step:
            raise exception
    return on_step


@pytest.fixture(scope="module")
def uninterrupted():
    return memfit.train(**RUN)


@pytest.mark.parametrize("exception", [KeyboardInterrupt(), Stop("from on_step")],
                         ids=["KeyboardInterrupt", "Exception"])
def test_on_step_raising_stops_and_resume_continues(exception, uninterrupted, tmp_path,
                                                    read_checkpoint):
    k = 5
    checkpoint = tmp_path / "run.ck"
    records = []
    with pytest.raises(type(exception)) as info:
        memfit.train(on_step=stopping_at(k, exception, records), save=checkpoint, **RUN)
    assert info.value is exception
    assert records == list(range(1, k + 1)), "no step runs after the callback raised"

    saved = read_checkpoint(checkpoint)
    assert (saved.epoch, saved.micro_step, saved.optimizer_step) == (0, k, k)
    assert saved.model == "lenet"

    resumed = memfit.train(resume=checkpoint, **RUN)
    assert uninterrupted["optimizer_steps"] == resumed["optimizer_steps"] == STEPS
    assert resumed["losses"] == uninterrupted["losses"][k:]
    assert resumed["test_accuracy"] == uninterrupted["test_accuracy"]
    assert not resumed["stopped"]
    for name, array in uninterrupted["parameters"].items():
        assert np.array_equal(resumed["parameters"][name], array), name


def test_raising_at_the_last_step_still_propagates(tmp_path):
    records = []
    with pytest.raises(KeyboardInterrupt):
        memfit.train(on_step=stopping_at(STEPS, KeyboardInterrupt(), records),
                     save=tmp_path / "ck", **RUN)
    assert records == list(range(1, STEPS + 1))


def test_a_log_callback_raising_stops_too():
    def log(line):
        if line.startswith("memory plan:"):
            raise Stop("from log")
    records = []
    with pytest.raises(Stop, match="from log"):
        memfit.train(**dict(RUN, log=log), on_step=records.append)
    assert records == [], "once a callback raised, no other runs"


def test_sigint_raises_keyboard_interrupt_with_a_checkpoint(tmp_path, read_checkpoint):
    """SIGINT arrives from another thread once training has started (its first step
    reported), in a run far too long to end first: memfit.train must notice it
    between steps (the GIL is released while a step runs) and raise KeyboardInterrupt."""
    checkpoint = tmp_path / "sigint.ck"
    started, finished = threading.Event(), threading.Event()
    records = []

    def on_step(record):
        records.append(record["step"])
        started.set()

    def interrupt():
        if started.wait(timeout=60) and not finished.is_set():
            os.kill(os.getpid(), signal.SIGINT)

    steps = 4096  # about 15 s of training on two cores: the signal comes long before the end
    # Python raises KeyboardInterrupt on SIGINT only where it found SIGINT not ignored at
    # startup: a background job of a non-interactive shell (`ctest &`) starts with it
    # ignored. Install the handler an interactive session has, for this test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    killer = threading.Thread(target=interrupt, daemon=True)
    killer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            memfit.train(model="lenet", synthetic=True, epochs=1, limit=16 * steps, batch=16,
                         seed=3, log=None, save=checkpoint, on_step=on_step)
    finally:
        finished.set()
        started.set()
        killer.join(timeout=60)
        signal.signal(signal.SIGINT, previous)
    assert not killer.is_alive()
    assert records and records[-1] < steps, "the run stopped early"
    saved = read_checkpoint(checkpoint)
    # The signal may interrupt the callback of the step it stopped at, before it
    # recorded the step: the checkpoint is of the last step recorded or the next.
    assert records[-1] <= saved.optimizer_step <= records[-1] + 1
    assert saved.micro_step == saved.optimizer_step and saved.epoch == 0
