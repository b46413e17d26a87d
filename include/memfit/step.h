// One training step, fully specified: the model and its size, the batch,
// accumulation, the optimizer, the backend, and every memory technique with
// its knobs and the budget. `memfit train`, `memfit plan` and `memfit
// maxbatch` take the same StepSpec (the command line binds its flags once)
// and build the step the same way (src/step/compile_step.h). The defaults
// here are the only defaults: the command line adds none of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "memfit/builder.h"
#include "memfit/optimizer.h"
#include "memfit/status.h"
#include "memfit/techniques.h"

namespace memfit {

// ZeRO's sharding of a data-parallel step across its ranks
// (src/passes/zero_shard.h): nothing (every rank holds all optimizer state),
// the optimizer state (stage 1), or the optimizer state and the summed
// gradients (stage 2).
enum class Shard { none, optimizer, gradients };
std::string_view shard_name(Shard shard);

struct StepSpec {
  ModelOptions model = {.name = "lenet"};  // its batch: examples per micro-batch
  int64_t accumulate = 1;                  // micro-batches per optimizer step
  OptimizerConfig optimizer;               // lr 0: the optimizer's default
  BackendKind backend = BackendKind::cpu;  // include/memfit/techniques.h
  // cuda: cuDNN's and cuBLAS's fastest algorithms (TF32 tensor cores where
  // the GPU has them, not deterministic); false: the first deterministic
  // FP32 algorithm, so a step gives the same bits every time.
  bool fastest_kernels = false;
  int threads = 0;  // threads of the cpu backend, whose oneDNN workspaces depend on them; 0:
                    // one per core

  // The memory techniques, as given: `policy` names a family and the fields
  // below choose inside it; without a policy they say everything
  // (resolve_techniques).
  std::optional<Policy> policy;
  bool share = true;  // false: every value and workspace in a slice of its own (policy none)
  bool fuse = true;   // forward ops fused into their products (fuse_forward_ops), and
                      // matmuls and slice_grads add into the gradient sums they feed
                      // (fuse_gradient_sums)
  // The backend's blocked layout for convolution networks' values, with
  // reorder nodes where they meet other ops (assign_layouts); false: all plain.
  bool blocked_layouts = true;
  std::optional<Recompute> recompute;  // nullopt: none, or the policy's default (budget)
  bool mirror = false;       // also recompute cheap ops for each backward reader (any strategy)
  std::optional<Swap> swap;  // nullopt: none, or the policy's default (budget)
  TflmsOptions tflms;        // --swap tflms: its knobs (others: the defaults)
  // The node times that optimal, milp and auto minimize and plans predict.
  // roofline is deterministic, so a plan made twice (by `memfit plan`, then
  // by `memfit train`) makes the same choices; measured times each distinct
  // node on the backend (seconds on a large graph; choices may then differ
  // from run to run as the timings do).
  CostModel cost = CostModel::roofline;
  double milp_seconds = 30;  // milp: CBC's time limit, in all
  size_t budget = 0;         // the largest step arena allowed; 0: no limit
  double link_gbps = 0;      // the host link in GB/s: the copy engine runs no faster, and the swap
                             // policies plan with it; 0: the backend's measured link (cuda),
                             // else unlimited, planned as 10

  // Data parallelism (src/passes/all_reduce.h). `ranks` processes each run
  // this step on their own model.batch rows, with the loss scaled by
  // 1 / (ranks * accumulate); gradients are summed over the ranks in buckets
  // of bucket_mb MB (1e6 bytes), started as the backward pass completes each.
  int64_t ranks = 1;          // 1: no communication
  double bucket_mb = 25;      // as PyTorch's DistributedDataParallel
  double comm_gbps = 0;       // the network per rank in GB/s: the communication thread runs no
                              // faster, and plans predict with it; 0: unlimited, predicted as 10
  Shard shard = Shard::none;  // with ranks > 1; one optimizer for all parameters, accumulate 1
};

// What a spec's technique fields resolve to: what the step does.
struct Techniques {
  bool share = true;
  Recompute recompute = Recompute::none;
  bool mirror = false;
  Swap swap = Swap::none;
  bool automatic = false;  // --policy auto: keep, recompute or swap per activation
  CostModel cost = CostModel::roofline;
};

// The techniques of `spec`. Errors: a strategy outside the policy's family,
// naming the policy that allows it (--policy share --recompute sqrt; --policy
// auto with any explicit strategy, since auto chooses for itself); no sharing
// with a policy other than none; TFLMS knobs without --swap tflms.
Result<Techniques> resolve_techniques(const StepSpec& spec);

// Every setting of `spec` checked, with a message that names the flag:
// batch and accumulate at least 1, threads not negative, a
// learning rate not negative, --fastest-kernels only on cuda, the TFLMS knobs in range, a positive
// milp time limit, a link not negative, ranks at least 1, a bucket size and a network not negative,
// no --shard with --accumulate, and resolve_techniques.
Status check_step_spec(const StepSpec& spec);

// The flags that give `t` ("--policy auto", "--recompute sqrt --mirror --swap budget").
std::string technique_flags(const Techniques& t);
// The --policy `t` amounts to: auto, none (no sharing), share, recompute,
// swap, or recompute+swap (both given explicitly).
std::string_view policy_of(const Techniques& t);

}  // namespace memfit
