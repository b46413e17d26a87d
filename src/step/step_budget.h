// Whether a compiled step fits its budget, and if not, what would.
#pragma once

#include "step/compile_step.h"

namespace memfit {

// Ok when `step`'s arena fits its spec's budget (or there is none). Else an
// error naming the arena, the flags that gave it and the budget, and the
// smallest arena any combination of techniques reaches (the smallest budget
// that can be met: compile_step plans such a budget's smallest arena), with
// the flags that reach it, as a command line takes them beside the user's
// other flags. Tried: every recompute strategy but milp (which may take its
// whole time limit), with and without mirror, without swapping, with the
// budget swap policy and with the step's own; and --policy auto. Where no
// combination fits, the error also suggests a smaller --batch when
// `batch_hint` (maxbatch gives false where the batch is its search's).
// Flags of the user's own that the named ones leave out are named to drop
// ("(without --mirror)").
Status check_step_budget(const CompiledStep& step, bool batch_hint = true);

}  // namespace memfit
