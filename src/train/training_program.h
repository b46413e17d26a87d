// The compiled graphs of one training configuration: the step graph(s) and
// the evaluation graph, and the state they share.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "memfit/train.h"
#include "step/compile_step.h"

namespace memfit {

struct StepCounters {
  int64_t micro_step = 0;      // micro-batches run so far
  int64_t optimizer_step = 0;  // optimizer updates so far
};

class TrainingProgram {
 public:
  // The step of `spec` (compile_step), refused when its arena is over the
  // spec's budget (check_step_budget). With accumulate = K > 1, micro-batches
  // add their gradients (of the loss scaled by 1/K) to persistent
  // accumulators, and every K-th one also updates the parameters and clears
  // the accumulators. The evaluation graph is the model at batch eval_batch,
  // or, when its plan is over the spec's budget, at the largest divisor of
  // eval_batch whose plan fits (eval_batch() says which).
  // `poison`: poison mode (src/runtime/executor.h). With spec.ranks > 1,
  // `comm` (of that size; not owned) sums the gradients over the ranks.
  static Result<std::unique_ptr<TrainingProgram>> create(const StepSpec& spec, int64_t eval_batch,
                                                         bool poison = false,
                                                         Communicator* comm = nullptr);

  // Parameters and model state from their Init (uniform draws keyed by the
  // seed and the value's name), optimizer state and accumulators at zero.
  void init_state(StateStore& state, uint64_t seed) const;
  // Every persistent value with its shape, in a fixed order (checkpoints).
  const std::vector<std::pair<std::string, Shape>>& state_shapes() const { return state_shapes_; }
  // Whether persistent value `name` is model state that is not trained
  // (batch-norm running statistics), rather than a parameter or optimizer state.
  bool is_model_state(const std::string& name) const;

  // The state lives in the step's arena from one micro-batch to the next:
  // load_state copies it in (before the first micro-batch, or to replace it);
  // store_state copies it out as the last micro-batch left it (checkpoints).
  // Both speak of the per-parameter state of state_shapes(); with --shard,
  // load_state keeps this rank's blocks of it, and store_state gathers
  // every rank's: then every rank must call it at once (a collective).
  Status load_state(const StateStore& state);
  Status store_state(StateStore& state) const;

  // Runs one micro-batch (every data input of the model, labels included) on
  // the state in the arena and returns its loss.
  Result<float> micro_step(const Feeds& feeds, uint64_t seed, float lr_scale, StepCounters& counters);
  // The predicted class of each row of the logits and the loss, for a batch
  // of eval_batch examples (labels included), with the current state.
  struct Evaluated {
    std::vector<int32_t> predicted;
    float loss = 0;
  };
  Result<Evaluated> evaluate(const Feeds& feeds);
  // Copies the current state into `exe`, a forward executable of this
  // model (its evaluation's, or one at another batch), as evaluate does.
  Status copy_state_to(Executable& exe) const;

  // The forward model at the training batch and at the evaluation batch
  // (their inputs say what to feed).
  const Model& model() const { return step_.model; }
  const Model& eval_model() const { return eval_model_; }
  // The evaluation's executable (at eval_batch) and the compiled step.
  Executable& eval_executable() { return *eval_; }
  const CompiledStep& compiled() const { return step_; }

  // Whether the loss is a cross-entropy (in nats), not a squared error.
  bool loss_in_nats() const;

  int64_t batch() const { return batch_; }
  int64_t eval_batch() const { return eval_batch_; }
  // The planned arena of the step that updates the parameters, and the most
  // arena bytes any step has touched so far.
  size_t arena_bytes() const { return step_.apply->plan().arena_bytes; }
  size_t high_water_bytes() const { return high_water_bytes_; }
  // What the layout pass did to the step graph that updates the parameters.
  const LayoutSummary& layout_summary() const { return step_.passes.layouts; }
  Layout blocked_layout() const { return step_.backend->blocked_layout(); }
  // What recomputation did to the step graph that updates the parameters.
  const RecomputeSummary& recompute_summary() const { return step_.passes.recompute; }
  // What swapping did to the step graph that updates the parameters.
  const SwapSummary& swap_summary() const { return step_.passes.swap; }
  // What --policy auto chose (empty choice without it).
  const AutoSummary& auto_summary() const { return step_.passes.automatic; }
  // The resolved techniques of the step.
  const Techniques& techniques() const { return step_.techniques; }
  // Nodes of the step graph run by each backend, e.g. "cpu 14, reference 9".
  std::string backend_summary() const;
  const Graph& step_graph() const { return step_.apply->graph(); }
  // The executable that updates the parameters (per-node times, backends).
  const Executable& step_executable() const { return *step_.apply; }
  // What the all-reduce pass did (ranks > 1).
  const AllReduceSummary& all_reduce_summary() const { return step_.passes.all_reduce; }
  // Forgets the step executables' times so far (profiles leave out the first step).
  void reset_step_times();
  // Times the step's kernels by the device's clock (Executable::time_kernels):
  // for the profile and the trace.
  Status time_step_kernels() { return step_.apply->time_kernels(); }

 private:
  int64_t batch_ = 0, accumulate_ = 1, eval_batch_ = 0;
  CompiledStep step_;  // apply updates the parameters; accumulate_only (K > 1) only accumulates
  std::unique_ptr<Executable> eval_;
  Model eval_model_;
  std::unordered_map<std::string, Init> init_;
  std::vector<std::pair<std::string, Shape>> state_shapes_;
  size_t high_water_bytes_ = 0;
  // The step executable whose arena holds the newest state (with accumulate
  // > 1 the two take turns; state moves between them when they switch);
  // null until load_state.
  Executable* holder_ = nullptr;
  Communicator* comm_ = nullptr;  // the ranks (data parallel); null: one process
};

}  // namespace memfit
