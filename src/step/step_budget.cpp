#include "step/step_budget.h"

#include "memfit/bytes.h"

namespace memfit {

Status check_step_budget(const CompiledStep& step) {
  const StepSpec& spec = step.spec;
  const Techniques& t = step.techniques;
  const size_t arena = step.apply->plan().arena_bytes;
  if (spec.budget == 0 || arena <= spec.budget) return Status::ok();
  const auto bytes = [](size_t b) { return human_bytes(b) + " (" + std::to_string(b) + " bytes)"; };
  size_t best = arena;
  std::string best_flags = technique_flags(t);
  const std::vector<Swap> swaps =
      t.automatic ? std::vector<Swap>{Swap::none, Swap::budget} : std::vector{t.swap};
  for (const Swap swap : swaps) {
    for (const Recompute recompute : {Recompute::none, Recompute::sqrt, Recompute::budget,
                                      Recompute::recursive, Recompute::optimal}) {
      for (bool mirror : {false, true}) {
        if (!t.automatic && recompute == t.recompute && mirror == t.mirror) continue;
        StepSpec other = spec;
        other.policy.reset();
        other.share = t.share;
        other.recompute = recompute;
        other.mirror = mirror;
        other.swap = swap;
        other.cost = t.cost;
        if (swap != Swap::tflms) other.tflms = {};
        auto compiled = compile_step(other);
        if (!compiled) continue;
        const size_t other_arena = compiled->apply->plan().arena_bytes;
        if (other_arena < best) {
          best = other_arena;
          best_flags = technique_flags(compiled->techniques);
        }
      }
    }
  }
  std::string message = "the plan needs " + bytes(arena) + " with " + technique_flags(t) +
                        ", over the budget of " + bytes(spec.budget) +
                        "; the smallest arena this plan reaches is " + std::to_string(arena) +
                        " bytes; ";
  if (best <= spec.budget) return Status::error(message + best_flags + " fits in " + bytes(best));
  return Status::error(message + "no strategy fits: the smallest arena any reaches is " +
                       bytes(best) + ", with " + best_flags + "; give a --budget of at least " +
                       std::to_string(best) + " bytes, or a smaller --batch");
}

}  // namespace memfit
