"""Shared fixtures of memfit's Python tests: the `memfit` program (MEMFIT_PROGRAM)
whose output the module must reproduce, run through the ``cli`` fixture; the small
ONNX models that ``make_onnx_models`` (in MEMFIT_TEST_TOOLS) writes once per session
(``onnx_dir``); and ``read_checkpoint``, a numpy reader of memfit's checkpoint format
(src/train/checkpoint.cpp), so that tests can compare trained arrays with what a run
saved. A test that needs the program or the tools is skipped, with the reason, when
its environment variable is unset."""

import json
import os
import struct
import subprocess
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest


def _from_environment(variable, what):
    value = os.environ.get(variable)
    if not value:
        pytest.skip(f"{variable} is not set: it names {what} (CTest sets it; see python/CMakeLists.txt)")
    return value


@dataclass
class CliRun:
    """One run of the `memfit` program."""
    args: list
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        assert self.returncode == 0, f"memfit {' '.join(self.args)} failed:\n{self.stderr}"
        return json.loads(self.stdout)

    def error_message(self):
        """The message of a failed run: its first stderr line without the
        program's prefix ("memfit: " or "memfit COMMAND: "), as the module's
        exceptions carry it."""
        assert self.returncode != 0, f"memfit {' '.join(self.args)} succeeded"
        first = self.stderr.splitlines()[0]
        for prefix in (f"memfit {self.args[0]}: ", "memfit: "):
            if first.startswith(prefix):
                return first[len(prefix):]
        raise AssertionError(f"unexpected stderr of memfit {' '.join(self.args)}: {self.stderr!r}")


@pytest.fixture(scope="session")
def memfit_program():
    path = _from_environment("MEMFIT_PROGRAM", "the memfit executable")
    if not os.access(path, os.X_OK):
        pytest.skip(f"MEMFIT_PROGRAM={path} is not an executable")
    return path


@pytest.fixture(scope="session")
def cli(memfit_program):
    """``cli(*args)`` runs ``memfit ARGS`` and returns a :class:`CliRun`."""
    def run(*args):
        args = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
        done = subprocess.run([memfit_program, *args], capture_output=True, text=True, timeout=120)
        return CliRun(args, done.returncode, done.stdout, done.stderr)
    return run


@pytest.fixture(scope="session")
def onnx_dir(tmp_path_factory):
    """A directory holding lenet.onnx, gpt.onnx, cnn_small.onnx, gpt_small.onnx and
    mlp_small.onnx, written once per session by make_onnx_models."""
    tools = _from_environment("MEMFIT_TEST_TOOLS", "the directory of the test tools (make_onnx_models)")
    program = os.path.join(tools, "make_onnx_models")
    if not os.access(program, os.X_OK):
        pytest.skip(f"{program} is not an executable (MEMFIT_TEST_TOOLS={tools})")
    directory = tmp_path_factory.mktemp("onnx")
    subprocess.run([program, str(directory)], check=True, timeout=60)
    for name in ("lenet", "gpt", "cnn_small", "gpt_small", "mlp_small"):
        assert (directory / f"{name}.onnx").is_file(), f"make_onnx_models wrote no {name}.onnx"
    return directory


@dataclass
class Checkpoint:
    """A memfit checkpoint as src/train/checkpoint.cpp writes it."""
    model: str
    epoch: int
    micro_step: int
    optimizer_step: int
    run: tuple  # batch, accumulate, train_examples, epochs, schedule, seed, data
    tensors: dict = field(default_factory=dict)  # name -> float32 array, in file order


_MAGIC = b"MEMFITCK"
_VERSION = 3


def _read_checkpoint(path):
    data = open(path, "rb").read()
    assert data[:8] == _MAGIC, f"{path} is not a memfit checkpoint"
    version, length, crc = struct.unpack_from("<IQI", data, 8)
    assert version == _VERSION, f"{path}: version {version}, expected {_VERSION}"
    payload = data[24:]
    assert len(payload) == length, f"{path}: payload of {len(payload)} bytes, header says {length}"
    assert zlib.crc32(payload) == crc, f"{path}: the crc32 does not match"
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from(fmt, payload, pos)
        pos += struct.calcsize(fmt)
        return values

    def string():
        nonlocal pos
        (n,) = take("<I")
        pos += n
        return payload[pos - n:pos].decode()

    model = string()
    epoch, micro_step, optimizer_step = take("<qqq")
    run = take("<qqqqqQ") + (string(),)
    (count,) = take("<I")
    tensors = {}
    for _ in range(count):
        name = string()
        (rank,) = take("<I")
        shape = take(f"<{rank}q")
        elements = int(np.prod(shape, dtype=np.int64))
        tensors[name] = np.frombuffer(payload, dtype="<f4", count=elements, offset=pos).reshape(shape)
        pos += 4 * elements
    assert pos == len(payload), f"{path}: {len(payload) - pos} bytes follow the last tensor"
    return Checkpoint(model, epoch, micro_step, optimizer_step, run, tensors)


@pytest.fixture(scope="session")
def read_checkpoint():
    """``read_checkpoint(path)`` returns a :class:`Checkpoint`."""
    return _read_checkpoint
