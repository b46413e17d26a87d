"""memfit.train's on_step callback: one record per optimizer step, in order, with
its epoch, its step (1 to steps, consecutive across epochs), the run's total steps,
the step's loss (the mean of the report's losses of that step's micro-batches,
computed as memfit does: float32 losses summed in double) and a positive speed; with
accumulate=2 too. Also that the callback is called with the GIL held from the
calling thread, and that callbacks that return normally do not change the run."""

import threading

import numpy as np
import pytest

import memfit


def run_with_records(**settings):
    records = []
    result = memfit.train(on_step=records.append, log=None, **settings)
    return result, records


def step_means(losses, accumulate):
    """The mean of each optimizer step's micro-batch losses, as StepRecord::loss:
    the float32 losses (the JSON prints each so it reads back exactly) summed in
    double, over accumulate."""
    means = []
    for first in range(0, len(losses), accumulate):
        total = 0.0
        for loss in losses[first:first + accumulate]:
            total += float(np.float32(loss))
        means.append(total / accumulate)
    return means


@pytest.mark.parametrize("accumulate", [1, 2])
def test_records_follow_the_steps(accumulate):
    epochs, limit, batch = 2, 64, 8
    result, records = run_with_records(model="lenet", synthetic=True, epochs=epochs, limit=limit,
                                       batch=batch, accumulate=accumulate, seed=7)
    steps_per_epoch = limit // batch // accumulate
    steps = epochs * steps_per_epoch
    assert result["optimizer_steps"] == steps == len(records)
    assert len(result["losses"]) == steps * accumulate
    for i, record in enumerate(records):
        assert set(record) == {"epoch", "step", "steps", "loss", "examples_per_second"}
        assert record["step"] == i + 1
        assert record["steps"] == steps
        assert record["epoch"] == i // steps_per_epoch + 1
        assert isinstance(record["loss"], float) and record["examples_per_second"] > 0
    assert [r["loss"] for r in records] == step_means(result["losses"], accumulate)
    if accumulate == 2:  # a mean of two different losses: not just one of them
        assert records[0]["loss"] not in (float(np.float32(l)) for l in result["losses"][:2])


def test_callbacks_do_not_change_the_run():
    settings = dict(model="lenet", synthetic=True, epochs=1, limit=64, batch=16, seed=11)
    with_callbacks, records = run_with_records(**settings)
    without = memfit.train(log=None, **settings)
    assert records
    assert with_callbacks["losses"] == without["losses"]
    for name, array in without["parameters"].items():
        assert np.array_equal(with_callbacks["parameters"][name], array)


def test_callbacks_run_on_the_calling_thread():
    threads = set()
    memfit.train(model="lenet", synthetic=True, epochs=1, limit=32, batch=16, log=None,
                 on_step=lambda record: threads.add(threading.get_ident()))
    assert threads == {threading.get_ident()}
