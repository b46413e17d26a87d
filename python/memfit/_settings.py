"""Keyword settings to the command line's arguments.

Every keyword is a flag of the `memfit` command line with its dashes as
underscores: ``batch=8`` is ``--batch 8``, ``budget="2GiB"`` is ``--budget
2GiB``, ``no_sharing=True`` is ``--no-sharing``; a float that is a whole number
is written as an integer (``budget=1e16`` is ``--budget 10000000000000000``).
``True`` gives a flag that takes no value, ``False`` and ``None`` leave a
setting out (its default). ``model`` is a zoo name or a :class:`memfit.Model`
(an ONNX file, from :func:`memfit.from_torch`); ``onnx`` a path. The command
line's parser checks them all, with its messages, before anything runs.
"""

import numbers
import os

from ._model import Model


def _value_text(key, value):
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    if isinstance(value, numbers.Integral):  # int, numpy's integers
        return str(int(value))
    if isinstance(value, numbers.Real):  # float, numpy's floats
        number = float(value)
        # A whole number as an integer (budget=1e16, batch=8.0), which every
        # integer flag reads: repr writes 1e16 and above with an exponent.
        if number.is_integer():
            return str(int(number))
        return repr(number)
    raise TypeError(f"memfit: {key}={value!r}: a setting is a string, a number or a bool, "
                    f"not {type(value).__name__}")


def _as_bool(value):
    """True or False for a bool (Python's or numpy's), None for anything else."""
    if isinstance(value, bool):
        return value
    dtype = getattr(value, "dtype", None)
    if getattr(dtype, "kind", None) == "b" and getattr(value, "shape", None) == ():
        return bool(value)
    return None


def to_args(command, settings):
    """``command`` and its flags for ``settings`` (a dict of keywords)."""
    args = [command]
    for key, value in settings.items():
        if value is None or _as_bool(value) is False:
            continue
        if key == "model" and isinstance(value, Model):
            args += value.args()
            continue
        flag = "--" + key.replace("_", "-")
        if _as_bool(value) is True:
            args.append(flag)
        else:
            args += [flag, _value_text(key, value)]
    return args
