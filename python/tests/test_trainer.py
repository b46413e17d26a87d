"""memfit.Trainer on numpy batches: the loss of lenet falls on a learnable task;
int64 labels give the int32 labels' results exactly; a batch of another size
compiles a step of its own whose loss and outputs are the full batch's on the
same rows; accumulate=2 is one step of the double batch; save and load round
trip; checkpoints go both ways with `memfit train --resume|--save`; every bad
input raises memfit.UsageError naming it and changes nothing; evaluate agrees
with predict; fit drives it over an iterable of batches; the learning rate
follows a warmup and a cosine decay step by step, and the schedule's errors
are the command line's."""

import math


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


def warmup_cosine(step, warmup, total, floor):
    """The factor of the learning rate at optimizer step `step` (from 0):
    (step + 1) / warmup, then cosine from 1 at the warmup's end down to
    `floor` at `total` (memfit train --schedule cosine's, written out here
    to check the engine's)."""
    if step < warmup:
        return (step + 1) / warmup
    done = min(step - warmup, total - warmup)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * done / (total - warmup)))


def test_the_learning_rate_follows_warmup_and_cosine_decay():
    images, labels = learnable(8)
    lr, min_lr, warmup, total = 0.04, 0.004, 3, 10
    trainer = lenet(lr=lr, schedule="cosine", warmup_steps=warmup, min_lr=min_lr, total_steps=total)
    assert trainer.schedule == "cosine" and trainer.total_steps == total
    rates = [trainer.lr]
    for _ in range(total + 2):  # past the end: the floor stays
        trainer.step(images, labels)
        rates.append(trainer.lr)
    expected = [lr * warmup_cosine(step, warmup, total, min_lr / lr) for step in range(total + 3)]
    np.testing.assert_allclose(rates, expected, rtol=1e-6)
    assert rates[0] == pytest.approx(lr / 3) and rates[warmup] == pytest.approx(lr)
    assert rates[-1] == pytest.approx(min_lr)
    # With accumulate=2 the rate moves once an optimizer step, not a micro-batch.
    accumulating = lenet(lr=lr, schedule="cosine", warmup_steps=warmup, min_lr=min_lr,
                         total_steps=total, accumulate=2)
    for step in range(4):
        for _ in range(2):
            assert accumulating.lr == pytest.approx(expected[step], rel=1e-6)
            accumulating.step(images, labels)


def test_setting_lr_replaces_the_rate_the_schedule_scales():
    images, labels = learnable(8)
    trainer = lenet(lr=0.04, schedule="linear", warmup_steps=2, min_lr=0.004, total_steps=6)
    trainer.step(images, labels)
    assert trainer.lr == pytest.approx(0.04)  # step 1: (1 + 1) / 2 of it
    trainer.lr = 0.02
    assert trainer.lr == pytest.approx(0.02)
    for _ in range(3):
        trainer.step(images, labels)
    # step 4 of 6: linear decay from 1 to the floor 0.1, 2 of its 4 steps done
    assert trainer.lr == pytest.approx(0.02 * (0.1 + 0.9 * 0.5), rel=1e-6)


def test_a_warmup_scales_the_first_updates():
    """The first update of a warmup of 4 is a quarter of the plain one (the
    same gradient; SGD's momentum starts at zero), and the runs go apart."""
    images, labels = learnable(32)
    plain, warm = lenet(lr=0.02), lenet(lr=0.02, warmup_steps=4)
    assert plain.schedule == warm.schedule == "constant"
    initial = plain.parameters()
    assert all(np.array_equal(initial[n], v) for n, v in warm.parameters().items())
    first = [t.step(images[:8], labels[:8]) for t in (plain, warm)]
    assert first[0] == first[1]
    for name, before in initial.items():
        np.testing.assert_allclose(warm.parameters()[name] - before,
                                   0.25 * (plain.parameters()[name] - before), rtol=1e-3,
                                   atol=1e-7, err_msg=name)
    losses = [[t.step(images[i * 8:][:8], labels[i * 8:][:8]) for i in range(1, 4)]
              for t in (plain, warm)]
    assert all(abs(a - b) > 1e-6 for a, b in zip(*losses)), losses
    assert plain.lr == warm.lr == pytest.approx(0.02)  # the warmup is over after 4 steps


def test_fit_spans_the_schedule_over_its_steps():
    images, labels = learnable(48)
    batches = [(images[i:i + 8], labels[i:i + 8]) for i in range(0, 48, 8)]
    trainer = lenet(lr=0.02, schedule="linear", warmup_steps=1, min_lr=0.002)
    assert trainer.total_steps is None
    rates = []
    trainer.fit(batches, epochs=2, on_step=lambda record: rates.append(trainer.lr), log=None)
    assert trainer.total_steps == 12
    assert rates[-1] == pytest.approx(0.002) and rates[0] == pytest.approx(0.02)
    with pytest.raises(memfit.UsageError, match="schedule='cosine' decays over total_steps"):
        lenet(schedule="cosine").fit(iter(batches), log=None)


def test_schedule_errors_are_the_command_lines(cli):
    images, labels = learnable(8)
    cases = [({"lr": 0.01, "min_lr": 0.1}, ["--lr", "0.01", "--min-lr", "0.1"]),
             ({"warmup_steps": -1}, ["--warmup-steps", "-1"]),
             ({"schedule": "step"}, ["--schedule", "step"])]
    for settings, flags in cases:
        message = cli("train", "--model", "lenet", "--synthetic", "--batch", "8", *flags).error_message()
        with pytest.raises(memfit.UsageError) as raised:
            lenet(**settings)
        assert str(raised.value) == message, settings
    for schedule in ("cosine", "linear"):
        trainer = lenet(schedule=schedule, warmup_steps=2)
        with pytest.raises(memfit.UsageError, match=f"schedule='{schedule}' decays over total_steps"):
            trainer.step(images, labels)
        assert trainer.steps == 0 and trainer.micro_steps == 0
        trainer.total_steps = 5
        trainer.step(images, labels)
    for bad in (0, -3, 2.5, "5"):
        with pytest.raises(memfit.UsageError, match="total_steps must be a whole number"):
            lenet(total_steps=bad)


def test_a_checkpoint_records_the_schedule_for_the_command_line(cli, tmp_path, read_checkpoint):
    images, labels = learnable(64)
    batches = [(images[i:i + 8], labels[i:i + 8]) for i in range(0, 64, 8)]
    trainer = memfit.Trainer("lenet", batch=8, seed=3, schedule="cosine", warmup_steps=2,
                             total_steps=16)
    trainer.fit(batches, epochs=1, log=None)
    trainer.save(tmp_path / "cosine.ck", epochs=2)
    assert read_checkpoint(tmp_path / "cosine.ck").run[4] == 1  # Schedule::cosine
    args = RUN_ARGS[:-2]  # without --schedule constant
    resumed = cli("train", *args, "--schedule", "cosine", "--warmup-steps", "2", "--resume",
                  tmp_path / "cosine.ck", "--json").json()
    assert resumed["optimizer_steps"] == 16
    refused = cli("train", *args, "--schedule", "constant", "--resume", tmp_path / "cosine.ck")
    assert "--schedule cosine in the checkpoint, constant now" in refused.error_message()
