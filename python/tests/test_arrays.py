"""The trained arrays of memfit.train's result: result["parameters"] and
result["state"] (batch norm's running statistics) hold float32 numpy arrays by the
model's names and shapes, in the model's order, that are views of memory memfit
owns (not copies: owndata is False and their base is memfit's object), equal bit
for bit to the tensors the same run's save= wrote to its checkpoint (read here with
a numpy reader of the checkpoint format), and valid after every other reference to
the result is gone."""

import gc

import numpy as np
import pytest

import memfit

# cnn_small.onnx: a 3x3 convolution to 4 channels, batch norm, pooling, a Gemm to 3.
CNN_SMALL_PARAMETERS = {"conv.weight": (4, 1, 3, 3), "conv.bias": (4,), "bn.weight": (4,),
                        "bn.bias": (4,), "fc.weight": (3, 4), "fc.bias": (3,)}
CNN_SMALL_STATE = {"bn.running_mean": (4,), "bn.running_var": (4,)}
LENET_PARAMETERS = {"conv1.weight": (20, 1, 5, 5), "conv1.bias": (20,),
                    "conv2.weight": (50, 20, 5, 5), "conv2.bias": (50,),
                    "fc1.weight": (500, 800), "fc1.bias": (500,),
                    "fc2.weight": (10, 500), "fc2.bias": (10,)}


def trained_and_saved(tmp_path, read_checkpoint, **settings):
    path = tmp_path / "run.ck"
    result = memfit.train(synthetic=True, epochs=1, limit=32, batch=8, seed=4, log=None,
                          save=path, **settings)
    return result, read_checkpoint(path)


def check_views(arrays, owner_type):
    for name, array in arrays.items():
        assert isinstance(array, np.ndarray), name
        assert array.dtype == np.float32, name
        assert not array.flags.owndata, f"{name} is a copy"
        assert array.flags.c_contiguous, name
        base = array
        while isinstance(base, np.ndarray):
            base = base.base
        assert type(base) is owner_type, f"{name}'s memory belongs to {type(base)}"


def check_against_checkpoint(result, checkpoint):
    parameters, state = result["parameters"], result["state"]
    assert not set(parameters) & set(state)
    # The checkpoint holds the model's tensors and sgd's momentum of each parameter.
    assert set(checkpoint.tensors) == (set(parameters) | set(state) |
                                       {f"{name}.momentum" for name in parameters})
    model_order = [name for name in checkpoint.tensors if name in parameters or name in state]
    assert list(parameters) == [name for name in model_order if name in parameters]
    assert list(state) == [name for name in model_order if name in state]
    for name, array in {**parameters, **state}.items():
        saved = checkpoint.tensors[name]
        assert array.shape == saved.shape, name
        assert np.array_equal(array, saved), f"{name} differs from the checkpoint"


def test_onnx_model_with_batch_norm(onnx_dir, tmp_path, read_checkpoint):
    result, checkpoint = trained_and_saved(tmp_path, read_checkpoint,
                                           model=memfit.Model(onnx_dir / "cnn_small.onnx"))
    assert {n: a.shape for n, a in result["parameters"].items()} == CNN_SMALL_PARAMETERS
    assert {n: a.shape for n, a in result["state"].items()} == CNN_SMALL_STATE
    owner = type(result["parameters"]["conv.weight"].base)
    assert owner.__module__.startswith("memfit")
    check_views(result["parameters"], owner)
    check_views(result["state"], owner)
    check_against_checkpoint(result, checkpoint)
    # Training moved the running statistics from their start (mean 0, variance 1).
    assert not np.array_equal(result["state"]["bn.running_mean"], np.zeros(4, np.float32))
    assert not np.array_equal(result["state"]["bn.running_var"], np.ones(4, np.float32))


def test_zoo_model_with_batch_norm(tmp_path, read_checkpoint):
    result, checkpoint = trained_and_saved(tmp_path, read_checkpoint, model="resnet-cifar",
                                           depth=11, width=4)
    state = result["state"]
    assert state and all(name.endswith((".running_mean", ".running_var")) for name in state)
    assert result["parameters"]["conv1.weight"].shape == (4, 3, 3, 3)
    assert result["parameters"]["fc.weight"].shape == (10, 64)
    check_views(result["parameters"], type(result["parameters"]["fc.weight"].base))
    check_against_checkpoint(result, checkpoint)


def test_model_without_state(tmp_path, read_checkpoint):
    result, checkpoint = trained_and_saved(tmp_path, read_checkpoint, model="lenet")
    assert {n: a.shape for n, a in result["parameters"].items()} == LENET_PARAMETERS
    assert result["state"] == {}
    check_against_checkpoint(result, checkpoint)


def test_arrays_are_distinct_views_of_one_owner():
    result = memfit.train(model="lenet", synthetic=True, epochs=1, limit=16, batch=16, log=None)
    arrays = list(result["parameters"].values())
    assert len({id(a.base) for a in arrays}) == 1, "one object keeps every array's memory"
    spans = sorted((a.ctypes.data, a.ctypes.data + a.nbytes) for a in arrays)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:])), "overlapping arrays"


def test_arrays_outlive_the_result(tmp_path, read_checkpoint):
    result, checkpoint = trained_and_saved(tmp_path, read_checkpoint, model="lenet")
    kept = result["parameters"]["fc1.weight"]
    del result
    gc.collect()
    # Churn the allocator so that freed memory would be reused and overwritten.
    noise = [np.full(kept.shape, np.nan, np.float32) for _ in range(8)]
    other = memfit.train(model="lenet", synthetic=True, epochs=1, limit=32, batch=8, seed=5,
                         log=None)
    del noise, other
    gc.collect()
    assert np.array_equal(kept, checkpoint.tensors["fc1.weight"])
    assert np.isfinite(kept).all()
