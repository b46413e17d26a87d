"""memfit.Trainer on numpy batches: the loss of lenet falls on a learnable task;
int64 labels give the int32 labels' results exactly; a batch of another size
compiles a step of its own whose loss and outputs are the full batch's on the
same rows; accumulate=2 is one step of the double batch; save and load round
trip; checkpoints go both ways with `memfit train --resume|--save`; every bad
input raises memfit.UsageError naming it and changes nothing; evaluate agrees
with predict; fit drives it over an iterable of batches."""

import numpy as np
import pytest

import memfit

CLASSES = 10


def learnable(rows, seed=0):
    """Images whose class is a fixed pattern plus noise, and int64 labels."""
    rng = np.random.default_rng(seed)
    patterns = np.random.default_rng(99).standard_normal((CLASSES, 1, 28, 28)).astype(np.float32)
    labels = rng.integers(0, CLASSES, rows)
    images = patterns[labels] + 0.5 * rng.standard_normal((rows, 1, 28, 28)).astype(np.float32)
    return images, labels


def lenet(**settings):
    return memfit.Trainer("lenet", **{"batch": 8, "seed": 5, **settings})


def test_the_trainer_describes_its_step():
    trainer = lenet()
    assert trainer.input_names == ["images", "labels"]
    assert trainer.input_shapes == {"images": (8, 1, 28, 28), "labels": (8,)}
    assert trainer.plan["arena_bytes"] > 0 and trainer.plan["batch"] == 8
    assert trainer.plan["policy"] == "share" and trainer.plan["recompute"] == "none"
    assert trainer.steps == 0 and trainer.lr == 0.05


def test_the_loss_falls():
    trainer = lenet(lr=0.01)
    images, labels = learnable(64)
    losses = [trainer.step(images[i % 8 * 8:][:8], labels[i % 8 * 8:][:8]) for i in range(30)]
    assert all(isinstance(loss, float) for loss in losses)
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), losses
    assert trainer.steps == 30


def test_int64_labels_equal_int32_labels_exactly():
    images, labels = learnable(32)
    results = []
    for dtype in (np.int64, np.int32, np.uint8):
        trainer = lenet()
        losses = [trainer.step(images[i * 8:][:8], labels[i * 8:][:8].astype(dtype)) for i in range(4)]
        results.append((losses, trainer.predict(images[:8])))
    for losses, outputs in results[1:]:
        assert losses == results[0][0]
        assert np.array_equal(outputs, results[0][1])


def test_float64_images_are_converted():
    images, labels = learnable(8)
    a, b = lenet(), lenet()
    assert a.step(images, labels) == b.step(images.astype(np.float64), labels)


def test_a_batch_of_another_size_is_the_full_batch_on_the_same_rows():
    images, labels = learnable(16)
    full, part = lenet(), lenet()
    # Rows 0-3 twice in the full batch: its mean loss and its gradient are
    # those of the four rows alone (lenet has no batch-dependent ops).
    doubled = np.concatenate([images[:4], images[:4]]), np.concatenate([labels[:4], labels[:4]])
    assert full.step(*doubled) == pytest.approx(part.step(images[:4], labels[:4]), rel=1e-5)
    assert part.steps == 1
    # The state moved to the 4-row step and back: the next full batch agrees.
    assert full.step(images[8:], labels[8:]) == pytest.approx(part.step(images[8:], labels[8:]),
                                                              rel=1e-5)
    assert part.steps == 2
    np.testing.assert_allclose(part.predict(images[:8]), full.predict(images[:8]), rtol=1e-4,
                               atol=1e-5)
    # A forward pass of 3 rows is the first 3 rows of the 8-row one.
    np.testing.assert_allclose(part.predict(images[:3]), part.predict(images[:8])[:3], rtol=1e-5,
                               atol=1e-6)


def test_no_plan_of_the_size_fits():
    trainer = lenet(budget=lenet().plan["arena_bytes"])
    images, labels = learnable(16)
    with pytest.raises(memfit.Error, match="a step of 16 rows .*batch is 8"):
        trainer.step(images, labels)
    assert trainer.steps == 0
    trainer.step(images[:8], labels[:8])  # the compiled size still runs


