// Every node of every zoo model's step runs a cpu kernel on the cpu backend
// (no reference kernel on the hot path), with and without recomputation.
#include <gtest/gtest.h>

#include <map>

#include "step/compile_step.h"
#include "test_util.h"

namespace memfit {
namespace {

// The op kinds that run the reference kernel, with their counts.
std::string reference_ops(const Executable& exe) {
  std::map<std::string, int> counts;
  for (size_t n = 0; n < exe.graph().num_nodes(); ++n) {
    if (exe.node_backends()[n] != "cpu") ++counts[std::string(op_name(exe.graph().nodes()[n].op))];
  }
  std::string out;
  for (const auto& [op, count] : counts) out += " " + op + " x" + std::to_string(count);
  return out;
}

class ZooKernels : public ::testing::TestWithParam<ModelOptions> {};

TEST_P(ZooKernels, EveryNodeRunsACpuKernel) {
  for (Recompute recompute : {Recompute::none, Recompute::sqrt}) {
    StepSpec spec = testing::test_spec(GetParam());
    spec.recompute = recompute;
    spec.accumulate = 2;  // both executables
    const CompiledStep step = compile_step(spec, StepBuild{.accumulate_only = true}).value();
    EXPECT_EQ(reference_ops(*step.apply), "") << name_of(recompute);
    ASSERT_NE(step.accumulate_only, nullptr);
    EXPECT_EQ(reference_ops(*step.accumulate_only), "") << name_of(recompute);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooKernels, ::testing::ValuesIn(testing::tiny_zoo()),
                         testing::model_param_name);

}  // namespace
}  // namespace memfit
