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
#include <string>

#include "memfit/builder.h"
#include "memfit/plan.h"
#include "ops/typed_graph.h"
#include "passes/recompute_milp.h"
#include "test_util.h"
#include "train/training_program.h"

namespace memfit {
namespace {

using testing::StepRun;

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
  if (refused) {
    *refused = !program && program.message().find("at most") != std::string::npos;
    if (*refused) return {};
  }
  EXPECT_TRUE(program.is_ok()) << program.message();
  return program ? testing::run_step(**program, 1, true) : StepRun{};
}

class ZooRecompute : public ::testing::TestWithParam<ModelOptions> {};

TEST_P(ZooRecompute, EveryStrategyGivesTheSameStepBitForBit) {
  const ModelOptions& model = GetParam();
  const StepRun plain = one_step(model, Recompute::none, false);
  ASSERT_EQ(plain.losses.size(), 1u);
  ASSERT_TRUE(std::isfinite(plain.losses[0]));
  size_t momentum = 0;
  for (const auto& [name, data] : plain.state.tensors()) {
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
      request.step.optimizer = testing::sgd();
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
      EXPECT_GT(run.recompute.recomputed_nodes, 0u) << what;
    }
    testing::expect_identical_steps(plain, run, what);
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
    testing::model_param_name);

}  // namespace
}  // namespace memfit
