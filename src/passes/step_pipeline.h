// The passes of a training step, in order: every rewrite a step graph goes
// through between the model's forward graph and the executable
// (src/step/compile_step.h runs them). Each pass has the one interface of
// src/passes/pass.h; `memfit plan --dump-graphs DIR` writes the graph after
// each pass that changed it.
//
// Lowering: what the step computes, and in which layouts.
//  1. fuse_forward_ops     forward ops into the products they follow (--no-fuse: off)
//  2. autodiff             the backward pass of the loss scaled by 1/(accumulate x ranks),
//                          the optimizer's nodes, dead nodes removed, verified
//  3. fuse_gradient_sums   matmuls and slice_grads add into the sums they feed (--no-fuse: off)
//  4. assign_layouts       the backend's blocked layouts, with reorder nodes
//                          (--no-blocked-layouts: off)
// Memory: what is kept, recomputed or swapped, and when each node runs. The
// policies choose the options of these passes under the budget; they plan
// candidate graphs with the planner of the context (the schedule of 9 and
// the memory plan).
//  5. auto                 --policy auto: keep, recompute or swap per activation
//     or recompute         the --recompute strategy (with --mirror)
//  6. swap                 the --swap policy (not with auto, which swaps itself)
//  7. all_reduce           ranks > 1 without --shard: gradient buckets summed
//     or zero_shard        ranks > 1 with --shard (ZeRO); only in the step that
//                          applies the update
//  8. schedule             the memory-aware order of the nodes, kept where its
//                          plan (with in-place reuse and sharing) is smaller;
//                          not where copies or collectives fix the order
// After the pipeline the planner places every value (src/memory/planner.h),
// with in-place reuse where the op table allows, and the backend prepares
// the kernels (Executable::prepare).
//
// A forward graph for evaluation and prediction (no loss gradient, batch norm
// with its running statistics) goes through the forward pipeline:
//  1. dead_nodes           nodes that reach no output removed
//  2. assign_layouts       as 4 above
// and then the planner and Executable::prepare, which try the memory-aware
// order themselves.
//
// The lowering passes run on both graphs of an accumulating step before the
// memory passes, since the planner's state band holds the persistent values
// of both (compile_step).
#pragma once

#include <cstddef>
#include <cstdint>

#include "autodiff/autodiff.h"
#include "memfit/optimizer.h"
#include "memfit/techniques.h"
#include "passes/pass.h"

namespace memfit {

struct StepPipelineOptions {
  bool fuse_forward = true;        // 1
  bool fuse_gradient_sums = true;  // 3
  bool blocked_layouts = true;     // 4
  int64_t accumulate = 1;
  int64_t ranks = 1;
  OptimizerConfig optimizer;
  UpdateMode mode = UpdateMode::apply;
  // The memory techniques (resolve_techniques, include/memfit/step.h).
  bool automatic = false;  // --policy auto: pass 5 is auto, and there is no 6
  Recompute recompute = Recompute::none;
  bool mirror = false;
  Swap swap = Swap::none;
  TflmsOptions tflms;
  // The data-parallel passes (7), for the step that applies the update.
  bool zero = false;            // --shard: zero_shard instead of all_reduce
  bool zero_gradients = false;  // --shard gradients (stage 2)
  size_t bucket_bytes = 0;
  int64_t rank = 0;  // the communicator's rank (zero_shard's block)
  // false: leave the order to Executable::prepare (tests of single passes).
  bool schedule = true;
};

struct StepPipeline {
  PassPipeline lowering;  // 1-4
  PassPipeline memory;    // 5-8
};

StepPipeline step_pipeline(const StepPipelineOptions& options);

PassPipeline forward_pipeline(bool blocked_layouts);

}  // namespace memfit
