"""memfit.Trainer: a model trained step by step on the caller's own batches."""

import collections.abc
import json
import numbers
import sys
import time

import numpy as np

from . import _memfit
from ._memfit import UsageError
from ._settings import to_args

# Settings of memfit.train that describe its data set, its loop or its files:
# a Trainer has the caller's batches and methods for the rest.
_RUN_SETTINGS = {
    "epochs": "give fit(data, epochs=N)",
    "stop_after": "stop iterating (fit stops on KeyboardInterrupt)",
    "synthetic": "feed your own batches",
    "limit": "feed your own batches",
    "data": "feed your own batches",
    "save": "call trainer.save(path)",
    "resume": "call trainer.load(path)",
    "save_onnx": "use memfit.train or load_into(module, trainer)",
    "log_every": "use fit's on_step",
    "profile": "use memfit.train(profile=True)",
    "trace": "use memfit.train(trace=...)",
    "check_replicas": "use the command line under mpirun",
    "json": "read trainer.plan",
}


def _print_line(line):
    print(line, file=sys.stderr, flush=True)


def _as_array(value):
    """A C-contiguous numpy array of `value`: a numpy array as it is (when
    contiguous), a tensor of another library through DLPack or
    ``__array__`` (a CPU tensor's memory, not a copy), a list of numbers."""
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
        try:
            value = np.from_dlpack(value)
        except (BufferError, RuntimeError, TypeError):
            pass  # np.asarray below says what is wrong, or converts
    return np.ascontiguousarray(np.asarray(value))


