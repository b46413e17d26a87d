// The report of a compiled step's plan (include/memfit/plan.h's PlanReport),
// for `memfit plan` and the probes of `memfit maxbatch`.
#pragma once

#include "memfit/plan.h"
#include "step/compile_step.h"

namespace memfit {

// What `step`'s plan holds, with no budget check (the caller decides).
PlanReport plan_report(const CompiledStep& step);

}  // namespace memfit
