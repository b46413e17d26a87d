#include "step/step_budget.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "memfit/bytes.h"

namespace memfit {
namespace {

// A combination of techniques compiled at the step's budget.
struct Candidate {
  size_t arena = 0;
  std::string flags;  // technique_flags of what it resolved to
  StepSpec spec;      // without a policy, or with --policy auto
};

// "a", "a and b", "a, b and c".
std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  }
  return text;
}

// `flags` as the user can give them beside the rest of their command line:
// with the flags of their own they must drop, where those conflict.
std::string as_given(const Candidate& c, const StepSpec& user) {
  std::vector<std::string> drop;
  if (c.spec.policy == Policy::automatic) {
    // Auto chooses every technique itself.
    if (user.recompute) drop.push_back("--recompute");
    if (user.swap) drop.push_back("--swap");
    if (user.mirror) drop.push_back("--mirror");
  } else {
    if (user.policy) {
      StepSpec inside = c.spec;
      inside.policy = user.policy;
      if (!resolve_techniques(inside)) {
        drop.push_back("--policy " + std::string(name_of(*user.policy)));
      }
    }
    // A --mirror or --swap of the user's own would stay beside flags that leave it out.
    if (user.mirror && !c.spec.mirror) drop.push_back("--mirror");
    if (user.swap.value_or(Swap::none) != Swap::none && c.spec.swap == Swap::none) {
      drop.push_back("--swap");
    }
  }
  // Knobs of a strategy the flags do not name are refused beside them.
  if (!(user.tflms == TflmsOptions{}) && c.spec.swap != Swap::tflms) {
    drop.push_back("the --swap-* knobs");
  }
  if (user.milp_seconds != StepSpec{}.milp_seconds && c.spec.recompute != Recompute::milp) {
    drop.push_back("--milp-seconds");
  }
  return drop.empty() ? c.flags : c.flags + " (without " + joined(drop) + ")";
}

// The arena and flags of each of `tries` that compiles (nullopt where it does
// not). They are independent, and the search runs while a user waits for an
// error, so they compile on up to kMaxSearchThreads threads (each holds a
// step graph of its own), at most --threads or one per core, each taking the
// next one not taken, from the last: auto and the optimal strategies, the
// slowest to plan, come last in `tries` and so start first. Measured costs
// time kernels, and the cuda backend measures its link and holds the GPU's
// library handles: those compile one at a time.
std::vector<std::optional<Candidate>> compile_candidates(const std::vector<StepSpec>& tries,
                                                         const StepSpec& spec) {
  constexpr size_t kMaxSearchThreads = 4;
  std::vector<std::optional<Candidate>> compiled(tries.size());
  std::atomic<size_t> taken{0};
  std::vector<std::exception_ptr> failures;  // an exception of a thread, for the caller
  std::mutex failures_mutex;
  const auto work = [&] {
    try {
      for (size_t k = taken++; k < tries.size(); k = taken++) {
        const size_t i = tries.size() - 1 - k;
        auto step = compile_step(tries[i]);
        if (step) {
          compiled[i] = Candidate{step->apply->plan().arena_bytes,
                                  technique_flags(step->techniques), tries[i]};
        }
      }
    } catch (...) {
      taken = tries.size();  // the others stop after their current one
      const std::lock_guard<std::mutex> lock(failures_mutex);
      failures.push_back(std::current_exception());
    }
  };
  const bool one_at_a_time = spec.cost == CostModel::measured || spec.backend == BackendKind::cuda;
  const size_t cores =
      spec.threads > 0 ? static_cast<size_t>(spec.threads) : std::thread::hardware_concurrency();
  const size_t threads =
      one_at_a_time ? 1 : std::clamp<size_t>(cores, 1, std::min(kMaxSearchThreads, tries.size()));
  std::vector<std::thread> helpers;
  for (size_t k = 1; k < threads; ++k) helpers.emplace_back(work);
  work();
  for (std::thread& helper : helpers) helper.join();
  if (!failures.empty()) std::rethrow_exception(failures.front());
  return compiled;
}

}  // namespace

Status check_step_budget(const CompiledStep& step, bool batch_hint) {
  const StepSpec& spec = step.spec;
  const Techniques& t = step.techniques;
  const size_t arena = step.apply->plan().arena_bytes;
  if (spec.budget == 0 || arena <= spec.budget) return Status::ok();
  const auto bytes = [](size_t b) { return human_bytes(b) + " (" + std::to_string(b) + " bytes)"; };
  // Every recompute strategy but milp (which may take its whole time
  // limit), with and without mirror, without swapping and with the budget
  // swap policy (or the step's own), and --policy auto: compiled at this
  // budget, which those aimed at a budget then plan their smallest for.
  std::vector<StepSpec> tries;
  const std::vector<Swap> swaps = t.swap == Swap::none || t.swap == Swap::budget
                                      ? std::vector<Swap>{Swap::none, Swap::budget}
                                      : std::vector<Swap>{Swap::none, Swap::budget, t.swap};
  for (const Swap swap : swaps) {
    for (const Recompute recompute : {Recompute::none, Recompute::sqrt, Recompute::budget,
                                      Recompute::recursive, Recompute::optimal}) {
      for (const bool mirror : {false, true}) {
        StepSpec other = spec;
        other.policy.reset();
        other.share = t.share;
        other.recompute = recompute;
        other.mirror = mirror;
        other.swap = swap;
        if (swap != Swap::tflms) other.tflms = {};
        tries.push_back(other);
      }
    }
  }
  if (t.share) {
    StepSpec automatic = spec;
    automatic.policy = Policy::automatic;
    automatic.recompute.reset();
    automatic.swap.reset();
    automatic.mirror = false;
    automatic.tflms = {};
    tries.push_back(automatic);
  }
  for (StepSpec& other : tries) other.cost = t.cost;
  Candidate best{arena, technique_flags(t), spec};
  bool own = true;  // the best is the step's own techniques
  // In the order of `tries`, whichever thread compiled them: the first of
  // equal arenas is named, the same on every machine.
  for (std::optional<Candidate>& other : compile_candidates(tries, spec)) {
    if (other && other->arena < best.arena) {
      best = std::move(*other);
      own = false;
    }
  }
  const std::string flags = own ? best.flags : as_given(best, spec);
  std::string message = "the plan needs " + bytes(arena) + " with " + technique_flags(t) +
                        ", over the budget of " + bytes(spec.budget) +
                        "; the smallest arena this plan reaches is " + std::to_string(arena) +
                        " bytes; ";
  if (best.arena <= spec.budget)
    return Status::error(message + flags + " fits in " + bytes(best.arena));
  return Status::error(message + "no strategy fits: the smallest arena any reaches is " +
                       bytes(best.arena) + ", with " + flags + "; give a --budget of at least " +
                       std::to_string(best.arena) + " bytes" +
                       (batch_hint ? ", or a smaller --batch" : ""));
}

}  // namespace memfit
