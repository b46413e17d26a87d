"""Errors of memfit.plan, max_batch and train, against the `memfit` program's: settings
the command line refuses (exit status 2) raise memfit.UsageError, a subclass of
memfit.Error and ValueError, with the program's message and before any work (no log
line, no callback, no checkpoint); failures of the work itself (exit status 1: a budget
no plan meets, a missing ONNX file or checkpoint) raise memfit.Error, not UsageError,
with the program's message less its "memfit COMMAND: " prefix, and the smallest budget
the message names is one that plans; a setting that is neither a string, a number nor
a bool raises TypeError before anything runs."""

import re

import pytest

import memfit

GPT = dict(model="gpt", depth=2, seq_len=64, batch=2, width=64, vocab=1000)
GPT_ARGS = ["--model", "gpt", "--depth", "2", "--seq-len", "64", "--batch", "2",
            "--width", "64", "--vocab", "1000"]


def test_exception_classes():
    assert issubclass(memfit.UsageError, memfit.Error)
    assert issubclass(memfit.UsageError, ValueError)
    assert issubclass(memfit.Error, Exception)
    assert not issubclass(memfit.Error, ValueError)
    assert memfit.Error.__module__ == memfit.UsageError.__module__ == "memfit"


def raised(call, **settings):
    with pytest.raises(memfit.Error) as info:
        call(**settings)
    return info.value


# (function, its command, keywords, the same flags)
USAGE_CASES = {
    "batch-0": (memfit.plan, "plan", dict(model="lenet", batch=0),
                ["--model", "lenet", "--batch", "0"]),
    "unknown-model": (memfit.plan, "plan", dict(model="nope", batch=4),
                      ["--model", "nope", "--batch", "4"]),
    "unknown-keyword": (memfit.plan, "plan", dict(model="lenet", batch=4, frobnicate=1),
                        ["--model", "lenet", "--batch", "4", "--frobnicate", "1"]),
    "share-with-recompute": (memfit.plan, "plan",
                             dict(model="lenet", batch=4, policy="share", recompute="sqrt"),
                             ["--model", "lenet", "--batch", "4", "--policy", "share",
                              "--recompute", "sqrt"]),
    "no-model": (memfit.plan, "plan", dict(batch=4), ["--batch", "4"]),
    "loss-of-a-zoo-model": (memfit.plan, "plan", dict(model="lenet", batch=4, loss="mse"),
                            ["--model", "lenet", "--batch", "4", "--loss", "mse"]),
    "shard-without-ranks": (memfit.plan, "plan", dict(model="lenet", batch=4, shard="optimizer"),
                            ["--model", "lenet", "--batch", "4", "--shard", "optimizer"]),
    "budget-unit": (memfit.plan, "plan", dict(model="lenet", batch=4, budget="12XB"),
                    ["--model", "lenet", "--batch", "4", "--budget", "12XB"]),
    "budget-0": (memfit.plan, "plan", dict(model="lenet", batch=4, budget=0),
                 ["--model", "lenet", "--batch", "4", "--budget", "0"]),
    "maxbatch-without-budget": (memfit.max_batch, "maxbatch", dict(model="lenet"),
                                ["--model", "lenet"]),
    "maxbatch-vary": (memfit.max_batch, "maxbatch", dict(model="lenet", budget="1GiB", vary="width"),
                      ["--model", "lenet", "--budget", "1GiB", "--vary", "width"]),
    "train-batch-0": (memfit.train, "train", dict(model="lenet", batch=0, synthetic=True),
                      ["--model", "lenet", "--batch", "0", "--synthetic"]),
    "train-epochs-0": (memfit.train, "train", dict(model="lenet", epochs=0, synthetic=True),
                       ["--model", "lenet", "--epochs", "0", "--synthetic"]),
    "train-shard": (memfit.train, "train", dict(model="lenet", shard="gradients", synthetic=True),
                    ["--model", "lenet", "--shard", "gradients", "--synthetic"]),
}


@pytest.mark.parametrize("case", list(USAGE_CASES))
def test_usage_errors_carry_the_command_lines_message(case, cli):
    call, command, settings, args = USAGE_CASES[case]
    run = cli(command, *args)
    assert run.returncode == 2, run.stderr
    error = raised(call, **settings)
    assert isinstance(error, memfit.UsageError) and isinstance(error, ValueError)
    assert str(error) == run.error_message()


def test_usage_errors_come_before_any_work(tmp_path):
    checkpoint = tmp_path / "ck"
    lines, records = [], []
    with pytest.raises(memfit.UsageError, match="must be more than 0"):
        memfit.train(model="lenet", synthetic=True, limit=32, batch=16, epochs=1, lr=0,
                     save=checkpoint, log=lines.append, on_step=records.append)
    with pytest.raises(memfit.UsageError):
        memfit.plan(model="lenet", batch=4, recompute="sqrt", policy="share",
                    timeline=tmp_path / "t.svg")
    assert lines == [] and records == []
    assert list(tmp_path.iterdir()) == []


def test_the_module_refuses_what_only_the_program_runs(tmp_path):
    for settings in (dict(profile=True), dict(trace=tmp_path / "trace.json")):
        with pytest.raises(memfit.UsageError, match="memfit.train"):
            memfit.plan(model="lenet", batch=4, **settings)
    with pytest.raises(memfit.UsageError, match="help"):
        memfit.plan(help=True)


