"""memfit.Trainer against PyTorch (skipped where torch or onnx is not installed):
a small CNN with batch norm, through from_torch, trained 50 steps by SGD with
momentum on batches of one torch DataLoader, in a torch loop and in a
memfit.Trainer from the same initial weights. The losses agree step by step
within LOSS_TOLERANCE (float32 sums in another order; the largest difference
measured on Debian 12's torch 1.13 is in the docstring of the test); predict
and evaluate agree with the module's eval-mode forward pass once load_into
has put the Trainer's weights and running statistics into it.

The same for a small causal language model (a token embedding, learned
positions, two pre-norm blocks of masked self-attention and a GELU MLP, a
final layer norm and a linear head) trained 50 steps by AdamW with decoupled
weight decay under a linear warmup and a cosine decay: torch.optim.AdamW
with a LambdaLR of the same factor against Trainer(optimizer="adamw",
schedule="cosine", warmup_steps=..., min_lr=...)."""

import copy
import math

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


# The language model: tokens (N, SEQ) of VOCAB ids, next-token logits (N, SEQ, VOCAB).
VOCAB, SEQ, WIDTH, HEADS, LAYERS = 16, 8, 16, 2, 2
LM_LR, LM_MIN_LR, LM_WEIGHT_DECAY, LM_WARMUP = 1e-2, 1e-3, 0.01, 10


class Block(torch.nn.Module):
    """Pre-norm masked multi-head self-attention and a GELU MLP, each residual."""

    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(WIDTH)
        self.q = torch.nn.Linear(WIDTH, WIDTH)
        self.k = torch.nn.Linear(WIDTH, WIDTH)
        self.v = torch.nn.Linear(WIDTH, WIDTH)
        self.proj = torch.nn.Linear(WIDTH, WIDTH)
        self.ln2 = torch.nn.LayerNorm(WIDTH)
        self.fc1 = torch.nn.Linear(WIDTH, 4 * WIDTH)
        self.fc2 = torch.nn.Linear(4 * WIDTH, WIDTH)
        self.act = torch.nn.GELU()

    def heads(self, x):  # (N, SEQ, WIDTH) -> (N, HEADS, SEQ, WIDTH / HEADS)
        return x.reshape(x.shape[0], SEQ, HEADS, WIDTH // HEADS).transpose(1, 2)

    def forward(self, x):
        h = self.ln1(x)
        q, k, v = self.heads(self.q(h)), self.heads(self.k(h)), self.heads(self.v(h))
        scores = q @ k.transpose(-2, -1) / math.sqrt(WIDTH // HEADS)
        later = torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1)
        attended = torch.softmax(scores.masked_fill(later, float("-inf")), dim=-1) @ v
        x = x + self.proj(attended.transpose(1, 2).reshape(x.shape[0], SEQ, WIDTH))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(VOCAB, WIDTH)
        self.positions = torch.nn.Parameter(0.1 * torch.randn(SEQ, WIDTH))
        self.blocks = torch.nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.ln = torch.nn.LayerNorm(WIDTH)
        self.head = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        return self.head(self.ln(self.blocks(self.tokens(tokens) + self.positions)))


def make_lm():
    torch.manual_seed(0)
    return TinyLM()


def lm_loader():
    """A DataLoader of STEPS batches of (tokens, next tokens): sequences that
    step by a stride of 1 to 3 modulo VOCAB, a tenth of the tokens replaced
    at random, in a fixed order."""
    g = torch.Generator().manual_seed(1)
    rows = STEPS * BATCH
    start = torch.randint(0, VOCAB, (rows, 1), generator=g)
    stride = torch.randint(1, 4, (rows, 1), generator=g)
    sequences = (start + stride * torch.arange(SEQ + 1)) % VOCAB
    noise = torch.rand(sequences.shape, generator=g) < 0.1
    sequences = torch.where(noise, torch.randint(0, VOCAB, sequences.shape, generator=g), sequences)
    dataset = torch.utils.data.TensorDataset(sequences[:, :-1], sequences[:, 1:])
    return torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=False)


