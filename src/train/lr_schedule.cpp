#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/text.h"

namespace memfit {

Result<LrSchedule> lr_schedule(Schedule kind, int64_t warmup_steps, float min_lr, float lr) {
  if (warmup_steps < 0) return Status::error("--warmup-steps must be 0 or more");
  if (!(min_lr >= 0) || min_lr > lr) {
    return Status::error(format("--min-lr %g must be between 0 and the learning rate %g",
                                static_cast<double>(min_lr), static_cast<double>(lr)));
  }
  return LrSchedule{kind, warmup_steps, lr > 0 ? static_cast<double>(min_lr) / lr : 0.0};
}

Result<LrSchedule> lr_schedule_of(const TrainOptions& options) {
  const OptimizerConfig& optimizer = options.step.optimizer;
  const float lr = optimizer.lr > 0 ? optimizer.lr : default_learning_rate(optimizer.kind);
  return lr_schedule(options.schedule, options.warmup_steps, options.min_lr, lr);
}

float lr_scale(const LrSchedule& schedule, int64_t step, int64_t total) {
  if (step < schedule.warmup_steps) {
    return static_cast<float>(static_cast<double>(step + 1) /
                              static_cast<double>(schedule.warmup_steps));
  }
  if (schedule.kind == Schedule::constant) return 1.0f;
  const int64_t span = total - schedule.warmup_steps;
  const auto done = static_cast<double>(std::min(step - schedule.warmup_steps, span));
  // The fraction of the decay done, as pi * done / span and done / span.
  constexpr double kPi = 3.14159265358979323846;
  const double decay = span <= 0                          ? 0.0
                       : schedule.kind == Schedule::cosine ? 0.5 * (1.0 + std::cos(kPi * done / static_cast<double>(span)))
                                                           : 1.0 - done / static_cast<double>(span);
  return static_cast<float>(schedule.floor + (1.0 - schedule.floor) * decay);
}

}  // namespace memfit