def test_accumulate_2_is_one_step_of_the_double_batch():
    images, labels = learnable(16)
    accumulating = lenet(accumulate=2)
    double = lenet(batch=16)
    first = accumulating.step(images[:8], labels[:8])
    assert accumulating.steps == 0
    second = accumulating.step(images[8:], labels[8:])
    assert accumulating.steps == 1
    assert (first + second) / 2 == pytest.approx(double.step(images, labels), rel=1e-5)
    for name, value in double.parameters().items():
        np.testing.assert_allclose(accumulating.parameters()[name], value, rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def test_save_and_load_round_trip(tmp_path):
    images, labels = learnable(24)
    trainer = lenet()
    for i in range(3):
        trainer.step(images[i * 8:][:8], labels[i * 8:][:8])
    trainer.save(tmp_path / "run.ck")
    other = lenet(seed=6)
    assert not np.array_equal(other.predict(images[:8]), trainer.predict(images[:8]))
    other.load(tmp_path / "run.ck")
    assert other.steps == 3
    assert np.array_equal(other.predict(images[:8]), trainer.predict(images[:8]))
    # The momentum came along: the next steps are the same.
    assert other.step(images[:8], labels[:8]) == trainer.step(images[:8], labels[:8])
    assert np.array_equal(other.predict(images[:8]), trainer.predict(images[:8]))
    with pytest.raises(memfit.Error, match="accumulate"):
        lenet(accumulate=2).load(tmp_path / "run.ck")


RUN_ARGS = ["--model", "lenet", "--synthetic", "--limit", "64", "--batch", "8", "--seed", "3",
            "--epochs", "2", "--schedule", "constant"]


def test_a_python_checkpoint_resumes_with_the_command_line(cli, tmp_path, read_checkpoint):
    images, labels = learnable(64)
    trainer = memfit.Trainer("lenet", batch=8, seed=3)
    batches = [(images[i:i + 8], labels[i:i + 8]) for i in range(0, 64, 8)]
    trainer.fit(batches, epochs=1, log=None)
    trainer.save(tmp_path / "py.ck", epochs=2)
    saved = read_checkpoint(tmp_path / "py.ck")
    assert (saved.epoch, saved.micro_step, saved.optimizer_step) == (1, 8, 8)
    assert saved.run[:6] == (8, 1, 64, 2, 0, 3)
    for name, array in trainer.state_dict().items():
        assert np.array_equal(saved.tensors[name], array), name
    resumed = cli("train", *RUN_ARGS, "--resume", tmp_path / "py.ck", "--json").json()
    assert resumed["optimizer_steps"] == 16 and len(resumed["losses"]) == 8


def test_a_command_line_checkpoint_loads_into_a_trainer(cli, tmp_path, read_checkpoint):
    cli("train", *RUN_ARGS, "--stop-after", "1", "--save", tmp_path / "cli.ck", "--json").json()
    saved = read_checkpoint(tmp_path / "cli.ck")
    trainer = memfit.Trainer("lenet", batch=8, seed=3)
    trainer.load(tmp_path / "cli.ck")
    assert trainer.steps == 8 and trainer.epoch == 1
    for name, array in trainer.state_dict().items():
        assert np.array_equal(saved.tensors[name], array), name
    # Saved again, it resumes as the command line's own checkpoint does.
    trainer.save(tmp_path / "again.ck")
    again = read_checkpoint(tmp_path / "again.ck")
    assert again.run[:6] == saved.run[:6]
    resumed = cli("train", *RUN_ARGS, "--resume", tmp_path / "again.ck", "--json").json()
    original = cli("train", *RUN_ARGS, "--resume", tmp_path / "cli.ck", "--json").json()
    assert resumed["losses"] == original["losses"]


def bad_inputs(images, labels):
    """(call arguments, what the message must name) of inputs a step refuses."""
    return [
        ((images[:, :, :27], labels), r"'images' has shape \(8, 1, 27, 28\).*\(N, 1, 28, 28\)"),
        ((images, labels + CLASSES), r"'labels': element 0 is 1\d, outside \[0, 10\)"),
        ((images, -labels - 1), r"'labels': element 0 is -\d+"),
        ((images.astype(np.int32), labels), r"'images' holds int32"),
        ((images, labels.astype(np.float32)), r"'labels' holds float32"),
        ((images, labels[:7]), r"'labels' has 7 rows .*'images' 8"),
        (({"images": images},), r"'labels' is missing"),
        (({"images": images, "labels": labels, "extra": labels},), r"'extra' is not an input"),
        ((images,), r"'labels' \(the labels\) is missing"),
        (((images, images), labels), r"2 inputs given; the model takes 1 \(images\)"),
        ((images[:0], labels[:0]), r"'images' has shape \(0, 1, 28, 28\)"),
    ]


def test_bad_inputs_raise_usage_errors_and_change_nothing():
    images, labels = learnable(8)
    trainer = lenet()
    trainer.step(images, labels)
    before = trainer.predict(images)
    for args, message in bad_inputs(images, labels):
        for call in (trainer.step, trainer.evaluate):
            with pytest.raises(memfit.UsageError, match=message):
                call(*args)
    with pytest.raises(ValueError, match="'images' has shape"):
        trainer.predict(images[:, 0])
    assert trainer.steps == 1 and trainer.micro_steps == 1
    assert np.array_equal(trainer.predict(images), before)


def test_run_settings_are_refused():
    with pytest.raises(memfit.UsageError, match="epochs= is memfit.train's; give fit"):
        memfit.Trainer("lenet", epochs=2)
    with pytest.raises(memfit.UsageError, match="resume= .*trainer.load"):
        memfit.Trainer("lenet", resume="x.ck")
    with pytest.raises(memfit.UsageError, match="--batch"):
        memfit.Trainer("lenet", batch=0)


def test_evaluate_agrees_with_predict():
    images, labels = learnable(16)
    trainer = lenet()
    for _ in range(5):
        trainer.step(images[:8], labels[:8])
    for rows in (8, 5):
        logits = trainer.predict(images[:rows]).astype(np.float64)
        result = trainer.evaluate(images[:rows], labels[:rows])
        assert result["accuracy"] == np.mean(logits.argmax(1) == labels[:rows])
        shifted = logits - logits.max(1, keepdims=True)
        log_softmax = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
        cross_entropy = -log_softmax[np.arange(rows), labels[:rows]].mean()
        assert result["loss"] == pytest.approx(cross_entropy, rel=1e-5)


def test_the_learning_rate_is_set_between_steps():
    images, labels = learnable(8)
    trainer = lenet()
    trainer.lr = 0.0
    before = trainer.parameters()
    trainer.step(images, labels)
    after = trainer.parameters()
    assert all(np.array_equal(before[n], after[n]) for n in before)
    assert trainer.steps == 1
    trainer.lr = 0.05
    trainer.step(images, labels)
    assert not np.array_equal(trainer.parameters()["conv1.weight"], after["conv1.weight"])
    with pytest.raises(memfit.UsageError, match="lr"):
        trainer.lr = -1


def test_fit_over_batches():
    images, labels = learnable(80, seed=1)
    train = [(images[i:i + 8], labels[i:i + 8]) for i in range(0, 60, 8)]  # the last has 4 rows
    validation = [{"images": images[64:], "labels": labels[64:]}]
    records, lines = [], []
    trainer = lenet(accumulate=2, lr=0.01)
    history = trainer.fit(train, epochs=2, validation=validation, on_step=records.append,
                          log=lines.append)
    assert len(history["losses"]) == 16 and trainer.micro_steps == 16
    assert [r["step"] for r in records] == list(range(1, 9))
    assert [r["epoch"] for r in records] == [1] * 4 + [2] * 4
    assert all(r["steps"] == 8 and r["examples_per_second"] > 0 for r in records)
    assert records[0]["loss"] == pytest.approx(np.mean(history["losses"][:2]))
    assert len(lines) == 2 and lines[1].startswith("epoch 2 done: validation loss ")
    assert lines[1].endswith("%") and "accuracy" in lines[1]
    result = trainer.evaluate(images[64:], labels[64:])
    assert history["validation"][-1]["loss"] == pytest.approx(result["loss"])
    assert trainer.epoch == 2
