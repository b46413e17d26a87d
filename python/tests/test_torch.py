"""memfit.from_torch and memfit.load_into with PyTorch (skipped where torch is not
installed): a small torch.nn.Sequential CNN with batch norm on (N, 1, 28, 28)
images, exported through ONNX, plans (memfit.plan(model=m)) and trains exactly as
the `memfit` program does on the exported file; load_into copies the trained
parameters and running statistics into the module by state_dict name (they equal
the result's arrays and differ from the initial ones), and refuses a module that
does not match with memfit.Error, leaving it unchanged. Also the export's
arguments (training mode restored, TypeError for what is not a module or tensors)
and the temporary file's removal with the Model."""

import gc
import os

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

import memfit  # noqa: E402


def make_cnn(seed=0, classes=10):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 26 * 26, classes),
    )


def example():
    return torch.randn(2, 1, 28, 28)


TRAIN = dict(synthetic=True, epochs=1, limit=64, batch=8, seed=6)
TRAIN_ARGS = ["--synthetic", "--epochs", "1", "--limit", "64", "--batch", "8", "--seed", "6"]


def snapshot(module):
    return {name: tensor.detach().clone() for name, tensor in module.state_dict().items()}


def same_state(module, saved):
    now = module.state_dict()
    return set(now) == set(saved) and all(torch.equal(now[n], saved[n]) for n in saved)


def test_plan_of_a_module_is_the_plan_of_its_file(cli, tmp_path):
    module = make_cnn()
    model = memfit.from_torch(module, example(), path=tmp_path / "cnn.onnx")
    assert isinstance(model, memfit.Model) and model.path == str(tmp_path / "cnn.onnx")
    assert os.path.isfile(model.path)
    expected = cli("plan", "--onnx", model.path, "--batch", "8", "--json").json()
    got = memfit.plan(model=model, batch=8)
    assert got == expected
    assert got["model"] == "cnn" and got["arena_bytes"] > 0


def test_train_and_load_into(cli):
    module = make_cnn()
    initial = snapshot(module)
    model = memfit.from_torch(module, example())
    for name, parameter in module.named_parameters():
        assert torch.equal(parameter, initial[name]), f"exporting changed {name}"
    result = memfit.train(model=model, log=None, **TRAIN)

    expected = cli("train", "--onnx", model.path, *TRAIN_ARGS, "--json").json()
    assert result["losses"] == expected["losses"]
    assert result["arena_bytes"] == expected["arena_bytes"]

    parameters, state = result["parameters"], result["state"]
    assert set(parameters) == {name for name, _ in module.named_parameters()}
    assert set(state) == {"1.running_mean", "1.running_var"}

    loaded = memfit.load_into(module, result)
    assert loaded == sorted({**parameters, **state})
    now = module.state_dict()
    for name, array in {**parameters, **state}.items():
        assert tuple(now[name].shape) == array.shape
        assert np.array_equal(now[name].detach().numpy(), array), f"{name} was not loaded"
        assert not torch.equal(now[name], initial[name]), f"{name} did not train"
    # The module holds copies: it does not alias memfit's memory.
    assert now["0.weight"].data_ptr() != parameters["0.weight"].ctypes.data

    # The loaded module computes, in eval mode, with the trained statistics.
    module.eval()
    with torch.no_grad():
        out = module(example())
    assert out.shape == (2, 10) and torch.isfinite(out).all()


def test_load_into_refuses_a_module_that_does_not_match():
    module = make_cnn()
    result = memfit.train(model=memfit.from_torch(module, example()), log=None,
                          **dict(TRAIN, limit=16))

    other_classes = make_cnn(seed=1, classes=5)
    before = snapshot(other_classes)
    with pytest.raises(memfit.Error, match=r"4\.weight has shape \(10, 2704\) in memfit and "
                                           r"\(5, 2704\) in the module"):
        memfit.load_into(other_classes, result)
    assert same_state(other_classes, before), "a refused load changed the module"

    extra = torch.nn.Sequential(*make_cnn(seed=2), torch.nn.Linear(10, 10))
    before = snapshot(extra)
    with pytest.raises(memfit.Error, match=r"parameter 5\.weight is not among memfit's trained"):
        memfit.load_into(extra, result)
    assert same_state(extra, before)

    fewer = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3))
    before = snapshot(fewer)
    with pytest.raises(memfit.Error, match=r"4\.weight is not in the module's state_dict"):
        memfit.load_into(fewer, result)
    assert same_state(fewer, before)


@pytest.mark.parametrize("training", [True, False])
def test_from_torch_leaves_the_module_unchanged(training, tmp_path):
    module = make_cnn().train(training)
    before = snapshot(module)
    memfit.from_torch(module, example(), path=tmp_path / "cnn.onnx")
    changed = [name for name, tensor in module.state_dict().items()
               if not torch.equal(tensor, before[name])]
    assert changed == []
    # The file holds the module's statistics too, not those of the export's forward pass.
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper
    initializers = {i.name: numpy_helper.to_array(i) for i in onnx.load(tmp_path / "cnn.onnx").graph.initializer}
    for name in ("1.running_mean", "1.running_var", "0.weight"):
        assert torch.equal(torch.from_numpy(initializers[name].copy()), before[name]), name


@pytest.mark.parametrize("training", [True, False])
def test_from_torch_restores_the_modules_mode(training):
    module = make_cnn().train(training)
    memfit.from_torch(module, example())
    assert module.training is training


def test_from_torch_checks_its_arguments():
    with pytest.raises(TypeError, match="torch.nn.Module"):
        memfit.from_torch(lambda x: x, example())
    with pytest.raises(TypeError, match="example_inputs"):
        memfit.from_torch(make_cnn(), [example()])
    with pytest.raises(TypeError, match="example_inputs"):
        memfit.from_torch(make_cnn(), ())


def test_the_temporary_file_goes_with_the_model():
    model = memfit.from_torch(make_cnn(), example(), loss="mse")
    assert model.loss == "mse" and model.args()[-2:] == ["--loss", "mse"]
    directory = os.path.dirname(model.path)
    assert os.path.isfile(model.path)
    del model
    gc.collect()
    assert not os.path.exists(directory)
