#include "train/progress.h"

#include <algorithm>

#include "core/text.h"
#include "runtime/step_profile.h"

namespace memfit {
namespace {

// The data parallel line: the ranks, their rows and the gradient buckets.
std::string ranks_line(const TrainOptions& options, const TrainingProgram& program,
                       const Ranks& ranks) {
  const int64_t batch = options.step.model.batch;
  const AllReduceSummary& sums = program.all_reduce_summary();
  return format(
      "data parallel: %lld ranks (%s), %lld examples per micro-batch (%lld per rank); "
      "gradients summed in %zu buckets (%zu bytes, the largest %zu) of --bucket-mb %g%s",
      static_cast<long long>(ranks.size()), ranks.kind(),
      static_cast<long long>(batch * ranks.size()), static_cast<long long>(batch), sums.buckets,
      sums.bytes, sums.largest_bucket, options.step.bucket_mb,
      options.step.shard == Shard::optimizer   ? "; optimizer state sharded (ZeRO-1)"
      : options.step.shard == Shard::gradients ? "; optimizer state and gradients sharded (ZeRO-2)"
                                               : "");
}

// The lines of what the techniques did to the step: auto's choice, the
// recomputation, the swaps.
void log_techniques(const TrainingProgram& program, const LogFn& log) {
  const Techniques& t = program.techniques();
  if (t.automatic) {
    const AutoSummary& a = program.auto_summary();
    const std::string recomputed =
        auto_recomputed_text(a.choice, a.recomputed_values, a.recompute.recomputed_nodes);
    log(
        format("policy auto: plan %s chosen (%s recomputed, %zu swapped), arena %zu bytes, "
               "predicted step %.6f s",
               a.choice.c_str(), recomputed.c_str(), a.swap.swapped_values, a.arena_bytes,
               a.predicted_step_seconds));
  }
  if (t.recompute != Recompute::none || t.mirror) {
    const RecomputeSummary& r = program.recompute_summary();
    log(format("recompute %s%s: %zu of %zu candidate values checkpointed, %zu nodes recomputed",
               std::string(name_of(t.recompute)).c_str(), t.mirror ? " with mirror" : "",
               r.checkpoints, r.candidates, r.recomputed_nodes));
  }
  if (t.swap != Swap::none) {
    const SwapSummary& s = program.swap_summary();
    log(format("swap %s: %zu of %zu candidate values (%zu bytes) swapped to the host pool%s",
               std::string(name_of(t.swap)).c_str(), s.swapped_values, s.candidates,
               s.swapped_bytes, s.waits_in_order ? ", compute waiting for each copy out" : ""));
    if (t.swap == Swap::tflms) {
      log(format("tflms: %zu swap-ins, %zu branch swaps, %zu chain_rule fallbacks", s.swap_ins,
                 s.branch_swaps, s.trigger_fallbacks));
    }
  }
}

// The lines of the step's kernels, layouts and memory plan.
void log_step(const TrainOptions& options, const TrainingProgram& program, const LogFn& log) {
  log(format("model %s: %zu nodes per step; kernels: %s", options.step.model.name.c_str(),
             program.step_graph().num_nodes(), program.backend_summary().c_str()));
  if (program.layout_summary().blocked_values > 0) {
    const LayoutSummary& layouts = program.layout_summary();
    log(
        format("layouts: %zu values in %s (oneDNN's channel-blocked layout), %zu in %s (its "
               "weights layout: convolution weights, their gradients and state), %zu reorder nodes",
               layouts.blocked_values, std::string(layout_name(program.blocked_layout())).c_str(),
               layouts.weight_values, std::string(layout_name(layouts.weights)).c_str(),
               layouts.reorders));
  }
  log_techniques(program, log);
  const MemoryPlan& plan = program.step_executable().plan();
  log(
      format("memory plan: arena %zu bytes (lower bound %zu, without sharing %zu), host pool %zu "
             "bytes%s",
             plan.arena_bytes, plan.lower_bound_bytes, plan.no_sharing_bytes, plan.host_bytes,
             options.poison ? "; poison mode on" : ""));
}

}  // namespace

void log_run_setup(const TrainOptions& options, const TrainingProgram& program,
                   const DataSource& data, const Ranks& ranks, int64_t eval_batch,
                   const LogFn& log) {
  log(format("data: %s, %lld training and %lld test examples", data.description().c_str(),
             static_cast<long long>(data.train_count()),
             static_cast<long long>(data.test_count())));
  if (program.eval_batch() != eval_batch) {
    log(
        format("evaluation: batches of %lld test examples, not %lld: the largest whose plan fits "
               "--budget",
               static_cast<long long>(program.eval_batch()), static_cast<long long>(eval_batch)));
  }
  if (ranks.size() > 1) log(ranks_line(options, program, ranks));
  if (ranks.size() == 1 && options.check_replicas) {
    log("--check-replicas: one rank, no replicas to compare (start the ranks with mpirun -np N)");
  }
  log_step(options, program, log);
}

EpochProgress::EpochProgress(const TrainOptions& options, const Ranks& ranks, int64_t epoch,
                             int64_t total_steps, Clock::time_point start)
    : options_(options),
      epoch_(epoch),
      total_steps_(total_steps),
      examples_per_micro_batch_(options.step.model.batch * ranks.size()),
      lead_(ranks.lead()),
      window_start_(start),
      step_start_(start) {}

void EpochProgress::add(float loss) {
  window_loss_ += loss;
  step_loss_ += loss;
  ++window_batches_;
}

void EpochProgress::step_done(int64_t step) {
  const auto now = Clock::now();
  const int64_t accumulate = options_.step.accumulate;
  if (options_.on_step && lead_) {
    const double seconds = std::chrono::duration<double>(now - step_start_).count();
    const int64_t step_examples = accumulate * examples_per_micro_batch_;
    options_.on_step(StepRecord{
        .epoch = epoch_ + 1,
        .step = step,
        .steps = total_steps_,
        .loss = step_loss_ / static_cast<double>(accumulate),
        .examples_per_second = seconds > 0 ? static_cast<double>(step_examples) / seconds : 0,
    });
  }
  step_start_ = now;
  step_loss_ = 0;
}

void EpochProgress::log_if_due(int64_t step, bool epoch_end, const LogFn& log) {
  if (step % options_.log_every != 0 && !epoch_end) return;
  const auto now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - window_start_).count();
  log(format("epoch %lld step %lld loss %.4f %.0f examples/s", static_cast<long long>(epoch_ + 1),
             static_cast<long long>(step), window_loss_ / window_batches_,
             static_cast<double>(window_batches_ * examples_per_micro_batch_) / seconds));
  window_start_ = now;
  window_loss_ = 0;
  window_batches_ = 0;
}

void log_run_end(const TrainOptions& options, const TrainingProgram& program, const Ranks& ranks,
                 const LogFn& log) {
  // Rank 0's measurement of the steps that updated the parameters, the
  // first left out (as the profile).
  const RunTotals& totals = program.step_executable().totals();
  if (ranks.size() > 1 && totals.runs > 0 && totals.comm_seconds > 0) {
    const double runs = static_cast<double>(totals.runs);
    log(
        format("all-reduce: %.6f s per step on the communication thread, %.6f s of it not "
               "hidden by the backward pass (%.1f%% hidden); step %.6f s",
               totals.comm_seconds / runs, totals.comm_wait_seconds / runs,
               // Two clocks: a wait a little over the collective's time is 0% hidden.
               100.0 * std::max(0.0, 1.0 - totals.comm_wait_seconds / totals.comm_seconds),
               totals.seconds / runs));
  }
  if (options.profile) {
    const Executable& step = program.step_executable();
    if (step.totals().runs == 0) {
      log("profile: no step after the first one ran; train for more steps to profile");
    } else {
      log(format_profile(profile_runs(step)));
    }
  }
}

}  // namespace memfit
