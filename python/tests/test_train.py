"""memfit.train against `memfit train --json`: short synthetic runs of lenet (with
sgd, and with adamw, two micro-batches per step and two epochs), of ONNX files (by
memfit.Model and by onnx=path) must report what the program reports with the same
flags: the losses bit for bit, the test accuracy, the arena and its high-water mark,
the optimizer steps and the run's settings (everything but the measured speed). The
module's result adds the trained arrays. Also checks that the seed matters, and that
the progress lines go to log (the program's stderr lines, speeds aside), to stderr by
default, and nowhere with log=None."""

import re

import pytest

import memfit

# The report's keys that depend on the clock, which two runs never share.
TIMED = {"examples_per_second"}

CASES = {
    "lenet": (dict(model="lenet", synthetic=True, epochs=1, limit=128, batch=16, seed=3),
              ["--model", "lenet", "--synthetic", "--epochs", "1", "--limit", "128",
               "--batch", "16", "--seed", "3"]),
    "lenet-adamw-accumulate": (dict(model="lenet", synthetic=True, epochs=2, limit=64, batch=8,
                                    accumulate=2, optimizer="adamw", seed=5, schedule="constant"),
                               ["--model", "lenet", "--synthetic", "--epochs", "2", "--limit", "64",
                                "--batch", "8", "--accumulate", "2", "--optimizer", "adamw",
                                "--seed", "5", "--schedule", "constant"]),
    "mlp-one-thread": (dict(model="mlp", synthetic=True, epochs=1, limit=96, batch=32, seed=9,
                            threads=1, lr=0.1),
                       ["--model", "mlp", "--synthetic", "--epochs", "1", "--limit", "96",
                        "--batch", "32", "--seed", "9", "--threads", "1", "--lr", "0.1"]),
}


def without_timing(report):
    return {k: v for k, v in report.items() if k not in TIMED | {"parameters", "state"}}


def check_same_run(result, expected):
    """The module's result is the program's report, speeds aside, plus the arrays."""
    assert set(result) == set(expected) | {"parameters", "state"}
    assert without_timing(result) == without_timing(expected)
    assert result["examples_per_second"] > 0
    steps = expected["optimizer_steps"]
    assert steps > 0 and len(result["losses"]) == steps * expected["accumulate"]
    assert not result["stopped"]


@pytest.mark.parametrize("case", list(CASES))
def test_train_equals_command_line(case, cli):
    settings, args = CASES[case]
    expected = cli("train", *args, "--json").json()
    result = memfit.train(log=None, **settings)
    check_same_run(result, expected)
    assert len(result["test_accuracy"]) == settings["epochs"]


@pytest.mark.parametrize("name,how", [("cnn_small", "model"), ("gpt_small", "onnx"),
                                      ("cnn_small", "mse")])
def test_onnx_train_equals_command_line(name, how, cli, onnx_dir):
    path = onnx_dir / f"{name}.onnx"
    common = dict(synthetic=True, epochs=1, limit=32, batch=8, seed=2)
    args = ["--onnx", path, "--synthetic", "--epochs", "1", "--limit", "32", "--batch", "8",
            "--seed", "2"]
    if how == "model":
        settings = dict(common, model=memfit.Model(path))
    elif how == "onnx":
        settings = dict(common, onnx=path)
    else:
        settings = dict(common, model=memfit.Model(path, loss="mse"))
        args += ["--loss", "mse"]
    expected = cli("train", *args, "--json").json()
    result = memfit.train(log=None, **settings)
    check_same_run(result, expected)
    assert result["model"] == name
    assert result["parameters"], "an ONNX model's trained weights come back too"


def test_the_seed_changes_the_run():
    settings = dict(CASES["lenet"][0], limit=32)
    one = memfit.train(log=None, **settings)
    again = memfit.train(log=None, **settings)
    other = memfit.train(log=None, **dict(settings, seed=4))
    assert one["losses"] == again["losses"]
    assert one["losses"] != other["losses"]


def masked(line):
    """A progress line with its measured speed taken out."""
    return re.sub(r"[0-9.]+ examples/s", "N examples/s", line)


def test_log_receives_the_command_lines_progress_lines(cli):
    settings, args = CASES["lenet-adamw-accumulate"]
    lines = []
    memfit.train(log=lines.append, **settings)
    run = cli("train", *args, "--json")
    assert run.returncode == 0
    assert all(isinstance(line, str) and "\n" not in line for line in lines)
    assert any(line.startswith("memory plan: arena ") for line in lines)
    assert sum(line.startswith("epoch ") and " done: test accuracy " in line for line in lines) == 2
    assert [masked(line) for line in lines] == [masked(line) for line in run.stderr.splitlines()]


def test_log_defaults_to_stderr(capsys):
    memfit.train(**dict(CASES["lenet"][0], limit=32))
    out, err = capsys.readouterr()
    assert out == ""
    assert re.search(r"^memory plan: arena \d+ bytes", err, re.MULTILINE)
    assert re.search(r"^epoch 1 done: test accuracy", err, re.MULTILINE)


def test_log_none_prints_nothing(capfd):
    result = memfit.train(log=None, **dict(CASES["lenet"][0], limit=32))
    assert result["optimizer_steps"] == 2
    assert capfd.readouterr() == ("", "")
