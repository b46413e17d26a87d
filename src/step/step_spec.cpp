// Checking a StepSpec and resolving its techniques (include/memfit/step.h).
#include <cmath>

#include "memfit/step.h"
#include "memfit/techniques.h"

namespace memfit {
namespace {

constexpr int kMaxThreads = 1024;
constexpr double kSlowestGbps = 1e-3;
// The most ranks a step is planned for (mpirun or --ranks).
constexpr int64_t kMaxRanks = int64_t{1} << 20;

bool given(std::optional<Recompute> r) { return r.has_value(); }
bool given(std::optional<Swap> s) { return s.has_value(); }

// The flag of the first TFLMS option that differs from its default ("" if none).
std::string first_tflms_knob(const TflmsOptions& given) {
  const TflmsOptions defaults;
  if (given.n_tensors != defaults.n_tensors) return "--swap-n-tensors";
  if (given.lb != defaults.lb) return "--swap-lb";
  if (given.ub != defaults.ub) return "--swap-ub";
  if (given.trigger != defaults.trigger) return "--swap-trigger";
  if (given.fuse != defaults.fuse) return "--swap-fuse";
  if (given.branches != defaults.branches) return "--swap-branches";
  if (given.branch_threshold != defaults.branch_threshold) return "--swap-branch-threshold";
  return "";
}

// Auto takes no technique flags: the advice to use it says to drop them.
constexpr const char* kAutoInstead =
    "--policy auto without --recompute, --swap and --mirror (it chooses per activation)";

}  // namespace

Result<Techniques> resolve_techniques(const StepSpec& spec) {
  const Recompute recompute = spec.recompute.value_or(Recompute::none);
  const Swap swap = spec.swap.value_or(Swap::none);
  Techniques t;
  t.mirror = spec.mirror;
  t.cost = spec.cost;
  if (!spec.policy) {
    t.share = spec.share;
    t.recompute = recompute;
    t.swap = swap;
  } else {
    const Policy policy = *spec.policy;
    const bool recomputes = recompute != Recompute::none || spec.mirror;
    const bool swaps = swap != Swap::none;
    const std::string name(name_of(policy));
    if (!spec.share && policy != Policy::none) {
      return Status::error("--no-sharing means --policy none; give one of them");
    }
    switch (policy) {
      case Policy::none:
      case Policy::share:
        if (recomputes || swaps) {
          return Status::error("--policy " + name + " allows neither recomputation nor swapping; " +
                               "use --policy " + (swaps ? "swap" : "recompute") + ", or " +
                               kAutoInstead);
        }
        t.share = policy == Policy::share;
        break;
      case Policy::recompute:
        if (swaps) {
          return Status::error(
              std::string("--policy recompute does not swap; give --recompute and --swap "
                          "without --policy to combine them, or ") +
              kAutoInstead);
        }
        t.recompute = spec.recompute.value_or(Recompute::budget);
        break;
      case Policy::swap:
        if (recomputes) {
          return Status::error(
              std::string("--policy swap does not recompute; give --recompute (or --mirror) and "
                          "--swap without --policy to combine them, or ") +
              kAutoInstead);
        }
        t.swap = spec.swap.value_or(Swap::budget);
        break;
      case Policy::automatic:
        if (recomputes || swaps || given(spec.recompute) || given(spec.swap)) {
          return Status::error(
              "--policy auto chooses recomputation and swapping per activation itself; drop "
              "--recompute, --swap and --mirror, or use --policy recompute or swap");
        }
        t.automatic = true;
        break;
    }
  }
  if (t.swap != Swap::tflms) {
    std::string knob = first_tflms_knob(spec.tflms);
    if (!knob.empty()) {
      return Status::error(knob + " is a knob of --swap tflms: the TFLMS options apply only to " +
                           "--swap tflms; add it or drop " + knob);
    }
  }
  if (spec.tflms.branch_threshold != TflmsOptions{}.branch_threshold && !spec.tflms.branches) {
    return Status::error(
        "--swap-branch-threshold is a knob of --swap-branches: add it or drop the threshold");
  }
  return t;
}

Status check_step_spec(const StepSpec& spec) {
  if (spec.model.batch < 1) return Status::error("--batch must be at least 1");
  if (spec.accumulate < 1) return Status::error("--accumulate must be at least 1");
  if (spec.threads < 0) return Status::error("--threads must not be negative");
  if (spec.threads > kMaxThreads) {
    return Status::error("--threads must be at most " + std::to_string(kMaxThreads) +
                         " (0: one per core)");
  }
  if (spec.model.classes == 1) {
    return Status::error(
        "--classes must be at least 2 (0: the model's): one class has nothing to "
        "learn");
  }
  if (spec.fastest_kernels && spec.backend != BackendKind::cuda) {
    return Status::error(
        "--fastest-kernels chooses cuDNN's and cuBLAS's algorithms: it needs "
        "--backend cuda");
  }
  if (spec.optimizer.lr < 0.0f || std::isnan(spec.optimizer.lr)) {
    return Status::error("--lr must be positive");
  }
  if (!(spec.milp_seconds > 0)) return Status::error("--milp-seconds must be positive");
  // Slower links than 1 MB/s would make a copy's pacing overflow its clock.
  if (spec.link_gbps < 0 || std::isnan(spec.link_gbps) ||
      (spec.link_gbps > 0 && spec.link_gbps < kSlowestGbps)) {
    return Status::error("--link-gbps must be 0 (unlimited) or at least 0.001 (1 MB/s)");
  }
  // A bucket's padding to a multiple of the ranks must stay far from int64's end.
  if (spec.ranks < 1 || spec.ranks > kMaxRanks) {
    return Status::error("--ranks must be between 1 and " + std::to_string(kMaxRanks) + ", not " +
                         std::to_string(spec.ranks));
  }
  if (!(spec.bucket_mb >= 0) || spec.bucket_mb > 1e6) {
    return Status::error("--bucket-mb must be between 0 (a bucket per gradient) and 1e6");
  }
  if (spec.comm_gbps < 0 || std::isnan(spec.comm_gbps) ||
      (spec.comm_gbps > 0 && spec.comm_gbps < kSlowestGbps)) {
    return Status::error("--comm-gbps must be 0 (unlimited) or at least 0.001 (1 MB/s)");
  }
  if (spec.shard != Shard::none && spec.accumulate > 1) {
    return Status::error(
        "--shard does not combine with --accumulate yet: accumulate on every "
        "rank with --shard none, or shard with --accumulate 1");
  }
  MEMFIT_RETURN_IF_ERROR(check_tflms_options(spec.tflms));
  return resolve_techniques(spec).status();
}

std::string_view shard_name(Shard shard) {
  switch (shard) {
    case Shard::none:
      return "none";
    case Shard::optimizer:
      return "optimizer";
    case Shard::gradients:
      return "gradients";
  }
  return "?";
}

std::string technique_flags(const Techniques& t) {
  if (t.automatic) return "--policy auto";
  return "--recompute " + std::string(name_of(t.recompute)) + (t.mirror ? " --mirror" : "") +
         (t.swap != Swap::none ? " --swap " + std::string(name_of(t.swap)) : "");
}

std::string_view policy_of(const Techniques& t) {
  if (t.automatic) return "auto";
  if (!t.share) return "none";
  const bool recomputes = t.recompute != Recompute::none || t.mirror;
  const bool swaps = t.swap != Swap::none;
  if (recomputes && swaps) return "recompute+swap";
  return recomputes ? "recompute" : swaps ? "swap" : "share";
}

}  // namespace memfit