def warmup_cosine(step):
    """The learning rate's factor at optimizer step `step` (from 0), for
    torch's LambdaLR: a linear warmup of LM_WARMUP steps, then cosine from 1
    to LM_MIN_LR / LM_LR at step STEPS."""
    if step < LM_WARMUP:
        return (step + 1) / LM_WARMUP
    floor = LM_MIN_LR / LM_LR
    done = min(step - LM_WARMUP, STEPS - LM_WARMUP)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * done / (STEPS - LM_WARMUP)))


def torch_lm_run(module, data):
    """(losses, learning rates) of AdamW under LambdaLR(warmup_cosine)."""
    optimizer = torch.optim.AdamW(module.parameters(), lr=LM_LR, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=LM_WEIGHT_DECAY)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine)
    module.train()
    losses, rates = [], []
    for tokens, labels in data:
        optimizer.zero_grad()
        logits = module(tokens)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))
        loss.backward()
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses, rates


@pytest.fixture(scope="module")
def trained_lm():
    """(the torch-trained module, its losses and rates, the Trainer, its
    losses and the rate of each of its steps)."""
    module = make_lm()
    model = memfit.from_torch(module, torch.zeros(2, SEQ, dtype=torch.int64))
    trainer = memfit.Trainer(model, batch=BATCH, optimizer="adamw", lr=LM_LR,
                             weight_decay=LM_WEIGHT_DECAY, schedule="cosine",
                             warmup_steps=LM_WARMUP, min_lr=LM_MIN_LR)
    data = lm_loader()
    rates = [trainer.lr]  # each on_step reads the rate of the step after it
    history = trainer.fit(data, epochs=1, log=None, on_step=lambda _: rates.append(trainer.lr))
    reference = copy.deepcopy(module)
    return (reference, *torch_lm_run(reference, data), trainer, history["losses"], rates[:-1])


def test_transformer_losses_agree_with_torch_under_warmup_and_cosine_decay(trained_lm):
    """Measured on Debian 12 (torch 1.13, 2 cores): the largest difference
    of the 50 losses is 1.4e-06 (losses from 2.78 down to 1.65)."""
    _, expected, torch_rates, trainer, losses, rates = trained_lm
    assert trainer.steps == STEPS and trainer.total_steps == STEPS  # fit set it from len(data)
    np.testing.assert_allclose(rates, torch_rates, rtol=1e-6)
    assert rates[0] == pytest.approx(LM_LR / LM_WARMUP) and max(rates) == pytest.approx(LM_LR)
    differences = np.abs(np.array(losses) - np.array(expected))
    print(f"transformer: largest loss difference over {STEPS} steps: {differences.max():.3g}")
    assert differences.max() < LOSS_TOLERANCE, list(zip(losses, expected))
    assert np.mean(losses[-5:]) < 0.75 * np.mean(losses[:5])


def test_transformer_predict_and_evaluate_agree_with_the_modules_eval_forward(trained_lm):
    reference, _, _, trainer, _, _ = trained_lm
    module = make_lm()
    memfit.load_into(module, trainer)
    module.eval()
    tokens, labels = next(iter(lm_loader()))
    for rows in (BATCH, 3):
        with torch.no_grad():
            expected = module(tokens[:rows]).numpy()
        got = trainer.predict(tokens[:rows])
        assert got.shape == (rows, SEQ, VOCAB)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
        result = trainer.evaluate(tokens[:rows], labels[:rows])
        loss = torch.nn.functional.cross_entropy(torch.from_numpy(expected).reshape(-1, VOCAB),
                                                 labels[:rows].reshape(-1)).item()
        assert result["loss"] == pytest.approx(loss, rel=1e-5)
        assert result["accuracy"] == (expected.argmax(-1) == labels[:rows].numpy()).mean()
    # The torch-trained weights are the Trainer's within 50 steps of float32
    # drift (5.5e-6 at most, measured), but the key projections' biases: they
    # move every score of a query by the same amount, which softmax ignores,
    # so their gradient is rounding noise that AdamW divides by its own size.
    state = trainer.state_dict()
    for name, tensor in reference.state_dict().items():
        if not name.endswith(".k.bias"):
            np.testing.assert_allclose(state[name], tensor.numpy(), rtol=1e-3, atol=2e-4,
                                       err_msg=name)
