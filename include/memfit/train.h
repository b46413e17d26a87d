// Training: options, the report, and the entry point used by `memfit train`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memfit/builder.h"
#include "memfit/status.h"

namespace memfit {

struct OptimizerConfig {
  enum class Kind { sgd, adamw } kind = Kind::sgd;
  float lr = 0.01f;
  float momentum = 0.9f;      // sgd
  float weight_decay = 0.0f;  // sgd: added to the gradient; adamw: decoupled
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adamw
};

// How the learning rate changes over the run: constant, or cosine decay from
// lr to 0 over all the run's optimizer steps (Loshchilov and Hutter 2017).
enum class Schedule { constant, cosine };

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
std::string_view recompute_name(Recompute recompute);
// none, sqrt, budget, optimal, milp or recursive.
Result<Recompute> parse_recompute(std::string_view text);
std::vector<std::string> recompute_names();

// Where the predicted node times of optimal, milp and `memfit plan` come from
// (src/cost/cost_model.h): the op table's flops and bytes over fixed machine
// constants, or each distinct node timed once on the backend at hand.
enum class CostModel { roofline, measured };
std::string_view cost_model_name(CostModel model);
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
std::string_view swap_name(Swap swap);
// none, refcount, budget or tflms (auto is not built yet).
Result<Swap> parse_swap(std::string_view text);
std::vector<std::string> swap_names();

// The families of memory techniques a step may use (`--policy`), from none to
// all of them. `recompute` and `swap` take the strategy given by --recompute
// or --swap (default: budget, the least that fits the memory budget); `auto`
// chooses for every forward activation the backward pass reads again whether
// to keep, recompute or swap it (src/train/auto_step.h).
enum class Policy {
  none,       // every value in a slice of its own: no sharing
  share,      // the memory planner's sharing and in-place reuse, nothing else
  recompute,  // sharing and recomputation
  swap,       // sharing and swapping to host memory
  automatic,  // all of them, chosen per activation ("auto")
};
std::string_view policy_name(Policy policy);
// none, share, recompute, swap or auto.
Result<Policy> parse_policy(std::string_view text);
std::vector<std::string> policy_names();

// What a step is allowed and asked to do, as the flags resolve it.
struct Techniques {
  bool share = true;
  Recompute recompute = Recompute::none;
  Swap swap = Swap::none;
  bool mirror = false;
  bool automatic = false;  // --policy auto
};
// The techniques of `policy` with the strategies given explicitly (nullopt:
// not given). A strategy outside the policy's family is an error that says
// which policy allows it; e.g. --policy share --recompute sqrt, or --policy
// auto with any explicit strategy (auto chooses for itself).
Result<Techniques> resolve_policy(Policy policy, std::optional<Recompute> recompute,
                                  std::optional<Swap> swap, bool mirror);
// TFLMS's knobs (src/passes/swap_tflms.h); read only by Swap::tflms.
enum class TflmsTrigger {
  chain_rule,    // the gradient nodes of the forward op lb hops downstream of the producer
  direct_order,  // the node lb positions before the consumer in the schedule
};
std::string_view tflms_trigger_name(TflmsTrigger trigger);
// chain_rule or direct_order.
Result<TflmsTrigger> parse_tflms_trigger(std::string_view text);
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

struct TrainOptions {
  ModelOptions model = {.name = "lenet"};  // its batch: examples per micro-batch
  int64_t epochs = 2;
  int64_t stop_after = 0;   // stop after this epoch, as if interrupted (the schedule
                            // still spans `epochs`); 0: run to the end
  int64_t accumulate = 1;   // micro-batches per optimizer step
  OptimizerConfig optimizer;
  Schedule schedule = Schedule::cosine;
  uint64_t seed = 1;
  bool synthetic = false;   // a synthetic data set made for the model, not Fashion-MNIST
  std::string data_dir;     // empty: Debian's /usr/share/datasets/fashion-mnist
  std::string save_path;    // checkpoint written after every epoch; empty: none
  std::string resume_path;  // checkpoint to continue from; empty: start afresh
  std::string backend = "cpu";  // cpu (oneDNN) or reference
  int threads = 0;              // threads of the cpu backend; 0: one per core
  bool plan = true;             // share memory as planned; false: a slice per value
  bool poison = false;          // fill memory with NaN as soon as its value dies
  Recompute recompute = Recompute::none;
  CostModel cost = CostModel::roofline;  // optimal and milp: whose node times they minimize
  double milp_seconds = 30;              // milp: CBC's time limit, in all
  Swap swap = Swap::none;
  TflmsOptions tflms = {};  // --swap tflms: its knobs
  double link_gbps = 0;     // the copy engine's bandwidth limit in GB/s; 0: none
  bool mirror = false;      // also recompute cheap ops for each backward reader (any strategy)
  bool auto_policy = false;  // --policy auto: keep, recompute or swap per activation
  size_t budget = 0;         // the largest step arena allowed; 0: no limit
  int64_t limit = 0;        // Fashion-MNIST: use only the first `limit` training and test
                            // examples (0: all); synthetic: training examples (0: 1024)
  int64_t log_every = 100;  // optimizer steps between progress lines
};

struct TrainReport {
  std::vector<float> losses;  // the loss of every micro-batch, in order, this run only
  std::vector<double> test_accuracy;  // after each epoch run
  double examples_per_second = 0;     // training examples over training time
  size_t arena_bytes = 0;             // the planned arena of a training step
  size_t high_water_bytes = 0;        // the most arena bytes a step touched (measured)
  int64_t optimizer_steps = 0;        // total, including those before a resume
};

// Trains on Fashion-MNIST or synthetic data; `log` receives progress lines.
Result<TrainReport> train(const TrainOptions& options,
                          const std::function<void(const std::string&)>& log);

}  // namespace memfit
