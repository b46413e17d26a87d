"""memfit.plan against `memfit plan --json`: for zoo models (lenet, mlp, a small
resnet-cifar, a small gpt) under each memory technique (sharing, no sharing, sqrt
recomputation, budget swapping, policy auto under a budget, two ranks with a sharded
optimizer) and for ONNX files (onnx=path, model=memfit.Model(path), loss="mse"), the
dict the module returns must equal the program's JSON report key for key (the
default roofline cost model makes predicted times deterministic). It also checks
that a budget in bytes and as "3MiB" plan alike, that timeline= writes the same SVG
as the program's --timeline, and that memfit.models() lists what `memfit models`
prints."""

import pytest

import memfit

# A gpt small enough to plan in milliseconds; its default step needs 3610240 bytes
# and policy auto reaches 2839104, so 3 MiB (3145728 bytes) forces a choice.
GPT = dict(model="gpt", depth=2, seq_len=64, batch=2, width=64, vocab=1000)
GPT_ARGS = ["--model", "gpt", "--depth", "2", "--seq-len", "64", "--batch", "2",
            "--width", "64", "--vocab", "1000"]

# (keywords of memfit.plan, the same settings as `memfit plan` flags)
ZOO_CASES = {
    "lenet": (dict(model="lenet", batch=8), ["--model", "lenet", "--batch", "8"]),
    "mlp-adamw-accumulate": (dict(model="mlp", batch=16, optimizer="adamw", accumulate=2),
                             ["--model", "mlp", "--batch", "16", "--optimizer", "adamw",
                              "--accumulate", "2"]),
    "resnet-cifar": (dict(model="resnet-cifar", depth=11, width=4, batch=4),
                     ["--model", "resnet-cifar", "--depth", "11", "--width", "4", "--batch", "4"]),
    "resnet-cifar-recompute-sqrt": (dict(model="resnet-cifar", depth=20, width=4, batch=4,
                                         recompute="sqrt"),
                                    ["--model", "resnet-cifar", "--depth", "20", "--width", "4",
                                     "--batch", "4", "--recompute", "sqrt"]),
    "gpt": (GPT, GPT_ARGS),
    "gpt-auto-budget": (dict(GPT, policy="auto", budget=3145728),
                        GPT_ARGS + ["--policy", "auto", "--budget", "3145728"]),
    "gpt-recompute-sqrt": (dict(GPT, recompute="sqrt"), GPT_ARGS + ["--recompute", "sqrt"]),
    "gpt-swap-budget": (dict(GPT, swap="budget", budget="3MiB"),
                        GPT_ARGS + ["--swap", "budget", "--budget", "3MiB"]),
    "gpt-no-sharing": (dict(GPT, no_sharing=True), GPT_ARGS + ["--no-sharing"]),
    "gpt-ranks-shard": (dict(GPT, ranks=2, shard="optimizer"),
                        GPT_ARGS + ["--ranks", "2", "--shard", "optimizer"]),
    "lenet-false-and-none-are-defaults": (dict(model="lenet", batch=8, no_sharing=False, swap=None),
                                          ["--model", "lenet", "--batch", "8"]),
}


@pytest.mark.parametrize("case", list(ZOO_CASES))
def test_plan_equals_command_line(case, cli):
    settings, args = ZOO_CASES[case]
    expected = cli("plan", *args, "--json").json()
    got = memfit.plan(**settings)
    assert got == expected


def test_the_cases_exercise_their_techniques():
    """The cases above are only worth comparing if they plan what they say."""
    auto = memfit.plan(**ZOO_CASES["gpt-auto-budget"][0])
    assert auto["policy"] == "auto" and auto["budget_bytes"] == 3145728
    assert auto["arena_bytes"] <= 3145728 < memfit.plan(**GPT)["arena_bytes"]
    assert memfit.plan(**ZOO_CASES["gpt-recompute-sqrt"][0])["checkpoints"] > 0
    swap = memfit.plan(**ZOO_CASES["gpt-swap-budget"][0])
    assert swap["swapped_values"] > 0 and swap["host_bytes"] > 0
    assert memfit.plan(**ZOO_CASES["gpt-no-sharing"][0])["sharing"] is False
    ranks = memfit.plan(**ZOO_CASES["gpt-ranks-shard"][0])
    assert (ranks["ranks"], ranks["shard"]) == (2, "optimizer")


