// Planning a training step without running it: the entry point of `memfit
// plan`. The step graph is the one training builds, sized as the backend lays
// it out, and placed in one arena by the memory planner; the report says how
// large that arena is, how close it is to the lower bound, what it holds, and
// how the live bytes rise and fall over the step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "memfit/bytes.h"
#include "memfit/ir.h"
#include "memfit/status.h"
#include "memfit/step.h"

namespace memfit {

// A step to plan: the same StepSpec `memfit train` runs.
struct PlanRequest {
  StepSpec step;
  // `memfit plan --dump-graphs DIR`: the step graph's IR text after each pass
  // of the pipeline that changed it, as DIR/step-NN-PASS.ir (docs/pipeline.md);
  // empty: none.
  std::string dump_graphs = {};
};

// One node of the schedule: the bytes live while it runs (its inputs, its
// outputs, its workspace and everything kept for later), counted as planned
// (64-byte aligned, an in-place output sharing its input's bytes).
struct TimelinePoint {
  int32_t step = 0;
  std::string node;
  Phase phase = Phase::forward;
  size_t live_bytes = 0;
};

struct PlanReport {
  // What the plan depends on besides the graph: a plan is valid for the
  // machine it was made on (oneDNN picks kernels and workspaces by ISA and
  // thread count).
  std::string backend;  // cpu, reference or cuda
  std::string isa;      // the instruction set oneDNN's kernels use ("none" for reference)
  int threads = 0;      // the threads the kernels were made for
  // The blocked layout of convolution networks' values ("plain": none), how
  // many values are in it, the blocked layout of convolution weights and how
  // many values (weights, their gradients and state) are in it, and how many
  // reorder nodes the step has.
  std::string layout = "plain";
  size_t blocked_values = 0;
  std::string weight_layout = "plain";
  size_t weight_values = 0;
  size_t reorders = 0;
  Techniques techniques;  // what the request's technique settings resolve to
  size_t arena_bytes = 0;        // the planned arena: what the step needs
  size_t host_bytes = 0;         // the planned host pool: swapped-out copies
  size_t lower_bound_bytes = 0;  // the most bytes live at one step: no placement does better
  size_t no_sharing_bytes = 0;   // every value and workspace in a slice of its own
  BytesByRole by_role;           // at peak_step; sums to lower_bound_bytes
  size_t num_nodes = 0;
  size_t checkpoint_candidates = 0;     // forward values that cut the forward graph
  size_t checkpoints = 0;               // of them, those kept for the backward pass
  size_t checkpoint_levels = 0;         // nested levels below the kept ones (recursive, optimal)
  size_t recomputed_nodes = 0;          // clones of forward nodes in the backward pass
  size_t swap_candidates = 0;           // forward activations the backward pass reads again
  size_t swapped_values = 0;            // of them, those swapped to the host pool
  size_t swapped_bytes = 0;             // their bytes
  // The copies out, timed, did not fit the budget: compute waits for each
  // before the next one starts (SwapOptions::waits_in_order).
  bool swap_waits_in_order = false;
  size_t recomputed_values = 0;         // auto: activations recomputed rather than kept
  std::string auto_choice;              // auto: which plan won (src/passes/auto_policy.h)
  size_t swap_ins = 0;                  // to_device copies (one per value unless tflms splits)
  size_t branch_swaps = 0;       // tflms --swap-branches: values swapped between forward readers
  size_t trigger_fallbacks = 0;  // tflms chain_rule: swap-ins placed by direct order instead
  // Predicted by the request's cost model: the whole step (every node, clones
  // included; copies to and from the host on their own stream over the link,
  // src/passes/step_time.h), and the forward work the clones add.
  double predicted_step_seconds = 0;
  double predicted_recompute_seconds = 0;
  // Data parallelism (ranks > 1): the gradient buckets summed over the ranks,
  // their bytes (as laid out), and the network's part of the predicted step
  // (--comm-gbps): the seconds of the sums, and of them the seconds the
  // compute stream waits, the communication the backward pass does not hide.
  int64_t ranks = 1;
  size_t buckets = 0;
  size_t reduced_bytes = 0;
  size_t largest_bucket_bytes = 0;
  double predicted_comm_seconds = 0;
  double predicted_exposed_comm_seconds = 0;
  int32_t peak_step = -1;               // the step where the live bytes reach lower_bound_bytes
  std::string algorithm;                // the heap algorithm whose placement won
  std::vector<TimelinePoint> timeline;  // one per node, in schedule order
};

// Builds the step graph of `request` as training does (with accumulate > 1,
// the micro-batch that applies the update, which holds all the other one
// holds and more), sizes it for the backend, and plans it. An arena over a
// non-zero budget is an error that names the smallest arena any recompute
// strategy reaches, with or without mirror (the smallest budget that can be
// met), and the flags that reach it.
Result<PlanReport> plan_training_step(const PlanRequest& request);

// The dimension `memfit maxbatch` searches (--vary): the examples per
// micro-batch, or the positions per sequence of a sequence model.
enum class Capacity { batch, seq_len };
// --vary's name of `c`: "batch" or "seq-len".
std::string_view capacity_name(Capacity c);

// The largest batch (or, with `vary` = seq_len, the longest sequence) whose
// step fits request.budget (which must be > 0) under the request's other
// settings (sharing, recompute, swap, link), by planning: no step runs and
// no arena is allocated (with --cost measured, each distinct node of each
// probe is timed on the backend, outside the budget). 1 is tried first (an
// error if even it does not fit, naming its arena); then the value doubles
// until a plan does not fit, and bisection finds the largest that does
// (fitting is taken to be monotone in it). A step that cannot be built or
// planned at all is an error at 1; past a value that fits it ends the search
// there, and the report keeps why. The request's value of the varied
// dimension is ignored; the other keeps its value (a model's default
// sequence length where --seq-len is 0).
struct MaxBatchReport {
  Capacity vary = Capacity::batch;
  int64_t max_batch = 0;  // the largest value of `vary` that fits
  PlanReport plan;        // the plan of max_batch
  int plans = 0;          // values planned by the search
  // max_batch is the search's largest probe (2^24): larger values were not tried.
  bool at_search_limit = false;
  // Why the next larger value failed to plan, where it failed for a reason
  // other than the budget (such as a model past kMaxModelValues); else empty.
  std::string larger_refused;
};
// Called after each value the search plans, with what came of it and the
// seconds its plan took (the CLI prints it once a search runs long).
enum class Probe { fits, over_budget, failed };
using MaxBatchProgress = std::function<void(int64_t value, Probe probe, double seconds)>;
Result<MaxBatchReport> find_max_batch(const PlanRequest& request, Capacity vary = Capacity::batch,
                                      const MaxBatchProgress& progress = {});
// As `memfit maxbatch` prints it: text, or one JSON object with at least
// max_batch (max_seq_len when it varied the sequence), arena_bytes,
// host_bytes and predicted_step_seconds.
std::string max_batch_text(const PlanRequest& request, const MaxBatchReport& report);
std::string max_batch_json(const PlanRequest& request, const MaxBatchReport& report);


// The report as `memfit plan` prints it: a table in human units and exact bytes.
std::string plan_report_text(const PlanRequest& request, const PlanReport& report);
// The report as one JSON object, with the request's model, batch and settings.
std::string plan_report_json(const PlanRequest& request, const PlanReport& report);
// The timeline as an SVG image: live MiB over the schedule as a filled step
// plot on phase-shaded bands, the arena and the lower bound as lines.
std::string timeline_svg(const PlanReport& report, const std::string& title);

}  // namespace memfit
