// Training: gradient accumulation equals one large batch; a run resumed from
// a checkpoint repeats the uninterrupted run's losses exactly; bad checkpoints
// are refused.
#include "memfit/train.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"
#include "train/checkpoint.h"
#include "train/training_program.h"

namespace memfit {
namespace {

// Parameters after one optimizer step over 32 examples: one batch of 32, or
// 4 accumulated micro-batches of 8.
StateStore one_step(int64_t batch, int64_t accumulate, const OptimizerConfig& optimizer,
                    const std::vector<float>& images, const std::vector<int32_t>& labels) {
  StepSpec spec;
  spec.model = {.name = "lenet", .batch = batch};
  spec.accumulate = accumulate;
  spec.optimizer = optimizer;
  auto program = TrainingProgram::create(spec, 8).value();
  StateStore state;
  program->init_state(state, 17);
  EXPECT_TRUE(program->load_state(state).is_ok());
  StepCounters counters;
  for (int64_t m = 0; m < accumulate; ++m) {
    const Feeds feeds = {{"images", images.data() + m * batch * 784},
                         {"labels", labels.data() + m * batch}};
    EXPECT_TRUE(program->micro_step(feeds, 17, 1.0f, counters).is_ok());
  }
  EXPECT_EQ(counters.optimizer_step, 1);
  EXPECT_TRUE(program->store_state(state).is_ok());
  return state;
}

TEST(Accumulation, MicroBatchesEqualOneLargeBatch) {
  const auto images = testing::random_normal(32 * 784, 3);
  std::vector<int32_t> labels(32);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>((i * 7) % 10);
  for (auto kind : {OptimizerConfig::Kind::sgd, OptimizerConfig::Kind::adamw}) {
    OptimizerConfig optimizer;
    optimizer.kind = kind;
    optimizer.lr = kind == OptimizerConfig::Kind::sgd ? 0.1f : 0.01f;
    optimizer.weight_decay = 0.01f;
    StateStore whole = one_step(32, 1, optimizer, images, labels);
    StateStore parts = one_step(8, 4, optimizer, images, labels);
    // SGD's update is linear in the gradient: elementwise agreement. AdamW
    // divides by the root of the squared gradient, which turns float rounding
    // in a near-zero gradient into a large relative change of that element's
    // update (up to 2 lr when its sign flips), so it is compared on average.
    const bool sgd = kind == OptimizerConfig::Kind::sgd;
    size_t compared = 0;
    double total_difference = 0;
    for (const auto& [name, data] : whole.tensors()) {
      const std::vector<float>* other = parts.find(name);
      ASSERT_NE(other, nullptr) << name;
      if (name.find(".grad_acc") != std::string::npos) continue;
      for (size_t i = 0; i < data.size(); ++i) {
        const double difference = std::abs(data[i] - (*other)[i]);
        total_difference += difference;
        if (sgd) {
          EXPECT_LE(difference, 1e-6 + 1e-4 * std::abs(data[i])) << name << "[" << i << "]";
        } else {
          EXPECT_LE(difference, 2.0 * optimizer.lr + 1e-6) << name << "[" << i << "]";
        }
      }
      compared += data.size();
    }
    EXPECT_LT(total_difference / static_cast<double>(compared), sgd ? 1e-7 : 1e-3 * optimizer.lr);
    // Accumulators are cleared by the step that applies them.
    for (const auto& [name, data] : parts.tensors()) {
      if (name.find(".grad_acc") == std::string::npos) continue;
      for (float v : data) ASSERT_EQ(v, 0.0f) << name;
      ASSERT_TRUE(whole.find(name) == nullptr);
    }
    EXPECT_GT(compared, 60000u);
  }
}

TrainOptions small_run(const std::string& model) {
  TrainOptions o;
  o.step.model.name = model;
  o.step.model.batch = 50;
  o.limit = 1000;  // 20 micro-batches an epoch, 1000 test images
  o.step.accumulate = 2;
  o.step.optimizer.kind = OptimizerConfig::Kind::adamw;
  o.step.optimizer.lr = 1e-3f;
  o.seed = 5;
  o.log_every = 1000;
  return o;
}

const auto quiet = [](const std::string&) {};

TEST(Resume, GivesTheLossesOfAnUninterruptedRun) {
  // mlp has dropout: the masks depend on the step counter, which the checkpoint keeps.
  TrainOptions whole = small_run("mlp");
  whole.epochs = 2;
  const auto uninterrupted = train(whole, quiet).value();
  ASSERT_EQ(uninterrupted.losses.size(), 40u);

  testing::ScratchDir dir;
  const std::string path = dir.file("resume.ckpt");
  TrainOptions first = whole;
  first.stop_after = 1;
  first.save_path = path;
  const auto part1 = train(first, quiet).value();
  TrainOptions second = whole;
  second.resume_path = path;
  const auto part2 = train(second, quiet).value();

  ASSERT_EQ(part1.losses.size(), 20u);
  ASSERT_EQ(part2.losses.size(), 20u);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(part1.losses[i], uninterrupted.losses[i]) << i;
    EXPECT_EQ(part2.losses[i], uninterrupted.losses[20 + i]) << i;
  }
  EXPECT_EQ(part2.test_accuracy.back(), uninterrupted.test_accuracy.back());
  EXPECT_EQ(part2.optimizer_steps, 20);
  // The losses fall: the model learns.
  EXPECT_LT(uninterrupted.losses.back(), uninterrupted.losses.front());
}

// LeNet keeps its second convolution's weights, their gradient and their
// momentum in the blocked weights layout; its checkpoints hold plain
// tensors, so a resume equals the uninterrupted run bit for bit, and a
// checkpoint resumes under other layouts (as on another ISA) too.
TEST(Resume, CheckpointsOfBlockedWeightsArePlain) {
  TrainOptions whole;
  whole.step.model.name = "lenet";
  whole.step.model.batch = 32;
  whole.synthetic = true;
  whole.limit = 256;
  whole.epochs = 2;
  whole.seed = 3;
  whole.log_every = 1000;
  const auto uninterrupted = train(whole, quiet).value();
  testing::ScratchDir dir;
  const std::string path = dir.file("lenet.ckpt");
  TrainOptions first = whole;
  first.stop_after = 1;
  first.save_path = path;
  ASSERT_TRUE(train(first, quiet).is_ok());
  std::string layouts;
  TrainOptions second = whole;
  second.resume_path = path;
  const auto blocked = train(second, [&](const std::string& line) {
                         if (line.rfind("layouts:", 0) == 0) layouts = line;
                       }).value();
  if (make_cpu_backend()->isa() == "avx2") {  // oneDNN 2.6 takes LeNet's conv2 weights in oi8
    EXPECT_NE(layouts.find(" in oi8"), std::string::npos) << layouts;
  }
  ASSERT_EQ(blocked.losses.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(blocked.losses[i], uninterrupted.losses[8 + i]) << i;
  second.step.blocked_layouts = false;
  const auto plain = train(second, quiet).value();
  ASSERT_EQ(plain.losses.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_NEAR(plain.losses[i], uninterrupted.losses[8 + i], 1e-4 * std::abs(uninterrupted.losses[8 + i])) << i;
  }
}

// A stop request (SIGINT or SIGTERM in `memfit train`) ends the run after the
// current optimizer step with a checkpoint of that position; the resume
// continues at the next micro-batch, with the losses, dropout masks and
// accuracy of the uninterrupted run.
TEST(Resume, AStopRequestCheckpointsTheStepAndTheResumeContinuesThere) {
  TrainOptions whole = small_run("mlp");
  whole.epochs = 2;
  const auto uninterrupted = train(whole, quiet).value();
  ASSERT_EQ(uninterrupted.losses.size(), 40u);
  testing::ScratchDir dir;
  TrainOptions first = whole;
  first.save_path = dir.file("stopped.ckpt");
  int asked = 0;
  first.stop_requested = [&asked] { return ++asked == 3; };  // after the third optimizer step
  const auto part1 = train(first, quiet).value();
  EXPECT_TRUE(part1.stopped);
  ASSERT_EQ(part1.losses.size(), 6u);  // 3 steps of 2 micro-batches
  EXPECT_TRUE(part1.test_accuracy.empty());
  TrainOptions second = whole;
  second.resume_path = first.save_path;
  const auto part2 = train(second, quiet).value();
  EXPECT_FALSE(part2.stopped);
  ASSERT_EQ(part2.losses.size(), 34u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(part1.losses[i], uninterrupted.losses[i]) << i;
  for (size_t i = 0; i < 34; ++i) EXPECT_EQ(part2.losses[i], uninterrupted.losses[6 + i]) << i;
  EXPECT_EQ(part2.test_accuracy, uninterrupted.test_accuracy);
  EXPECT_EQ(part2.optimizer_steps, uninterrupted.optimizer_steps);
  // Asked at an epoch's last step, the run stops after that epoch's evaluation.
  TrainOptions at_end = whole;
  int calls = 0;
  // Epoch 1's first 9 steps ask (the 10th is its last), then its end asks.
  at_end.stop_requested = [&calls] { return ++calls >= 10; };
  const auto epoch1 = train(at_end, quiet).value();
  EXPECT_TRUE(epoch1.stopped);
  EXPECT_EQ(epoch1.losses.size(), 20u);
  EXPECT_EQ(epoch1.test_accuracy.size(), 1u);
}

TEST(Resume, RefusesBadCheckpoints) {
  testing::ScratchDir dir;
  const std::string path = dir.file("bad.ckpt");
  TrainOptions first = small_run("lenet");
  first.epochs = 1;
  first.save_path = path;
  ASSERT_TRUE(train(first, quiet).is_ok());

  // Another model.
  TrainOptions other = small_run("mlp");
  other.resume_path = path;
  auto wrong_model = train(other, quiet);
  ASSERT_FALSE(wrong_model.is_ok());
  EXPECT_NE(wrong_model.message().find("lenet"), std::string::npos) << wrong_model.message();

  // Another optimizer: its state is missing from the checkpoint.
  TrainOptions sgd = small_run("lenet");
  sgd.epochs = 1;
  sgd.step.optimizer.kind = OptimizerConfig::Kind::sgd;
  sgd.resume_path = path;
  auto wrong_optimizer = train(sgd, quiet);
  ASSERT_FALSE(wrong_optimizer.is_ok());
  EXPECT_NE(wrong_optimizer.message().find("is missing"), std::string::npos)
      << wrong_optimizer.message();
  EXPECT_NE(wrong_optimizer.message().find("resume with the --optimizer it was saved with"),
            std::string::npos)
      << wrong_optimizer.message();

  // Another --accumulate (whose accumulators are tensors of the checkpoint
  // too) is named as the flag.
  TrainOptions accumulate = small_run("lenet");
  accumulate.epochs = 1;
  accumulate.step.accumulate = 1;
  accumulate.resume_path = path;
  auto wrong_accumulate = train(accumulate, quiet);
  ASSERT_FALSE(wrong_accumulate.is_ok());
  EXPECT_NE(wrong_accumulate.message().find("--accumulate 2 in the checkpoint, 1 now"),
            std::string::npos)
      << wrong_accumulate.message();

  // Another batch, another schedule length: the position and the schedule
  // depend on them.
  const auto expect_refused = [&](int64_t batch, int64_t epochs, const std::string& why) {
    TrainOptions o = small_run("lenet");
    o.step.model.batch = batch;
    o.epochs = epochs;
    o.resume_path = path;
    auto result = train(o, quiet);
    ASSERT_FALSE(result.is_ok()) << why;
    EXPECT_NE(result.message().find(why), std::string::npos) << result.message();
  };
  expect_refused(25, 1, "(--batch times the ranks) 50 in the checkpoint, 25 now");
  expect_refused(50, 3, "--epochs 1 in the checkpoint, 3 now");

  // The checkpoint edited by hand by `edit`, saved as `name`, and resumed
  // for `epochs`: its file and the run's result.
  const auto resume_edited = [&](const std::string& name, int64_t epochs, const auto& edit) {
    Result<Checkpoint> saved = load_checkpoint(path);
    EXPECT_TRUE(saved) << saved.message();
    edit(*saved);
    const std::string edited_path = dir.file(name);
    EXPECT_TRUE(save_checkpoint(edited_path, *saved).is_ok());
    TrainOptions o = small_run("lenet");
    o.epochs = epochs;
    o.resume_path = edited_path;
    return std::pair{edited_path, train(o, quiet)};
  };

  // A checkpoint whose state holds a NaN is refused by name.
  std::string first_name;
  const auto [nan_path, with_nan] = resume_edited("nan.ckpt", 1, [&](Checkpoint& ck) {
    NamedTensor& first = *std::min_element(
        ck.tensors.begin(), ck.tensors.end(),
        [](const NamedTensor& a, const NamedTensor& b) { return a.name < b.name; });
    first.data.back() = std::numeric_limits<float>::quiet_NaN();
    first_name = first.name;
  });
  ASSERT_FALSE(with_nan.is_ok());
  EXPECT_EQ(with_nan.message(),
            "tensor '" + first_name + "' holds a NaN or an infinity in checkpoint " + nan_path);

  // An optimizer step that does not follow from the micro-batch is refused:
  // AdamW's bias correction and the schedule would read it.
  int64_t micro_step = 0;
  const auto [edited_path, with_edit] = resume_edited("edited.ckpt", 2, [&](Checkpoint& ck) {
    ck.optimizer_step = -3;
    ck.run.epochs = 2;  // a run with an epoch left
    micro_step = ck.micro_step;
  });
  ASSERT_FALSE(with_edit.is_ok());
  EXPECT_NE(with_edit.message().find("its optimizer step -3 disagrees with its micro-batch " +
                                     std::to_string(micro_step)),
            std::string::npos)
      << with_edit.message();

  // Truncated: refused, and the file is left as it was.
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  TrainOptions resume = small_run("lenet");
  resume.resume_path = path;
  resume.save_path = path;
  auto truncated = train(resume, quiet);
  ASSERT_FALSE(truncated.is_ok());
  EXPECT_NE(truncated.message().find(path), std::string::npos) << truncated.message();
  EXPECT_EQ(std::filesystem::file_size(path), size / 2);
}

// A --resume path of any length is quoted whole, in the progress lines and
// in errors (a 256-byte buffer once cut both short).
TEST(Resume, QuotesALongCheckpointPathWhole) {
  testing::ScratchDir dir;
  const std::filesystem::path folder = dir.path() / std::string(200, 'a') / std::string(200, 'b');
  std::filesystem::create_directories(folder);
  const std::string path = (folder / "run.ckpt").string();
  TrainOptions o;
  o.step.model = {.name = "lenet", .batch = 4};
  o.synthetic = true;
  o.limit = 64;  // 16 optimizer steps an epoch
  o.epochs = 1;
  o.save_path = path;
  ASSERT_TRUE(train(o, quiet).is_ok());

  o.save_path.clear();
  o.resume_path = path;
  std::vector<std::string> lines;
  auto done = train(o, [&](const std::string& line) { lines.push_back(line); });
  ASSERT_FALSE(done.is_ok());
  EXPECT_EQ(done.message(), "checkpoint " + path +
                                " is after epoch 1, and the run ends with epoch 1: nothing is "
                                "left to train");
  EXPECT_NE(
      std::find(lines.begin(), lines.end(), "resumed from " + path + " after epoch 1 (step 16)"),
      lines.end());
}

// At --lr 10 lenet's parameters overflow to NaN within the first epoch, yet
// the loss stays finite (a ReLU passes a NaN on as 0): the state, checked
// after each epoch, stops the run.
TEST(Train, StopsWhenTheParametersDivergeThoughTheLossIsFinite) {
  TrainOptions o;
  o.step.model = {.name = "lenet", .batch = 4};
  o.step.optimizer.lr = 10.0f;
  o.synthetic = true;
  o.limit = 64;
  o.epochs = 1;
  auto run = train(o, quiet);
  ASSERT_FALSE(run.is_ok());
  EXPECT_NE(run.message().find("holds a NaN or an infinity after epoch 1"), std::string::npos)
      << run.message();
}

TEST(Train, RejectsBadOptions) {
  TrainOptions o = small_run("lenet");
  o.step.accumulate = 0;
  EXPECT_FALSE(train(o, quiet).is_ok());
  o = small_run("lenet");
  o.step.model.name = "nonexistent";
  auto unknown = train(o, quiet);
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.message().find("unknown model"), std::string::npos);
  o = small_run("lenet");
  o.data_path = "/nonexistent/dir";
  auto missing = train(o, quiet);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.message().find("dataset-fashion-mnist"), std::string::npos);
  // Examples per step past any data set, with a product past int64 (it once
  // wrapped round to a small number and reached an unrelated check).
  o = small_run("lenet");
  o.step.accumulate = INT64_C(1) << 61;
  auto huge = train(o, quiet);
  ASSERT_FALSE(huge.is_ok());
  EXPECT_EQ(huge.message(),
            "--batch times --accumulate is more than any data set's 2^32 - 1 examples");
}

}  // namespace
}  // namespace memfit

namespace memfit {
namespace {

// The planned arena (shared buffers, in-place writes, freed bytes poisoned
// with NaN) gives the same losses, bit for bit, as a slice per value.
TEST(PlannedMemory, GivesBitIdenticalLossesWithPoison) {
  for (const std::string model : {"lenet", "mlp"}) {
    TrainOptions planned = small_run(model);
    planned.epochs = 1;
    planned.poison = true;
    TrainOptions unplanned = planned;
    unplanned.step.share = false;
    unplanned.poison = false;
    const auto a = train(planned, quiet).value();
    const auto b = train(unplanned, quiet).value();
    ASSERT_EQ(a.losses.size(), b.losses.size());
    for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_EQ(a.losses[i], b.losses[i]) << model << " " << i;
    EXPECT_EQ(a.test_accuracy, b.test_accuracy);
    // The executor touches exactly the planned arena, which sharing makes smaller.
    EXPECT_EQ(a.high_water_bytes, a.arena_bytes);
    EXPECT_EQ(b.high_water_bytes, b.arena_bytes);
    EXPECT_LT(a.arena_bytes, b.arena_bytes);
  }
}

}  // namespace
}  // namespace memfit
