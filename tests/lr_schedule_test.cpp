// The learning rate's schedule: warmup, then constant, cosine or linear decay
// to the floor.
#include "train/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace memfit {
namespace {

TEST(LrSchedule, CosineWithoutWarmupIsTheHalfCosine) {
  const LrSchedule s = lr_schedule(Schedule::cosine, 0, 0.0f, 0.1f).value();
  constexpr double kPi = 3.14159265358979323846;
  for (int64_t step : {0, 1, 7, 50, 99}) {
    EXPECT_EQ(lr_scale(s, step, 100),
              static_cast<float>(0.5 * (1.0 + std::cos(kPi * static_cast<double>(step) / 100.0))));
  }
  EXPECT_EQ(lr_scale(s, 0, 100), 1.0f);
}

TEST(LrSchedule, WarmupRisesLinearlyThenDecays) {
  const LrSchedule s = lr_schedule(Schedule::cosine, 4, 0.0f, 0.1f).value();
  EXPECT_FLOAT_EQ(lr_scale(s, 0, 104), 0.25f);
  EXPECT_FLOAT_EQ(lr_scale(s, 1, 104), 0.5f);
  EXPECT_FLOAT_EQ(lr_scale(s, 3, 104), 1.0f);
  EXPECT_FLOAT_EQ(lr_scale(s, 4, 104), 1.0f);   // decay starts at the warmup's end
  EXPECT_FLOAT_EQ(lr_scale(s, 54, 104), 0.5f);  // half way through the decay
  EXPECT_LT(lr_scale(s, 103, 104), 0.001f);
}

TEST(LrSchedule, LinearDecayEndsAtTheFloor) {
  const LrSchedule s = lr_schedule(Schedule::linear, 0, 0.01f, 0.1f).value();
  EXPECT_DOUBLE_EQ(s.floor, static_cast<double>(0.01f) / 0.1f);
  EXPECT_FLOAT_EQ(lr_scale(s, 0, 10), 1.0f);
  EXPECT_NEAR(lr_scale(s, 5, 10), 0.55, 1e-6);  // 0.1 + 0.9 * 0.5
  EXPECT_NEAR(lr_scale(s, 10, 10), 0.1, 1e-6);
  EXPECT_NEAR(lr_scale(s, 20, 10), 0.1, 1e-6);  // past the end: the floor
  const LrSchedule cosine = lr_schedule(Schedule::cosine, 0, 0.01f, 0.1f).value();
  EXPECT_NEAR(lr_scale(cosine, 10, 10), 0.1, 1e-6);
}

TEST(LrSchedule, ConstantStaysAfterWarmup) {
  const LrSchedule s = lr_schedule(Schedule::constant, 2, 0.0f, 0.1f).value();
  EXPECT_FLOAT_EQ(lr_scale(s, 0, 10), 0.5f);
  EXPECT_FLOAT_EQ(lr_scale(s, 2, 10), 1.0f);
  EXPECT_FLOAT_EQ(lr_scale(s, 9, 10), 1.0f);
}

TEST(LrSchedule, WarmupLongerThanTheRunNeverDecays) {
  const LrSchedule s = lr_schedule(Schedule::cosine, 20, 0.0f, 0.1f).value();
  EXPECT_FLOAT_EQ(lr_scale(s, 9, 10), 0.5f);
}

TEST(LrSchedule, FloorAboveTheRateIsRefused) {
  const auto above = lr_schedule(Schedule::cosine, 0, 0.2f, 0.1f);
  ASSERT_FALSE(above.is_ok());
  EXPECT_NE(above.message().find("--min-lr 0.2"), std::string::npos) << above.message();
  EXPECT_FALSE(lr_schedule(Schedule::cosine, -1, 0.0f, 0.1f).is_ok());
}

}  // namespace
}  // namespace memfit