class Trainer:
    """Trains a model one micro-batch at a time on batches the caller
    gives: numpy arrays, CPU tensors (PyTorch's, through DLPack or
    ``__array__``) or anything numpy reads.

    ``model`` is a zoo name or a :class:`memfit.Model`
    (:func:`memfit.from_torch`); ``batch`` and the other settings are
    :func:`memfit.train`'s (``accumulate``, ``optimizer``, ``lr``,
    ``momentum``, ``weight_decay``, ``policy``, ``budget``, ``recompute``,
    ``swap``, ``threads``, ``seed``, ...), checked by the command line's
    parser; those of its data set and loop (``epochs``, ``synthetic``,
    ``save``, ``resume``, ...) are refused with what to use instead. The step is compiled once, for ``batch`` rows; a batch of
    another size (the last of an epoch) compiles a step of its own under the
    same settings and budget, kept for the next one of that size.

    ``trainer.plan`` is ``memfit plan --json``'s report of the step (a
    dict: ``arena_bytes``, ``recompute``, ``swap``, ``policy``, ``batch``,
    ...); ``input_names`` the model's data inputs in order, labels last;
    ``input_shapes`` their shapes at ``batch``; ``trainer.steps`` counts
    optimizer steps.

    The learning rate follows ``schedule`` as ``memfit train --schedule``
    does: ``warmup_steps`` optimizer steps rising linearly to ``lr``, then
    ``"constant"`` (the Trainer's default, unlike the command line's
    cosine), or ``"cosine"`` or ``"linear"`` decay to ``min_lr`` at step
    ``total_steps``, the schedule's length in optimizer steps. A decaying
    schedule needs ``total_steps``: given here, set as
    ``trainer.total_steps``, or set by the first :meth:`fit` over data with
    a length (see there); a step without it raises
    :class:`memfit.UsageError`. ``min_lr`` above ``lr`` and a negative
    ``warmup_steps`` raise :class:`memfit.UsageError` with the command
    line's message. The factor of each step is the engine's own (the
    command line's ``lr_scale``), applied to ``trainer.lr``.
    """

    def __init__(self, model, batch=None, total_steps=None, **settings):
        for key, instead in _RUN_SETTINGS.items():
            if settings.get(key) not in (None, False):
                raise UsageError(f"memfit.Trainer: {key}= is memfit.train's; {instead}")
        self._model = model  # keeps a from_torch model's file until the trainer goes
        if settings.get("schedule") is None:
            settings["schedule"] = "constant"
        args = to_args("train", {"model": model, "batch": batch, **settings})
        self._native = _memfit.Trainer(args)
        self.plan = json.loads(self._native.plan_json())
        inputs = self._native.inputs()
        self.input_names = [name for name, _, _, _ in inputs]
        self.input_shapes = {name: (self._native.batch, *example)
                             for name, _, example, _ in inputs}
        self.input_dtypes = {name: dtype for name, dtype, _, _ in inputs}
        self._labels = next((name for name, _, _, is_labels in inputs if is_labels), None)
        self._data_names = [name for name in self.input_names if name != self._labels]
        # The base learning rate as the settings wrote it (0.05, not float32's
        # 0.0500000007): the step's scale is lr over it.
        self._base_lr = float(np.format_float_positional(np.float32(self._native.base_lr)))
        self._lr = self._base_lr  # the rate the schedule scales: trainer.lr sets it
        self.schedule = self._native.schedule  # "constant", "cosine" or "linear"
        self.total_steps = total_steps
        # Where a run stands, for checkpoints (fit keeps them).
        self.epoch = 0
        self._examples_per_epoch = 0
        self._epochs = 0

    @property
    def batch(self):
        """The rows of the step compiled first."""
        return self._native.batch

    @property
    def accumulate(self):
        return self._native.accumulate

    @property
    def lr(self):
        """The learning rate of the next optimizer step, the schedule
        applied: the base rate (the settings' ``lr``, or the optimizer's
        default, until set) times the schedule's factor at ``steps``.
        Before ``total_steps`` is known a decaying schedule has not begun
        to decay: the rate is the warmup's, then the base rate.

        Setting it replaces the base rate: the schedule goes on scaling the
        new one from the current step (reading it back gives the new rate
        times the factor), and its floor is the same fraction of it
        (``min_lr`` over the settings' ``lr``)."""
        return self._lr * self._native.lr_scale(self.steps, self._total_steps)

    @lr.setter
    def lr(self, value):
        value = float(value)
        if not value >= 0:
            raise UsageError(f"memfit.Trainer: lr must be a number at least 0, not {value!r}")
        self._lr = value

    @property
    def total_steps(self):
        """The schedule's length in optimizer steps (None: not known yet);
        decay ends at ``min_lr`` there, and stays there after it."""
        return self._total_steps

    @total_steps.setter
    def total_steps(self, value):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise UsageError(f"memfit.Trainer: total_steps must be a whole number at "
                                 f"least 1, not {value!r}")
            value = int(value)
        self._total_steps = value

    def _check_total_steps(self):
        if self.schedule != "constant" and self._total_steps is None:
            raise UsageError(f"memfit.Trainer: schedule={self.schedule!r} decays over "
                             "total_steps; give total_steps=N (optimizer steps), or fit data "
                             "that has a length")

    @property
    def steps(self):
        """Optimizer steps done (those of a loaded checkpoint included)."""
        return self._native.counters[1]

    @property
    def micro_steps(self):
        """Micro-batches run (``step`` calls; those of a loaded checkpoint included)."""
        return self._native.counters[0]

    def _arrays(self, inputs, labels, what, labels_optional=False):
        """The dict of arrays by input name of `inputs` and `labels`."""
        if isinstance(inputs, collections.abc.Mapping):
            if labels is not None:
                raise UsageError(f"memfit.Trainer.{what}: labels are given in the dict "
                                 f"({self._labels!r}), not apart")
            given = dict(inputs)
        else:
            data = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
            if len(data) != len(self._data_names):
                raise UsageError(f"memfit.Trainer.{what}: {len(data)} inputs given; the model "
                                 f"takes {len(self._data_names)} ({', '.join(self._data_names)}) "
                                 "and the labels")
            given = dict(zip(self._data_names, data))
            if labels is not None:
                given[self._labels] = labels
            elif not labels_optional and self._labels is not None:
                raise UsageError(f"memfit.Trainer.{what}: input {self._labels!r} (the labels) "
                                 "is missing")
        arrays = {}
        for name, value in given.items():
            if not isinstance(name, str):
                raise UsageError(f"memfit.Trainer.{what}: input names are strings, not {name!r}")
            try:
                arrays[name] = _as_array(value)
            except (TypeError, ValueError, RuntimeError) as e:
                raise UsageError(f"memfit.Trainer.{what}: input {name!r} is not an array: {e}") from e
        return arrays

    def step(self, inputs, labels=None):
        """Runs one micro-batch and returns its loss (the mean over its rows)
        as a float; with ``accumulate=K`` every K-th call also updates the
        parameters. ``inputs`` is the model's data input (an array), a tuple
        of them in ``input_names`` order, or a dict of every input by name,
        labels included (then without ``labels``). Float inputs are float32
        (float64 is converted), ids and labels any integer type (checked
        against the model's classes and vocabulary, converted to int32).
        A wrong name, shape, type or value raises :class:`memfit.UsageError`
        naming the input, and nothing changes. The GIL is released while the
        step runs; Ctrl-C raises KeyboardInterrupt once it is done."""
        arrays = self._arrays(inputs, labels, "step")
        self._check_total_steps()
        scale = self._lr / self._base_lr if self._base_lr > 0 else 1.0
        scale *= self._native.lr_scale(self.steps, self._total_steps)
        return self._native.step(arrays, scale)

    def evaluate(self, inputs, labels=None):
        """The model's loss on a batch with the current state (batch norm on
        its running statistics, no dropout), as a dict: ``loss`` and, for a
        classifier, ``accuracy`` (the fraction of labels whose class has the
        largest logit). Inputs as ``step`` takes them."""
        return self._native.evaluate(self._arrays(inputs, labels, "evaluate"))

    def predict(self, inputs):
        """The model's output (the logits) for a batch, as a float32 numpy
        array of shape (rows, ...): (rows, classes) for a classifier of
        whole examples, (rows, positions, classes) for sequences. Labels,
        if given in a dict, are checked and not read."""
        arrays = self._arrays(inputs, None, "predict", labels_optional=True)
        out = self._native.predict(arrays)
        rows = next(iter(arrays.values())).shape[0]
        if out.shape[0] != rows:
            out = out.reshape(rows, out.shape[0] // rows, *out.shape[1:])
        return out

    def _trained(self):
        result = {"parameters": {}, "state": {}}
        for name, array, is_parameter in self._native.trained():
            result["parameters" if is_parameter else "state"][name] = array
        return result

    def parameters(self):
        """The trained parameters by name: float32 numpy arrays, copies
        of the state as the last step left it."""
        return self._trained()["parameters"]

    def state_dict(self):
        """The parameters and the model state (batch norm's running
        statistics) by name, as copies: what ``module.state_dict()``
        holds for a model from :func:`memfit.from_torch`."""
        trained = self._trained()
        return {**trained["parameters"], **trained["state"]}

    def save(self, path, epoch=None, epochs=None, examples_per_epoch=None):
        """Writes a checkpoint in ``memfit train``'s format: the parameters,
        optimizer and model state, the step counters, and the run it is
        from: ``epoch`` whole epochs done, of ``epochs``, of
        ``examples_per_epoch`` examples (by default what ``fit`` counted).
        The checkpoint records the schedule's kind, as ``memfit train
        --save`` does: ``memfit train --resume path`` continues it with the
        same settings, ``--epochs``, ``--schedule`` (``constant`` unless the
        trainer was given another), ``--warmup-steps``, ``--min-lr`` and
        that many training examples (``--limit``); the command line's
        schedule spans ``epochs`` times the epoch's optimizer steps, the
        trainer's ``total_steps``."""
        epoch = self.epoch if epoch is None else int(epoch)
        epochs = self._epochs if epochs is None else int(epochs)
        examples = self._examples_per_epoch if examples_per_epoch is None else int(examples_per_epoch)
        self._native.save(str(path), epoch, examples, epochs)

    def load(self, path):
        """Loads a checkpoint of this model and ``accumulate`` (one that
        ``save`` or ``memfit train --save`` wrote): the state, the step
        counters and the run's position."""
        self.epoch, self._examples_per_epoch, self._epochs = self._native.load(str(path))

    def _split(self, item):
        """(inputs, labels) of one item of a data set: a dict, or a tuple or
        list of the data inputs and the labels last."""
        if isinstance(item, collections.abc.Mapping):
            return item, None
        if isinstance(item, (tuple, list)) and len(item) == len(self._data_names) + 1:
            data = item[:-1]
            return (data[0] if len(data) == 1 else tuple(data)), item[-1]
        raise UsageError(f"memfit.Trainer.fit: a batch is a dict of the inputs by name or a "
                         f"tuple ({', '.join(self._data_names)}, {self._labels}), not "
                         f"{type(item).__name__}")

    @staticmethod
    def _rows(inputs):
        first = next(iter(inputs.values())) if isinstance(inputs, collections.abc.Mapping) else (
            inputs[0] if isinstance(inputs, tuple) else inputs)
        return int(np.shape(first)[0])

    def fit(self, data, epochs=1, validation=None, on_step=None, log=_print_line):
        """Trains ``epochs`` epochs over ``data``, an iterable of batches
        read again each epoch (a torch DataLoader as it is): each item a
        dict of inputs by name or a tuple (inputs..., labels).

        ``on_step(record)`` is called after every optimizer step with a dict
        as :func:`memfit.train` gives: ``epoch`` (from 1), ``step`` (optimizer
        steps done), ``steps`` (of the fit: None when ``data`` has no
        length), ``loss`` (the mean of its micro-batches) and
        ``examples_per_second``. After each epoch ``validation`` (an
        iterable of batches) is evaluated and ``log`` gets "epoch N done:
        validation loss X, accuracy Y%" (default: stderr; None: nothing).
        Returns ``{"losses": [...], "validation": [...]}``: every
        micro-batch's loss, and each epoch's evaluation (dicts of
        ``loss`` and ``accuracy``).

        When ``total_steps`` is None and ``data`` has a length, fit sets it
        to the optimizer steps done plus this fit's, ``len(data) * epochs
        // accumulate``, as ``memfit train`` spans its schedule over the
        run; it stays set for later fits (which train at the floor once it
        is passed) unless set again. A decaying schedule over data without
        a length needs ``total_steps`` given."""
        epochs = int(epochs)
        if epochs < 1:
            raise UsageError(f"memfit.Trainer.fit: epochs must be at least 1, not {epochs}")
        try:
            steps = len(data) * epochs // self.accumulate
        except TypeError:
            steps = None
        if self._total_steps is None and steps is not None:
            self.total_steps = self.steps + max(steps, 1)
        self._check_total_steps()
        self._epochs = self.epoch + epochs
        history = {"losses": [], "validation": []}
        pending, pending_examples, started = [], 0, time.perf_counter()
        for _ in range(epochs):
            examples = 0
            for item in data:
                inputs, labels = self._split(item)
                rows = self._rows(inputs)
                loss = self.step(inputs, labels)
                history["losses"].append(loss)
                examples += rows
                pending.append(loss)
                pending_examples += rows
                if self.micro_steps % self.accumulate != 0:
                    continue
                now = time.perf_counter()
                if on_step is not None:
                    on_step({"epoch": self.epoch + 1, "step": self.steps, "steps": steps,
                             "loss": sum(pending) / len(pending),
                             "examples_per_second": pending_examples / max(now - started, 1e-9)})
                pending, pending_examples, started = [], 0, time.perf_counter()
            self.epoch += 1
            self._examples_per_epoch = examples
            line = f"epoch {self.epoch} done: {examples} examples"
            if validation is not None:
                result = self._validate(validation)
                history["validation"].append(result)
                line = f"epoch {self.epoch} done: validation loss {result['loss']:.4f}"
                if "accuracy" in result:
                    line += f", accuracy {100.0 * result['accuracy']:.2f}%"
            if log is not None:
                log(line)
        return history

    def _validate(self, data):
        """The mean loss (and accuracy) over the batches of `data`, by rows."""
        total, loss, correct = 0, 0.0, 0.0
        accuracy = True
        for item in data:
            inputs, labels = self._split(item)
            rows = self._rows(inputs)
            result = self.evaluate(inputs, labels)
            total += rows
            loss += result["loss"] * rows
            if "accuracy" in result:
                correct += result["accuracy"] * rows
            else:
                accuracy = False
        if total == 0:
            raise UsageError("memfit.Trainer.fit: validation holds no batches")
        out = {"loss": loss / total}
        if accuracy:
            out["accuracy"] = correct / total
        return out

    def __repr__(self):
        if not hasattr(self, "_native"):
            return "memfit.Trainer(not made)"
        return (f"memfit.Trainer({self.plan.get('model')!r}, batch={self.batch}, "
                f"steps={self.steps}, lr={self.lr})")
