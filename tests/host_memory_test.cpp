// The check of a run's bytes against the machine's memory (core/host_memory.h).
#include "core/host_memory.h"

#include <gtest/gtest.h>

namespace memfit {
namespace {

TEST(HostMemory, TheMachineReportsSomeMemory) {
  EXPECT_GT(available_memory_bytes(), size_t{1} << 20);
}

TEST(HostMemory, RefusesMoreThanIsAvailableNamingBothSizesAndTheFlags) {
  EXPECT_TRUE(check_fits_memory(100, 100, "training").is_ok());
  EXPECT_TRUE(check_fits_memory(size_t{1} << 50, 0, "training").is_ok());  // unknown: no refusal
  const Status status = check_fits_memory(3000, 2048, "training");
  ASSERT_FALSE(status.is_ok());
  for (const char* part : {"training needs", "3000 bytes", "2048 bytes", "--budget", "--batch"}) {
    EXPECT_NE(status.message().find(part), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace memfit
