// Exact replay for every model of the zoo: one training step (SGD with
// momentum from zero, so the momentum buffers hold the gradients) of a tiny
// configuration on its synthetic data gives the same loss, gradients,
// parameters and batch-norm running statistics bit for bit with each
// recompute strategy (optimal and milp with the roofline cost model; milp
// where the model is small enough for it), with mirror, and with recursive,
// optimal and milp with mirror, as without recomputation, with poison mode
// on; each rewritten step graph and its plan verify.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>

#include "memfit/builder.h"
#include "memfit/plan.h"
#include "ops/typed_graph.h"
#include "passes/recompute_milp.h"
#include "test_util.h"
#include "train/data_source.h"
#include "train/training_program.h"

namespace memfit {
namespace {

OptimizerConfig sgd() {
  OptimizerConfig o;
  o.lr = 0.1f;
  return o;
}

struct StepRun {
  float loss = 0;
  StateStore state;
  size_t recomputed_nodes = 0;
};

// A step with `recompute` under `budget` (0: none); `refused` (if given) is
// set instead of a test failure when milp refuses the model as too large.
StepRun one_step(const ModelOptions& model, Recompute recompute, bool mirror, size_t budget = 0,
                 bool* refused = nullptr) {
  StepSpec spec = testing::test_spec(model);
  spec.threads = 2;
  spec.recompute = recompute;
  spec.mirror = mirror;
  spec.cost = CostModel::roofline;
  spec.milp_seconds = 1;
  spec.budget = budget;
  auto program = TrainingProgram::create(spec, model.batch, true);
  StepRun run;
  if (refused) {
    *refused = !program && program.message().find("at most") != std::string::npos;
    if (*refused) return run;
  }
  EXPECT_TRUE(program.is_ok()) << program.message();
  if (!program) return run;
  const Executable& exe = (*program)->step_executable();
  EXPECT_TRUE(verify_graph(exe.graph()).is_ok());
  const Status plan_ok = verify_plan(exe.graph(), exe.sizes(), exe.plan());
  EXPECT_TRUE(plan_ok.is_ok()) << plan_ok.message();
  run.recomputed_nodes = (*program)->recompute_summary().recomputed_nodes;
  (*program)->init_state(run.state, 7);
  auto data = synthetic_source(testing::data_kind(model.name), (*program)->model(), model.batch,
                               model.batch, 11);
  EXPECT_TRUE(data.is_ok()) << data.message();
  if (!data) return run;
  Batch batch = Batch::for_model((*program)->model());
  std::vector<int64_t> examples(static_cast<size_t>(model.batch));
  std::iota(examples.begin(), examples.end(), 0);
  EXPECT_TRUE((*data)->fill(false, examples, batch).is_ok());
  StepCounters counters;
  auto loss = (*program)->micro_step(run.state, batch.feeds(), 3, 1.0f, counters);
  EXPECT_TRUE(loss.is_ok()) << loss.message();
  if (loss) run.loss = *loss;
  return run;
}

class ZooRecompute : public ::testing::TestWithParam<ModelOptions> {};

TEST_P(ZooRecompute, EveryStrategyGivesTheSameStepBitForBit) {
  const ModelOptions& model = GetParam();
  const StepRun plain = one_step(model, Recompute::none, false);
  ASSERT_TRUE(std::isfinite(plain.loss));
  size_t names = 0, momentum = 0;
  for (const auto& [name, data] : plain.state.tensors()) {
    ++names;
    momentum += name.find("momentum") != std::string::npos;
  }
  EXPECT_GT(momentum, 0u);  // the gradients are compared
  struct Variant {
    Recompute recompute;
    bool mirror;
  };
  for (const Variant v : {Variant{Recompute::sqrt, false}, Variant{Recompute::budget, false},
                          Variant{Recompute::recursive, false}, Variant{Recompute::optimal, false},
                          Variant{Recompute::milp, false}, Variant{Recompute::none, true},
                          Variant{Recompute::recursive, true}, Variant{Recompute::optimal, true},
                          Variant{Recompute::milp, true}}) {
    const std::string what = model.name + " --recompute " +
                             std::string(name_of(v.recompute)) +
                             (v.mirror ? " --mirror" : "");
    if (v.recompute == Recompute::milp && !milp_available()) continue;
    // optimal and milp aim at sqrt's arena, which a tiny model's plain step
    // may meet: without mirror (whose clones they make anyway) they run
    // under the smallest arena they reach instead.
    size_t budget = 0;
    if ((v.recompute == Recompute::optimal || v.recompute == Recompute::milp) && !v.mirror) {
      PlanRequest request;
      request.step.model = model;
      request.step.optimizer = sgd();
      request.step.recompute = v.recompute;
      request.step.mirror = v.mirror;
      request.step.cost = CostModel::roofline;
      request.step.milp_seconds = 1;
      request.step.budget = 1;
      auto planned = plan_training_step(request);
      ASSERT_FALSE(planned.is_ok()) << what;
      if (planned.message().find("at most") != std::string::npos) continue;  // milp: too large
      budget = testing::smallest_arena_in(planned.message());
      ASSERT_GT(budget, 0u) << planned.message();
    }
    bool refused = false;
    const StepRun run = one_step(model, v.recompute, v.mirror, budget, &refused);
    if (refused) continue;  // more droppable nodes than milp takes
    // Mirror alone may find nothing to do (lenet: relu reads a conv output
    // that nothing in the backward pass reads).
    if (v.recompute == Recompute::recursive) {
      EXPECT_GT(run.recomputed_nodes, 0u) << what;
    }
    EXPECT_EQ(testing::as_word(plain.loss), testing::as_word(run.loss)) << what;
    ASSERT_EQ(run.state.tensors().size(), names) << what;
    for (const auto& [name, data] : plain.state.tensors()) {
      const std::vector<float>* other = run.state.find(name);
      ASSERT_NE(other, nullptr) << what << ": " << name;
      ASSERT_EQ(data.size(), other->size()) << what << ": " << name;
      size_t differing = 0;
      for (size_t i = 0; i < data.size(); ++i) {
        differing += testing::as_word(data[i]) != testing::as_word((*other)[i]);
      }
      EXPECT_EQ(differing, 0u) << what << ": " << name;
    }
  }
}

// The tiny sizes of zoo_training_test.
INSTANTIATE_TEST_SUITE_P(
    Tiny, ZooRecompute,
    ::testing::Values(
        ModelOptions{.name = "lenet", .batch = 4}, ModelOptions{.name = "mlp", .batch = 4},
        ModelOptions{.name = "resnet18", .batch = 2, .image_size = 32, .classes = 10, .width = 8},
        ModelOptions{.name = "resnet-cifar", .batch = 2, .image_size = 16, .depth = 11, .width = 8},
        ModelOptions{.name = "vgg16", .batch = 2, .image_size = 32, .classes = 4, .width = 8},
        ModelOptions{
            .name = "lstm-lm", .batch = 2, .depth = 2, .width = 16, .seq_len = 8, .vocab = 16},
        ModelOptions{
            .name = "seq2seq", .batch = 2, .depth = 1, .width = 16, .seq_len = 6, .vocab = 16},
        ModelOptions{.name = "gpt", .batch = 2, .depth = 2, .width = 32, .seq_len = 8, .vocab = 16},
        ModelOptions{
            .name = "transformer", .batch = 2, .depth = 1, .width = 32, .seq_len = 6, .vocab = 16},
        ModelOptions{.name = "unet3d", .batch = 1, .classes = 3, .width = 4, .volume = 16}),
    [](const ::testing::TestParamInfo<ModelOptions>& info) {
      std::string name = info.param.name;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

}  // namespace
}  // namespace memfit
