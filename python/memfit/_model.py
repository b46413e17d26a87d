"""A model that is not in memfit's zoo: an ONNX file and its loss."""

import os


class Model:
    """An ONNX model for memfit: what ``model=`` takes besides a zoo name.

    ``path`` is the ONNX file (opset 13 to 17; the first dimension of every
    input is the batch), ``loss`` ``"cross-entropy"`` (classes last, integer
    labels) or ``"mse"``. :func:`memfit.from_torch` makes one from a
    PyTorch module; ``Model("net.onnx")`` takes a file as it is.
    """

    def __init__(self, path, loss="cross-entropy"):
        self.path = os.fspath(path)
        if not isinstance(loss, str):
            raise TypeError(f"memfit.Model: loss={loss!r}: a string, \"cross-entropy\" or "
                            "\"mse\"")
        self.loss = loss
        self._cleanup = None  # from_torch: removes its temporary directory

    def args(self):
        return ["--onnx", self.path, "--loss", self.loss]

    def __repr__(self):
        return f"memfit.Model({self.path!r}, loss={self.loss!r})"
