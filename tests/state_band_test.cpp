// The state band (src/memory/planner.h): persistent inputs at fixed offsets
// at the bottom of the arena, the rest planned above it; and accumulation's
// two executables on one arena, their state in the same bytes, so that
// switching between them copies nothing.
#include <gtest/gtest.h>

#include <set>

#include "memory/planner.h"
#include "step/compile_step.h"
#include "test_util.h"

namespace memfit {
namespace {

StepSpec lenet_accumulating() {
  StepSpec spec;
  spec.model = {.name = "lenet", .batch = 8};
  spec.accumulate = 3;
  return spec;
}

std::set<std::string> persistent_names(const Graph& graph) {
  std::set<std::string> names;
  for (const Value& v : graph.values()) {
    if (!v.producer.valid() && is_persistent(v.role)) names.insert(v.name);
  }
  return names;
}

TEST(StateBand, PlacesTheNamedStateAtItsOffsetsAndTheRestAbove) {
  const CompiledStep step = compile_step(lenet_accumulating()).value();
  const Graph& graph = step.apply->graph();
  std::vector<std::pair<std::string, size_t>> states;
  for (const std::string& name : persistent_names(graph)) {
    states.emplace_back(name, graph.value(graph.find_value(name)).bytes());
  }
  // A slot for a value this graph does not have: left unused.
  states.insert(states.begin(), {"not_in_this_graph", 1000});
  const StateBand band = make_state_band(states);
  EXPECT_EQ(band.offsets.at(states[1].first), align_up(1000));
  const PlanSizes& sizes = step.apply->sizes();
  const MemoryPlan plan = plan_memory(graph, sizes, PlanOptions{.band = band}).value();
  EXPECT_TRUE(verify_plan(graph, sizes, plan).is_ok());
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const Value& value = graph.values()[v];
    const Slice& slice = plan.value_slices[v];
    if (slice.pool != Pool::device) continue;
    auto it = band.offsets.find(value.name);
    if (!value.producer.valid() && it != band.offsets.end()) {
      EXPECT_EQ(slice.offset, it->second) << value.name;
    } else if (plan.inplace_of[v].valid()) {
      continue;  // in the slice of the value it is written over
    } else {
      EXPECT_GE(slice.offset, band.bytes) << value.name;
    }
  }
  // The band costs its own bytes, the rest plans as it did.
  const MemoryPlan free = plan_memory(graph, sizes).value();
  EXPECT_LE(plan.arena_bytes, free.arena_bytes + align_up(1000) + band.bytes);
  EXPECT_GE(plan.arena_bytes, band.bytes);
}

TEST(StateBand, RefusesAValueThatDoesNotFitItsSlot) {
  const CompiledStep step = compile_step(lenet_accumulating()).value();
  const Graph& graph = step.apply->graph();
  const std::string name = *persistent_names(graph).begin();
  const StateBand band = make_state_band({{name, 4}});
  const auto plan = plan_memory(graph, step.apply->sizes(), PlanOptions{.band = band});
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.message().find("does not fit its slot"), std::string::npos) << plan.message();
}

// Both executables of an accumulating step keep every persistent input they
// have at the same offset of one arena: what the micro-batch that only
// accumulates writes, the step that applies reads in place.
TEST(StateBand, AccumulationsTwoExecutablesShareOneArenaAndTheirState) {
  CompiledStep step = compile_step(lenet_accumulating(), StepBuild{.accumulate_only = true}).value();
  ASSERT_NE(step.accumulate_only, nullptr);
  Executable& apply = *step.apply;
  Executable& acc = *step.accumulate_only;
  const std::set<std::string> acc_state = persistent_names(acc.graph());
  ASSERT_FALSE(acc_state.empty());
  for (const std::string& name : acc_state) {
    const ValueId a = apply.graph().find_value(name);
    const ValueId b = acc.graph().find_value(name);
    ASSERT_TRUE(a.valid()) << name;
    EXPECT_EQ(apply.plan().value_slices[a.idx()].offset, acc.plan().value_slices[b.idx()].offset)
        << name;
  }
  ASSERT_TRUE(apply.allocate(true, acc.plan().arena_bytes).is_ok());
  ASSERT_TRUE(acc.allocate_on_arena_of(apply, true).is_ok());
  EXPECT_EQ(apply.arena_capacity(), std::max(apply.plan().arena_bytes, acc.plan().arena_bytes));

  StateStore state;
  for (const std::string& name : persistent_names(apply.graph())) {
    const Value& value = apply.graph().value(apply.graph().find_value(name));
    state[name] = testing::random_normal(static_cast<size_t>(value.elements()), 7);
    if (name.find(".grad_acc") != std::string::npos) std::fill(state[name].begin(), state[name].end(), 0.0f);
  }
  ASSERT_TRUE(apply.load_state(state).is_ok());
  ASSERT_TRUE(acc.copy_state_from(apply).is_ok());  // nothing to copy: the same bytes
  const auto images = testing::random_normal(8 * 784, 3);
  std::vector<int32_t> labels(8, 4);
  const Feeds feeds = {{"images", images.data()}, {"labels", labels.data()}};
  ASSERT_TRUE(acc.run(feeds, StepContext{1, 0, 0, 1.0f}).is_ok());
  // The accumulators the micro-batch wrote are what the applying step holds.
  StateStore seen_by_apply;
  ASSERT_TRUE(apply.store_state(seen_by_apply).is_ok());
  size_t accumulators = 0;
  for (const std::string& name : acc_state) {
    if (name.find(".grad_acc") == std::string::npos) continue;
    ++accumulators;
    const std::vector<float>& written = *seen_by_apply.find(name);
    double sum = 0;
    for (float v : written) sum += std::abs(v);
    EXPECT_GT(sum, 0.0) << name;
  }
  EXPECT_GT(accumulators, 0u);
}

}  // namespace
}  // namespace memfit
