// The training state stays in the step's arena: every zoo model's updates
// are written in place over their state, so a step copies no state; state
// loaded, stepped and stored equals the one-off run's; accumulation's two
// executables hand the state to each other.
#include <gtest/gtest.h>

#include <numeric>

#include "test_util.h"
#include "train/data_source.h"
#include "train/training_program.h"

namespace memfit {
namespace {

// The states whose update is not written over them.
std::string copied_states(const Executable& exe) {
  std::string names;
  for (const StateUpdate& u : exe.graph().updates()) {
    if (exe.plan().value_slices[u.state.idx()].offset != exe.plan().value_slices[u.next.idx()].offset) {
      names += " " + exe.graph().value(u.state).name;
    }
  }
  return names;
}

class StateInArena : public ::testing::TestWithParam<ModelOptions> {};

TEST_P(StateInArena, EveryUpdateIsWrittenInPlace) {
  for (OptimizerConfig::Kind kind : {OptimizerConfig::Kind::sgd, OptimizerConfig::Kind::adamw}) {
    StepSpec spec = testing::test_spec(GetParam());
    spec.optimizer.kind = kind;
    auto program = TrainingProgram::create(spec, GetParam().batch).value();
    const Executable& step = program->step_executable();
    EXPECT_EQ(step.state_copy_bytes(), 0u) << (kind == OptimizerConfig::Kind::sgd ? "sgd" : "adamw") << ":"
                                         << copied_states(step);
  }
}

// Recomputation, swapping and accumulation keep the rule.
TEST_P(StateInArena, EveryUpdateIsWrittenInPlaceUnderTheTechniques) {
  StepSpec recompute = testing::test_spec(GetParam());
  recompute.recompute = Recompute::sqrt;
  StepSpec swap = testing::test_spec(GetParam());
  swap.swap = Swap::tflms;
  const StepSpec accumulate = testing::test_spec(GetParam(), 2);
  for (const StepSpec& spec : {recompute, swap, accumulate}) {
    auto program = TrainingProgram::create(spec, GetParam().batch).value();
    EXPECT_EQ(program->step_executable().state_copy_bytes(), 0u)
        << copied_states(program->step_executable());
  }
}

// Micro-batches of `spec` (4 of them, data seed 11), from the state drawn
// with seed 7; with `reload`, the state goes out to a StateStore and back in
// after every micro-batch. Returns the losses and the final state.
std::pair<std::vector<float>, StateStore> run_micro_batches(const StepSpec& spec, bool reload) {
  auto program = TrainingProgram::create(spec, spec.model.batch).value();
  const Model& model = program->model();
  const int64_t batch = spec.model.batch, micro_batches = 4;
  auto data = synthetic_source(testing::data_kind(model.name), model, batch * micro_batches, batch, 11)
                  .value();
  Batch inputs = Batch::for_model(model);
  StateStore state;
  program->init_state(state, 7);
  EXPECT_TRUE(program->load_state(state).is_ok());
  StepCounters counters;
  std::vector<float> losses;
  std::vector<int64_t> examples(static_cast<size_t>(batch));
  for (int64_t m = 0; m < micro_batches; ++m) {
    std::iota(examples.begin(), examples.end(), m * batch);
    EXPECT_TRUE(data->fill(false, examples, inputs).is_ok());
    losses.push_back(program->micro_step(inputs.feeds(), 3, 1.0f, counters).value());
    if (reload) {
      StateStore out;
      EXPECT_TRUE(program->store_state(out).is_ok());
      EXPECT_TRUE(program->load_state(out).is_ok());
    }
  }
  EXPECT_EQ(counters.optimizer_step, micro_batches / spec.accumulate);
  EXPECT_TRUE(program->store_state(state).is_ok());
  return {losses, state};
}

// The state handed between accumulation's two executables, and kept in the
// arena across steps, equals the state copied out and back every time.
TEST(StateInArenaHandOff, KeptStateEqualsReloadedState) {
  for (const ModelOptions& model : {ModelOptions{.name = "lenet", .batch = 4},
                                    ModelOptions{.name = "resnet18", .batch = 2, .image_size = 16,
                                                 .classes = 4, .width = 4}}) {
    const StepSpec spec = testing::test_spec(model, 2);
    const auto [kept_losses, kept] = run_micro_batches(spec, false);
    const auto [reloaded_losses, reloaded] = run_micro_batches(spec, true);
    EXPECT_EQ(kept_losses, reloaded_losses) << model.name;
    ASSERT_EQ(kept.tensors().size(), reloaded.tensors().size());
    for (const auto& [name, tensor] : kept.tensors()) {
      EXPECT_EQ(tensor, *reloaded.find(name)) << model.name << " " << name;
    }
  }
}

TEST(StateInArenaHandOff, StepsNeedLoadedState) {
  auto program = TrainingProgram::create(testing::test_spec({.name = "mlp", .batch = 2}), 2).value();
  StepCounters counters;
  const auto loss = program->micro_step(Feeds{}, 3, 1.0f, counters);
  ASSERT_FALSE(loss.is_ok());
  EXPECT_NE(loss.message().find("load_state"), std::string::npos) << loss.message();
  StateStore partial;
  program->init_state(partial, 1);
  const std::string dropped = partial.tensors().begin()->first;
  StateStore missing;
  for (const auto& [name, tensor] : partial.tensors()) {
    if (name != dropped) missing[name] = tensor;
  }
  const Status loaded = program->load_state(missing);
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_NE(loaded.message().find(dropped), std::string::npos) << loaded.message();
}

INSTANTIATE_TEST_SUITE_P(Zoo, StateInArena, ::testing::ValuesIn(testing::tiny_zoo()),
                         testing::model_param_name);

}  // namespace
}  // namespace memfit