def test_a_budget_no_plan_meets_names_the_smallest(cli):
    run = cli("plan", *GPT_ARGS, "--policy", "auto", "--budget", "1MiB", "--json")
    assert run.returncode == 1
    error = raised(memfit.plan, **GPT, policy="auto", budget="1MiB")
    assert not isinstance(error, memfit.UsageError)
    assert str(error) == run.error_message()
    smallest = int(re.search(r"give a --budget of at least (\d+) bytes", str(error)).group(1))
    assert 1 << 20 < smallest
    # The budget named is enough, and a byte less is not.
    assert memfit.plan(**GPT, policy="auto", budget=smallest)["arena_bytes"] <= smallest
    with pytest.raises(memfit.Error, match=f"at least {smallest} bytes"):
        memfit.plan(**GPT, policy="auto", budget=smallest - 1)


def test_training_under_a_budget_no_plan_meets(cli):
    args = ["--synthetic", "--epochs", "1", "--limit", "8", "--policy", "auto", "--budget", "1MiB"]
    run = cli("train", *GPT_ARGS, *args)
    assert run.returncode == 1
    lines = []
    error = raised(memfit.train, **GPT, synthetic=True, epochs=1, limit=8, policy="auto",
                   budget="1MiB", log=lines.append)
    assert not isinstance(error, memfit.UsageError)
    assert str(error) == run.error_message()
    assert lines == [], "the budget is checked before training starts"


def test_max_batch_when_even_one_does_not_fit(cli):
    run = cli("maxbatch", "--model", "lenet", "--budget", "1KiB", "--json")
    assert run.returncode == 1
    error = raised(memfit.max_batch, model="lenet", budget="1KiB")
    assert not isinstance(error, memfit.UsageError)
    assert str(error) == run.error_message()


def test_missing_files(cli, tmp_path):
    missing = tmp_path / "missing.onnx"
    run = cli("plan", "--onnx", missing, "--batch", "4", "--json")
    assert run.returncode == 1
    message = run.error_message()
    assert str(missing) in message
    for call, settings in [(memfit.plan, dict(onnx=missing, batch=4)),
                           (memfit.plan, dict(model=memfit.Model(missing), batch=4)),
                           (memfit.max_batch, dict(model=memfit.Model(missing), budget="1GiB")),
                           (memfit.train, dict(model=memfit.Model(missing), synthetic=True,
                                               log=None))]:
        error = raised(call, **settings)
        assert not isinstance(error, memfit.UsageError)
        assert str(error) == message

    checkpoint = tmp_path / "missing.ck"
    args = ["--model", "lenet", "--synthetic", "--epochs", "1", "--limit", "32", "--batch", "16"]
    run = cli("train", *args, "--resume", checkpoint)
    assert run.returncode == 1
    error = raised(memfit.train, model="lenet", synthetic=True, epochs=1, limit=32, batch=16,
                   resume=checkpoint, log=None)
    assert str(error) == run.error_message() and str(checkpoint) in str(error)


def test_messages_quoting_bytes_that_are_not_utf8(tmp_path):
    """A checkpoint whose model name is not UTF-8 (edited, with its CRC fixed)
    raises memfit.Error with U+FFFD in the name's place, not UnicodeDecodeError."""
    import struct
    import zlib
    path = tmp_path / "run.ck"
    settings = dict(model="lenet", synthetic=True, epochs=1, limit=32, batch=16, log=None)
    memfit.train(save=path, **settings)
    data = bytearray(path.read_bytes())
    payload = data[24:]
    assert payload[4:9] == b"lenet"
    payload[8] = 0xFF
    data[20:24] = struct.pack("<I", zlib.crc32(payload))
    data[24:] = payload
    path.write_bytes(bytes(data))
    error = raised(memfit.train, resume=path, **dict(settings, epochs=2))
    assert "'lene\ufffd'" in str(error)


def test_unwritable_timeline(cli, tmp_path):
    path = tmp_path / "no-such-directory" / "t.svg"
    run = cli("plan", "--model", "lenet", "--batch", "4", "--timeline", path, "--json")
    assert run.returncode == 1
    error = raised(memfit.plan, model="lenet", batch=4, timeline=path)
    assert str(error) == run.error_message()


@pytest.mark.parametrize("value", [[8], {"batch": 8}, (8,), object(), b"8"])
def test_values_must_be_strings_numbers_or_bools(value):
    lines = []
    with pytest.raises(TypeError, match="batch="):
        memfit.plan(model="lenet", batch=value)
    with pytest.raises(TypeError, match="batch="):
        memfit.train(model="lenet", synthetic=True, batch=value, log=lines.append)
    assert lines == []


def test_numbers_and_paths_become_flag_values(tmp_path):
    as_numbers = memfit.plan(model="lenet", batch=8, lr=0.125, weight_decay=1e-4)
    as_text = memfit.plan(model="lenet", batch="8", lr="0.125", weight_decay="0.0001")
    assert as_numbers == as_text
    with pytest.raises(memfit.UsageError, match="not a number"):
        memfit.plan(model="lenet", batch=8, lr="fast")
    # Whole floats are integers to the command line (budget=1e9 read '1e+09'
    # as a number with the unit 'e+09'); others keep their digits.
    assert memfit.plan(model="lenet", batch=8.0, budget=1e16) == \
        memfit.plan(model="lenet", batch=8, budget="10000000000000000")
    with pytest.raises(memfit.UsageError, match="--batch"):
        memfit.plan(model="lenet", batch=2.5)


def test_a_models_loss_is_a_string():
    with pytest.raises(TypeError, match="loss=None"):
        memfit.Model("net.onnx", loss=None)
