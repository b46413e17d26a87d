// The step profile and the Chrome trace: every node counted once, in the
// phase it belongs to; recomputation shows as its own phase; the trace is
// valid JSON with one event per node on the right lane.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <numeric>

#include "ops/op_table.h"
#include "runtime/backend_plan.h"
#include "runtime/step_profile.h"
#include "test_util.h"
#include "train/training_program.h"

namespace memfit {
namespace {

const ProfileRow& phase_row(const StepProfile& profile, const std::string& name) {
  for (const ProfileRow& row : profile.by_phase) {
    if (row.name == name) return row;
  }
  ADD_FAILURE() << "no phase " << name;
  return profile.by_phase.front();
}

// `steps` steps of `program` from its initial state.
void run_steps(TrainingProgram& program, int steps) {
  StateStore state;
  program.init_state(state, 7);
  for (int i = 0; i < steps; ++i) testing::run_synthetic_micro_batches(program, 1, state);
}

// Three steps of lenet at batch 4, with the given recomputation.
std::unique_ptr<TrainingProgram> profiled_lenet(Recompute recompute) {
  StepSpec spec = testing::test_spec({.name = "lenet", .batch = 4});
  spec.recompute = recompute;
  auto program = TrainingProgram::create(spec, 4).value();
  run_steps(*program, 3);
  return program;
}

TEST(StepProfile, CountsEveryNodeOnceInItsPhase) {
  auto program = profiled_lenet(Recompute::none);
  const Executable& exe = program->step_executable();
  const StepProfile profile = profile_runs(exe);
  EXPECT_EQ(profile.steps, 3);
  int64_t phase_nodes = 0, op_nodes = 0;
  double phase_seconds = 0, op_seconds = 0;
  for (const ProfileRow& row : profile.by_phase) {
    phase_nodes += row.nodes;
    if (row.nodes > 0) phase_seconds += row.seconds;
  }
  for (const ProfileRow& row : profile.by_op) {
    op_nodes += row.nodes;
    op_seconds += row.seconds;
    EXPECT_FALSE(row.backends.empty()) << row.name;
  }
  EXPECT_EQ(phase_nodes, static_cast<int64_t>(exe.graph().num_nodes()));
  EXPECT_EQ(op_nodes, static_cast<int64_t>(exe.graph().num_nodes()));  // no copy nodes here
  EXPECT_NEAR(phase_seconds, op_seconds, 1e-9);
  const double kernels = std::accumulate(exe.node_seconds().begin(), exe.node_seconds().end(), 0.0);
  EXPECT_NEAR(op_seconds, kernels / 3, 1e-9);
  EXPECT_GT(phase_row(profile, "forward").nodes, 0);
  EXPECT_GT(phase_row(profile, "backward").nodes, 0);
  EXPECT_EQ(phase_row(profile, "update").nodes, 8);  // lenet's 8 parameters
  EXPECT_EQ(phase_row(profile, "recompute").nodes, 0);
  EXPECT_GT(phase_row(profile, "data in/out").seconds, 0);
  // The kernels and the copies happen inside the step.
  EXPECT_LE(op_seconds + phase_row(profile, "data in/out").seconds, profile.step_seconds);
  for (size_t i = 1; i < profile.by_op.size(); ++i) {
    EXPECT_GE(profile.by_op[i - 1].seconds, profile.by_op[i].seconds);
  }
  const std::string text = format_profile(profile);
  EXPECT_NE(text.find("conv2d_grad_weight"), std::string::npos) << text;
  EXPECT_NE(text.find("backward"), std::string::npos) << text;
}

TEST(StepProfile, RecomputedNodesAreTheirOwnPhase) {
  auto plain = profiled_lenet(Recompute::none);
  auto recomputed = profiled_lenet(Recompute::sqrt);
  const StepProfile a = profile_runs(plain->step_executable());
  const StepProfile b = profile_runs(recomputed->step_executable());
  const int64_t clones = static_cast<int64_t>(recomputed->recompute_summary().recomputed_nodes);
  ASSERT_GT(clones, 0);
  EXPECT_EQ(phase_row(b, "recompute").nodes, clones);
  // The model's own forward nodes are the same ones either way.
  EXPECT_EQ(phase_row(b, "forward").nodes, phase_row(a, "forward").nodes);
}

TEST(StepProfile, ResetForgetsTheStepsSoFar) {
  auto program = profiled_lenet(Recompute::none);
  program->reset_step_times();
  EXPECT_EQ(program->step_executable().totals().runs, 0);
  for (double s : program->step_executable().node_seconds()) EXPECT_EQ(s, 0.0);
  run_steps(*program, 1);
  EXPECT_EQ(profile_runs(program->step_executable()).steps, 1);
}

// A swap_wait is compute waiting for a swap-out's copy (on a GPU its span on
// the kernel clock is that wait): it counts in "copy waits", and "swap
// copies" holds the copies themselves.
TEST(StepProfile, SwapWaitsCountAsCopyWaits) {
  StepSpec spec = testing::test_spec({.name = "lenet", .batch = 4});
  spec.swap = Swap::tflms;
  auto program = TrainingProgram::create(spec, 4).value();
  run_steps(*program, 2);
  const Executable& exe = program->step_executable();
  int64_t waits = 0, copies = 0;
  for (const Node& node : exe.graph().nodes()) {
    waits += node.op == OpKind::swap_wait ? 1 : 0;
    copies += node.op == OpKind::to_host || node.op == OpKind::to_device ? 1 : 0;
  }
  ASSERT_GT(waits, 0) << "the test needs a step with swaps";
  const StepProfile profile = profile_runs(exe);
  EXPECT_EQ(phase_row(profile, "copy waits").nodes, waits);
  EXPECT_EQ(phase_row(profile, "swap copies").nodes, copies);
  int64_t phase_nodes = 0;
  for (const ProfileRow& row : profile.by_phase) phase_nodes += row.nodes;
  EXPECT_EQ(phase_nodes, static_cast<int64_t>(exe.graph().num_nodes()));
}

TEST(StepProfile, TraceHasOneEventPerNodeOnItsLane) {
  StepSpec spec = testing::test_spec({.name = "lenet", .batch = 4});
  spec.swap = Swap::tflms;  // every candidate swaps
  auto program = TrainingProgram::create(spec, 4).value();
  run_steps(*program, 1);
  const Executable& exe = program->step_executable();
  const Graph& graph = exe.graph();
  ASSERT_TRUE(has_copy_nodes(graph)) << "the test needs a step with swaps";

  const auto trace = nlohmann::json::parse(chrome_trace_json(exe));
  size_t compute = 0, copies = 0;
  double last_end = 0;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.at("ph") != "X") continue;
    const std::string name = event.at("name");
    const int tid = event.at("tid");
    EXPECT_GE(event.at("dur").get<double>(), 0.0) << name;
    if (event.at("cat") == "data in/out") continue;
    const NodeId id = [&] {
      for (size_t n = 0; n < graph.num_nodes(); ++n) {
        if (graph.nodes()[n].name == name) return NodeId(static_cast<int32_t>(n));
      }
      return NodeId();
    }();
    ASSERT_TRUE(id.valid()) << name;
    const bool copy = op_info(graph.node(id).op).copy;
    EXPECT_EQ(tid, copy ? 2 : 1) << name;
    (copy ? copies : compute) += 1;
    if (!copy) {
      // Compute runs in schedule order on its lane.
      const double start = event.at("ts");
      EXPECT_GE(start + 2e-3, last_end) << name;
      last_end = start + event.at("dur").get<double>();
    }
  }
  EXPECT_EQ(compute + copies, graph.num_nodes());
  EXPECT_GT(copies, 0u);
}

}  // namespace
}  // namespace memfit
