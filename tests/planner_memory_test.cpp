// The planner's resident memory per node of the step graph, and the bound
// docs/cli.md states (memfit plan): planning holds at most 4 KiB per node (the graph,
// its reordered copy, the kernels made for their workspace sizes and two
// memory plans; about 3.5 KiB measured here on lstm-lm at 3200 steps, some
// 120,000 nodes).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "memfit/plan.h"

namespace memfit {
namespace {

constexpr size_t kBytesPerNode = 4096;

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), 0 if absent.
size_t status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

TEST(PlannerMemory, StaysWithinTheBoundPerNode) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory and quarantine are not the planner's";
#endif
  // The high-water mark of this process before planning: the libraries, the
  // op table and the backend; the planner's bytes are what it adds.
  PlanRequest request;
  request.step.model = ModelOptions{.name = "lstm-lm", .batch = 1, .seq_len = 3200};
  request.step.threads = 2;
  const size_t before = status_bytes("VmHWM");
  ASSERT_GT(before, 0u) << "no VmHWM in /proc/self/status";
  auto report = plan_training_step(request);
  ASSERT_TRUE(report.is_ok()) << report.message();
  const size_t peak = status_bytes("VmHWM");
  const size_t nodes = report->num_nodes;
  ASSERT_GT(nodes, 100000u);
  const size_t per_node = (peak - before) / nodes;
  RecordProperty("bytes_per_node", static_cast<int>(per_node));
  EXPECT_LE(per_node, kBytesPerNode) << "planning " << nodes << " nodes raised the high-water mark by "
                                     << (peak - before) << " bytes";
}

}  // namespace
}  // namespace memfit
