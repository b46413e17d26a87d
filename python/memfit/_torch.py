"""PyTorch modules in and out: from_torch exports one to ONNX for memfit,
load_into puts memfit's trained tensors back. torch is the caller's own
dependency; memfit imports it only here, when these are called."""

import inspect
import os
import shutil
import tempfile
import warnings
import weakref

from ._memfit import Error
from ._model import Model


def from_torch(module, example_inputs, path=None, loss="cross-entropy", opset=17):
    """Exports ``module`` (a ``torch.nn.Module``) with ``torch.onnx`` for memfit.

    ``example_inputs`` is a tensor or a tuple of them, as ``module`` takes
    them; their first dimension becomes the batch, which ``batch=`` sets in
    memfit. The export is in training mode (batch norm on batch statistics,
    dropout on) without constant folding, so that every parameter is an
    initializer under its ``state_dict`` name (which :func:`load_into`
    relies on); the module itself is left as it was (its running statistics
    too). ``path`` keeps the ONNX file there; by default it goes to a
    temporary directory removed with the returned :class:`memfit.Model`.
    torch.onnx needs the ``onnx`` package (``pip install memfit[torch]``
    installs both).
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"memfit.from_torch: expected a torch.nn.Module, not {type(module).__name__}")
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise TypeError("memfit.from_torch: example_inputs must be a tensor or a tuple of tensors")
    cleanup = None
    if path is None:
        directory = tempfile.mkdtemp(prefix="memfit-")
        path = os.path.join(directory, type(module).__name__.lower() + ".onnx")
        cleanup = directory
    names = [f"input{i}" for i in range(len(inputs))]
    axes = {name: {0: "batch"} for name in names}
    axes["output"] = {0: "batch"}
    # Exporting in training mode runs the module once, which updates batch
    # norm's running statistics: the module gets its own back, and so does
    # the file (its initializers), which memfit trains from.
    buffers = {name: b.detach().clone() for name, b in module.named_buffers()}
    was_training = module.training
    module.train(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # The TorchScript exporter: torch 2 has a dynamo one too, and
            # asks which (torch 1.13, Debian 12's, has only this one).
            legacy = ({"dynamo": False}
                      if "dynamo" in inspect.signature(torch.onnx.export).parameters else {})
            torch.onnx.export(module, inputs, os.fspath(path), opset_version=opset, **legacy,
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, input_names=names,
                              output_names=["output"], dynamic_axes=axes)
    finally:
        module.train(was_training)
        with torch.no_grad():
            for name, b in module.named_buffers():
                b.copy_(buffers[name])
    _restore_initializers(path, buffers)
    model = Model(path, loss=loss)
    if cleanup is not None:
        model._cleanup = weakref.finalize(model, shutil.rmtree, cleanup, True)
    return model


def _restore_initializers(path, tensors):
    """Writes `tensors` (name to torch tensor) over the initializers of the
    same names in the ONNX file at `path`. torch.onnx needs the onnx package
    to export, so it is there."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(os.fspath(path))
    for i, initializer in enumerate(model.graph.initializer):
        if initializer.name in tensors:
            array = tensors[initializer.name].cpu().numpy()
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(array, initializer.name))
    onnx.save(model, os.fspath(path))


def load_into(module, trained):
    """Copies the result of :func:`memfit.train` (its ``parameters`` and
    ``state``), or the state of a :class:`memfit.Trainer` as it stands,
    into ``module``, by ``state_dict`` name. Every tensor must
    match one of the module's in name and shape, and every parameter of
    the module must be among them; otherwise :class:`memfit.Error` says
    which, and the module is left unchanged. Returns the names loaded."""
    import torch

    if hasattr(trained, "_trained"):  # a memfit.Trainer
        trained = trained._trained()
    tensors = {**trained.get("parameters", {}), **trained.get("state", {})}
    own = module.state_dict(keep_vars=True)
    problems = []
    for name, array in tensors.items():
        if name not in own:
            problems.append(f"{name} is not in the module's state_dict")
        elif tuple(own[name].shape) != tuple(array.shape):
            problems.append(f"{name} has shape {tuple(array.shape)} in memfit and "
                            f"{tuple(own[name].shape)} in the module")
    loaded = {own[name].data_ptr() for name in tensors if name in own}
    for name, parameter in module.named_parameters():
        if name not in tensors and parameter.data_ptr() not in loaded:
            problems.append(f"parameter {name} is not among memfit's trained tensors")
    if problems:
        raise Error("memfit.load_into: " + "; ".join(problems[:5]) +
                    (f"; and {len(problems) - 5} more" if len(problems) > 5 else ""))
    with torch.no_grad():
        for name, array in tensors.items():
            own[name].copy_(torch.from_numpy(array))
    return sorted(tensors)
