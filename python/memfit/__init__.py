"""memfit: train deep networks inside a fixed memory budget, from Python.

A binding of the same library the ``memfit`` command line runs: ``plan``,
``max_batch`` and ``train`` take the command line's settings as keywords
(flags with dashes as underscores) and return what its ``--json`` prints, as
dicts. ``from_torch`` hands memfit a PyTorch module (through ONNX) and
``load_into`` puts the trained weights back into it. ``Trainer`` trains
step by step on the caller's own batches (numpy arrays, a torch DataLoader).

    import memfit
    report = memfit.plan(model="resnet18", batch=32, budget="4GiB", policy="auto")
    report["arena_bytes"]
"""

from ._memfit import Error, UsageError
from ._api import max_batch, models, plan, train
from ._model import Model
from ._torch import from_torch, load_into
from ._trainer import Trainer

__all__ = ["Error", "UsageError", "Model", "Trainer", "plan", "max_batch", "train", "models",
           "from_torch", "load_into"]
__version__ = "0.1.0"
