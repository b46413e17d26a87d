// The learning rate over a run: a linear warmup, then constant, cosine or
// linear decay to a floor (TrainOptions::schedule, warmup_steps, min_lr).
#pragma once

#include <cstdint>

#include "memfit/optimizer.h"
#include "memfit/status.h"
#include "memfit/train.h"

namespace memfit {

struct LrSchedule {
  Schedule kind = Schedule::cosine;
  int64_t warmup_steps = 0;  // steps 0 .. warmup_steps - 1 rise linearly to the full rate
  double floor = 0;          // the factor decay ends at: min_lr over the learning rate, in [0, 1]
};

// The schedule of a run at learning rate `lr` (the optimizer's, resolved):
// an error when min_lr is negative or above it.
Result<LrSchedule> lr_schedule(Schedule kind, int64_t warmup_steps, float min_lr, float lr);

// The schedule of a run's options, at its optimizer's learning rate.
Result<LrSchedule> lr_schedule_of(const TrainOptions& options);

// The factor of the learning rate at optimizer step `step` (from 0) of
// `total`: (step + 1) / warmup_steps during the warmup, then from 1 at the
// warmup's end to `floor` at step `total` by the decay (constant: 1).
float lr_scale(const LrSchedule& schedule, int64_t step, int64_t total);

}  // namespace memfit