def test_budget_in_bytes_or_with_a_unit_plans_alike():
    in_bytes = memfit.plan(**GPT, policy="auto", budget=3 * 1024 * 1024)
    with_unit = memfit.plan(**GPT, policy="auto", budget="3MiB")
    as_text = memfit.plan(**GPT, policy="auto", budget="3145728")
    assert in_bytes == with_unit == as_text
    assert in_bytes["budget_bytes"] == 3145728


ONNX_CASES = {
    "onnx-path": (lambda d: dict(onnx=d / "lenet.onnx", batch=4),
                  lambda d: ["--onnx", d / "lenet.onnx", "--batch", "4"]),
    "onnx-str-mse": (lambda d: dict(onnx=str(d / "mlp_small.onnx"), loss="mse", batch=4),
                     lambda d: ["--onnx", d / "mlp_small.onnx", "--loss", "mse", "--batch", "4"]),
    "model-object": (lambda d: dict(model=memfit.Model(d / "cnn_small.onnx"), batch=8),
                     lambda d: ["--onnx", d / "cnn_small.onnx", "--batch", "8"]),
    "model-object-mse": (lambda d: dict(model=memfit.Model(d / "gpt_small.onnx", loss="mse"), batch=3),
                         lambda d: ["--onnx", d / "gpt_small.onnx", "--loss", "mse", "--batch", "3"]),
    "model-object-recompute": (lambda d: dict(model=memfit.Model(d / "gpt.onnx"), batch=2,
                                              recompute="sqrt"),
                               lambda d: ["--onnx", d / "gpt.onnx", "--batch", "2",
                                          "--recompute", "sqrt"]),
}


@pytest.mark.parametrize("case", list(ONNX_CASES))
def test_onnx_plan_equals_command_line(case, cli, onnx_dir):
    settings, args = (make(onnx_dir) for make in ONNX_CASES[case])
    expected = cli("plan", *args, "--json").json()
    got = memfit.plan(**settings)
    assert got == expected
    assert got["model"] == (onnx_dir / args[1]).stem


def test_model_object():
    model = memfit.Model("some/net.onnx", loss="mse")
    assert model.args() == ["--onnx", "some/net.onnx", "--loss", "mse"]
    assert memfit.Model("a.onnx").loss == "cross-entropy"
    assert "a.onnx" in repr(memfit.Model("a.onnx"))


def test_timeline_writes_the_command_lines_svg(cli, tmp_path):
    ours, theirs = tmp_path / "ours.svg", tmp_path / "theirs.svg"
    report = memfit.plan(model="lenet", batch=8, timeline=ours)
    run = cli("plan", "--model", "lenet", "--batch", "8", "--json", "--timeline", theirs)
    assert report == run.json()
    svg = ours.read_text()
    assert svg.lstrip().startswith(("<svg", "<?xml")) and svg.rstrip().endswith("</svg>")
    assert "lenet, batch 8" in svg
    assert svg == theirs.read_text()


def test_models_lists_the_zoo(cli):
    run = cli("models")
    assert run.returncode == 0
    rows = run.stdout.splitlines()[1:]
    models = memfit.models()
    assert [m["name"] for m in models] == [row.split()[0] for row in rows]
    for model, row in zip(models, rows):
        name, parameters, data, shape = row.split()[:4]
        assert model["parameters"] == int(parameters)
        assert model["data"] == data
        assert "x".join(str(d) for d in model["input"]) == shape
        assert isinstance(model["classes"], int) and model["description"] in row


def test_numpy_scalars_are_settings(cli):
    """numpy's integers, floats and bools are numbers and flags like Python's."""
    import numpy as np
    expected = cli("plan", "--model", "lenet", "--batch", "8", "--link-gbps", "2.5", "--mirror",
                   "--recompute", "sqrt", "--json").json()
    got = memfit.plan(model="lenet", batch=np.int64(8), link_gbps=np.float32(2.5),
                      mirror=np.bool_(True), no_fuse=np.bool_(False), recompute="sqrt")
    assert got == expected
