"""memfit.max_batch against `memfit maxbatch --json`: the largest batch under a budget
for zoo models (with sharing, with recomputation, with policy auto) and for ONNX
files, and the longest sequence (vary="seq-len") of a small gpt, must equal the
program's JSON report key for key; the found batch must fit the budget and one more
must not (checked with memfit.plan)."""

import pytest

import memfit

GPT = dict(model="gpt", depth=2, width=64, vocab=1000, batch=2)
GPT_ARGS = ["--model", "gpt", "--depth", "2", "--width", "64", "--vocab", "1000", "--batch", "2"]

CASES = {
    "lenet": (dict(model="lenet", budget="16MiB"), ["--model", "lenet", "--budget", "16MiB"]),
    "lenet-bytes": (dict(model="lenet", budget=16 * 2**20), ["--model", "lenet", "--budget", "16777216"]),
    "resnet-cifar-recompute": (dict(model="resnet-cifar", depth=11, width=4, recompute="sqrt",
                                    budget="4MiB"),
                               ["--model", "resnet-cifar", "--depth", "11", "--width", "4",
                                "--recompute", "sqrt", "--budget", "4MiB"]),
    "mlp-auto": (dict(model="mlp", policy="auto", budget="3MiB"),
                 ["--model", "mlp", "--policy", "auto", "--budget", "3MiB"]),
    "gpt-seq-len": (dict(GPT, budget="8MiB", vary="seq-len"),
                    GPT_ARGS + ["--budget", "8MiB", "--vary", "seq-len"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_max_batch_equals_command_line(case, cli):
    settings, args = CASES[case]
    expected = cli("maxbatch", *args, "--json").json()
    assert memfit.max_batch(**settings) == expected


@pytest.mark.parametrize("name,loss", [("cnn_small", None), ("lenet", None), ("mlp_small", "mse")])
def test_onnx_max_batch_equals_command_line(name, loss, cli, onnx_dir):
    path = onnx_dir / f"{name}.onnx"
    args = ["--onnx", path, "--budget", "1MiB"] + (["--loss", loss] if loss else [])
    expected = cli("maxbatch", *args, "--json").json()
    model = memfit.Model(path, loss=loss or "cross-entropy")
    assert memfit.max_batch(model=model, budget="1MiB") == expected
    assert memfit.max_batch(onnx=path, loss=loss, budget=1 << 20) == expected
    assert expected["model"] == name


def test_the_batch_found_is_the_largest_that_fits():
    found = memfit.max_batch(model="lenet", budget="16MiB")
    best = found["max_batch"]
    assert best > 1 and not found["at_search_limit"]
    fits = memfit.plan(model="lenet", batch=best)
    assert fits["arena_bytes"] == found["arena_bytes"] <= 16 * 2**20
    assert memfit.plan(model="lenet", batch=best + 1)["arena_bytes"] > 16 * 2**20


def test_the_sequence_found_is_the_longest_that_fits():
    found = memfit.max_batch(**GPT, budget="8MiB", vary="seq-len")
    assert "max_batch" not in found and found["batch"] == 2
    longest = found["max_seq_len"]
    assert memfit.plan(**GPT, seq_len=longest)["arena_bytes"] == found["arena_bytes"] <= 8 * 2**20
    assert memfit.plan(**GPT, seq_len=longest + 1)["arena_bytes"] > 8 * 2**20
