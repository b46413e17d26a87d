// Whether a compiled step fits its budget, and if not, what would.
#pragma once

#include "step/compile_step.h"

namespace memfit {

// Ok when `step`'s arena fits its spec's budget (or there is none). Else an
// error naming the arena, the flags that gave it and the budget, and the
// smallest arena any recompute strategy reaches, with or without mirror (the
// smallest budget that can be met), with the flags that reach it: every
// strategy but milp (which may take its whole time limit) is compiled with
// the step's swap policy; under --policy auto, without swapping and with the
// budget swap policy.
Status check_step_budget(const CompiledStep& step);

}  // namespace memfit
