// The memory techniques a training step may use, with their knobs, and one
// table of names for every technique enum (src/passes/technique_names.cpp):
// name_of prints a value, parse_name reads one, names_of lists them, in the
// order the command line shows them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memfit/optimizer.h"
#include "memfit/status.h"

namespace memfit {

// Recomputation (gradient checkpointing, Chen et al. 2016): the step keeps
// some forward activations (checkpoints) for the backward pass and computes
// the others again inside it, trading extra forward work for memory.
enum class Recompute {
  none,    // keep every activation the backward pass reads
  sqrt,    // checkpoint every ~sqrt(n)-th of the n values that cut the forward graph
  budget,  // Chen's greedy segments under a byte budget, the budget searched for the
           // smallest arena (or, under a memory budget, the least recomputation that fits)
  optimal,  // dynamic programming over the chain of blocks: least predicted recompute time
  milp,     // Checkmate-style integer program (CBC), for small graphs of any shape
  // Chen's recursion: checkpoints nested in log2(n) levels, O(log n) memory
  recursive,
};

// Where the predicted node times of optimal, milp, auto and `memfit plan`
// come from (src/cost/cost_model.h): the op table's flops and bytes over fixed
// machine constants, or each distinct node timed once on the backend at hand.
enum class CostModel { roofline, measured };

// Swapping to host memory (Meng et al. 2017, TFLMS): forward activations that
// the backward pass reads again are copied to a host pool after their last
// forward use and copied back, prefetched, before their first backward use
// (src/passes/swap.h). The policy picks which ones.
enum class Swap {
  none,      // keep every activation on the device
  refcount,  // Meng et al.: every activation whose idle span (from its last forward
             // use to its first backward use) covers the step's peak and is long
             // enough to hide the copy out and back behind compute
  budget,    // the activations with the most bytes x idle seconds first, the fewest
             // that make the arena fit the memory budget (all of them without one)
  tflms,     // TFLMS (Le et al. 2018): the first n_tensors in producer order, each
             // swap-in triggered lb..ub nodes before its consumer (TflmsOptions)
};

// The families of memory techniques a step may use (`--policy`), from none to
// all of them. `recompute` and `swap` take the strategy given (default:
// budget, the least that fits the memory budget); `auto` chooses for every
// forward activation the backward pass reads again whether to keep, recompute
// or swap it (src/passes/auto_policy.h).
enum class Policy {
  none,       // every value in a slice of its own: no sharing
  share,      // the memory planner's sharing and in-place reuse, nothing else
  recompute,  // sharing and recomputation
  swap,       // sharing and swapping to host memory
  automatic,  // all of them, chosen per activation ("auto")
};

// TFLMS's knobs (src/passes/swap_tflms.h); read only by Swap::tflms.
enum class TflmsTrigger {
  chain_rule,    // the gradient nodes of the forward op lb hops downstream of the producer
  direct_order,  // the node lb positions before the consumer in the schedule
};
struct TflmsOptions {
  int64_t n_tensors = -1;  // swap only the first n candidates in producer order; -1: all
  int64_t lb = 1;          // a swap-in starts at least lb nodes before its consumer...
  int64_t ub = 10000;      // ...and at most ub
  TflmsTrigger trigger = TflmsTrigger::chain_rule;
  bool fuse = false;             // consumers within ub of one trigger share one swap-in
  bool branches = false;         // also swap forward values between two forward readers
  int64_t branch_threshold = 0;  // ...more than this many positions apart (0: any)
  bool operator==(const TflmsOptions&) const = default;
};
// Errors name the flag: n_tensors < -1, lb < 1, ub < lb, branch_threshold < 0.
Status check_tflms_options(const TflmsOptions& options);
// "n_tensors -1, lb 1, ub 10000, chain_rule, fuse off, branches off": for reports.
std::string tflms_options_text(const TflmsOptions& options);

// Whose kernels, layouts and workspaces a step runs with: oneDNN's on the
// host, the reference's plain loops (the oracle), or a GPU's (cuDNN, cuBLAS
// and memfit's own kernels, src/backends/cuda/).
enum class BackendKind { cpu, reference, cuda };

// The names of the enums above and of the optimizer's: backend (cpu,
// reference, cuda), recompute (none, sqrt,
// budget, recursive, optimal, milp), cost model (roofline, measured), swap
// (none, refcount, budget, tflms), policy (none, share, recompute, swap,
// auto), TFLMS trigger (chain_rule, direct_order), optimizer (sgd, adamw) and
// learning-rate schedule (constant, cosine).
std::string_view name_of(BackendKind value);
std::string_view name_of(Recompute value);
std::string_view name_of(CostModel value);
std::string_view name_of(Swap value);
std::string_view name_of(Policy value);
std::string_view name_of(TflmsTrigger value);
std::string_view name_of(OptimizerConfig::Kind value);
std::string_view name_of(Schedule value);
// The value called `text`; an error lists the names (e.g. "unknown swap
// policy 'x'; use none, refcount, budget or tflms").
template <typename Enum>
Result<Enum> parse_name(std::string_view text);
// Every name of Enum, in the table's order.
template <typename Enum>
std::vector<std::string> names_of();

}  // namespace memfit
