// `memfit maxbatch`: the largest batch, or the longest sequence, whose planned
// step fits a budget.
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/text.h"
#include "memfit/plan.h"
#include "passes/auto_policy.h"
#include "step/step_budget.h"
#include "train/plan_report.h"

namespace memfit {
namespace {

// The probes of one search: each value of the varied dimension is compiled
// once, under the budget, and its report (or its error) kept; whether it
// fits is read off its arena.
class BatchProbes {
 public:
  BatchProbes(const StepSpec& spec, Capacity vary, const MaxBatchProgress& progress)
      : spec_(spec), vary_(vary), progress_(progress) {}

  // The report of `value`, or an error for a failure other than the budget.
  Result<const PlanReport*> at(int64_t value) {
    if (auto failed = errors_.find(value); failed != errors_.end()) return failed->second;
    auto found = reports_.find(value);
    if (found == reports_.end()) {
      StepSpec at = spec_;
      (vary_ == Capacity::batch ? at.model.batch : at.model.seq_len) = value;
      const auto start = std::chrono::steady_clock::now();
      Result<CompiledStep> step = compile_step(at);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      if (!step) {
        errors_.emplace(value, step.status());
        if (progress_) progress_(value, Probe::failed, took.count());
        return step.status();
      }
      found = reports_.emplace(value, plan_report(*step)).first;
      if (progress_) {
        const bool fits = found->second.arena_bytes <= spec_.budget;
        progress_(value, fits ? Probe::fits : Probe::over_budget, took.count());
      }
    }
    return &found->second;
  }
  Result<bool> fits(int64_t value) {
    MEMFIT_ASSIGN_OR_RETURN(const PlanReport* report, at(value));
    return report->arena_bytes <= spec_.budget;
  }
  // Why `value` failed to plan; empty if it planned (or was not tried).
  std::string error_at(int64_t value) const {
    auto failed = errors_.find(value);
    return failed == errors_.end() ? std::string() : failed->second.message();
  }
  int plans() const { return static_cast<int>(reports_.size()); }

 private:
  const StepSpec& spec_;
  Capacity vary_;
  const MaxBatchProgress& progress_;
  std::map<int64_t, PlanReport> reports_;
  std::map<int64_t, Status> errors_;
};

std::string seconds_text(double seconds) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6f", seconds);
  return buffer;
}

}  // namespace

std::string_view capacity_name(Capacity c) { return c == Capacity::batch ? "batch" : "seq-len"; }

Result<MaxBatchReport> find_max_batch(const PlanRequest& request, Capacity vary,
                                      const MaxBatchProgress& progress) {
  if (request.step.budget == 0) return Status::error("maxbatch needs a budget: give --budget");
  MEMFIT_RETURN_IF_ERROR(check_step_spec(request.step));
  if (vary == Capacity::seq_len && !request.step.model.onnx.empty()) {
    return Status::error("--vary seq-len needs a zoo sequence model; an ONNX model's sequence "
                         "length is fixed in its file (vary the batch instead)");
  }
  if (vary == Capacity::seq_len) {
    MEMFIT_ASSIGN_OR_RETURN(const ModelInfo info, model_info(request.step.model.name));
    if (info.data != DataKind::tokens && info.data != DataKind::pairs) {
      return Status::error("--vary seq-len needs a sequence model; " + info.name + " reads " +
                           std::string(data_kind_name(info.data)) + " (vary the batch instead)");
    }
  }
  BatchProbes probes(request.step, vary, progress);
  // The smallest batch whose step builds: 1, unless a batch norm then sees
  // one value per channel (ResNet-50 at 32 x 32 ends on a 1 x 1 map); the
  // powers of 2 up to kSmallestTried, else batch 1's error.
  constexpr int64_t kSmallestTried = 64;
  int64_t smallest = 1;
  Result<bool> smallest_fits = probes.fits(1);
  while (!smallest_fits && vary == Capacity::batch && smallest < kSmallestTried) {
    smallest *= 2;
    smallest_fits = probes.fits(smallest);
  }
  if (!smallest_fits) return probes.fits(1).status();
  if (!*smallest_fits) {
    // What would fit, as `memfit plan` says it for that batch.
    StepSpec at = request.step;
    (vary == Capacity::batch ? at.model.batch : at.model.seq_len) = smallest;
    MEMFIT_ASSIGN_OR_RETURN(const CompiledStep step, compile_step(at));
    // Only a sequence search leaves the batch to the user.
    const Status over = check_step_budget(step, vary == Capacity::seq_len);
    return Status::error(
        "even " + std::string(capacity_name(vary)) + " " + std::to_string(smallest) +
        (smallest > 1 ? " (the smallest whose step builds)" : "") + " does not fit the budget of " +
        human_bytes(request.step.budget) + ": " +
        (over.is_ok() ? std::string("its plan changed between two compiles") : over.message()));
  }
  int64_t good = smallest;
  constexpr int64_t kMaxBatch = int64_t{1} << 24;
  // Past a value that fits, one whose step fails to build or plan (a model
  // past its size limit, say) ends the search as one over the budget does.
  int64_t bad = 0;  // 0: none found yet
  for (int64_t b = 2 * smallest; b <= kMaxBatch; b *= 2) {
    const Result<bool> fits = probes.fits(b);
    if (!fits || !*fits) {
      bad = b;
      break;
    }
    good = b;
  }
  while (bad > 0 && bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    const Result<bool> fits = probes.fits(mid);
    (fits && *fits ? good : bad) = mid;
  }
  MaxBatchReport report;
  report.vary = vary;
  report.max_batch = good;
  report.plan = *probes.at(good).value();
  report.plans = probes.plans();
  report.at_search_limit = bad == 0;
  report.larger_refused = probes.error_at(bad);
  return report;
}

std::string max_batch_text(const PlanRequest& request, const MaxBatchReport& report) {
  const PlanReport& p = report.plan;
  const Techniques& t = p.techniques;
  std::string out = "memfit maxbatch: " + request.step.model.name + ", budget " +
                    human_bytes(request.step.budget) + ", sharing " + (t.share ? "on" : "off") +
                    (t.automatic ? std::string()
                                 : ", recompute " + std::string(name_of(t.recompute)) + ", swap " +
                                       std::string(name_of(t.swap))) +
                    ", policy " + std::string(policy_of(t)) +
                    (p.ranks > 1 ? ", one rank of " + std::to_string(p.ranks) + " (--shard " +
                                       std::string(shard_name(request.step.shard)) + ")"
                                 : "") +
                    "\n";
  const bool batch = report.vary == Capacity::batch;
  const std::string larger = batch ? "larger batches" : "longer sequences";
  out += std::string(batch ? "  max batch            " : "  max seq-len          ") +
         std::to_string(report.max_batch) +
         (report.at_search_limit ? " (the search's largest probe: " + larger + " were not tried)"
                                 : "") +
         "\n";
  if (!report.larger_refused.empty()) {
    out += "  larger               " + std::string(capacity_name(report.vary)) + " " +
           std::to_string(report.max_batch + 1) + " does not plan: " + report.larger_refused + "\n";
  }
  if (!batch) out += "  batch                " + std::to_string(request.step.model.batch) + "\n";
  out += "  arena                " + human_bytes(p.arena_bytes) + " (" +
         std::to_string(p.arena_bytes) + " bytes)\n";
  out += "  host pool            " + human_bytes(p.host_bytes) + " (" +
         std::to_string(p.host_bytes) + " bytes)\n";
  out += "  swapped              " + std::to_string(p.swapped_values) + " values\n";
  if (t.swap == Swap::tflms) {
    out += "  tflms                " + tflms_options_text(request.step.tflms) + "\n";
    out += "  swap-ins             " + std::to_string(p.swap_ins) + " (" +
           std::to_string(p.branch_swaps) + " branch swaps, " +
           std::to_string(p.trigger_fallbacks) + " chain_rule fallbacks)\n";
  }
  out += "  recomputed nodes     " + std::to_string(p.recomputed_nodes) + "\n";
  if (t.automatic) {
    out += "  auto's plan          " + p.auto_choice + " (" +
           auto_recomputed_text(p.auto_choice, p.recomputed_values, p.recomputed_nodes) +
           " recomputed, " + std::to_string(p.swapped_values) + " swapped)\n";
  }
  out += "  step time            " + seconds_text(p.predicted_step_seconds) +
         " s (predicted by the " + std::string(name_of(t.cost)) + " cost model, not measured)\n";
  out += std::string(batch ? "  batches planned      " : "  lengths planned      ") +
         std::to_string(report.plans) + "\n";
  return out;
}

std::string max_batch_json(const PlanRequest& request, const MaxBatchReport& report) {
  const PlanReport& p = report.plan;
  const Techniques& t = p.techniques;
  // One key per line, as plan_report_json writes them.
  std::string out = "{\n";
  auto field = [&](const char* key, const std::string& value, bool last = false) {
    out += std::string("  \"") + key + "\": " + value + (last ? "\n" : ",\n");
  };
  auto quoted = [](std::string_view text) { return json_string(text); };
  field("model", quoted(request.step.model.name));
  field("budget_bytes", std::to_string(request.step.budget));
  field("sharing", t.share ? "true" : "false");
  field("recompute", quoted(name_of(t.recompute)));
  field("swap", quoted(name_of(t.swap)));
  field("policy", quoted(policy_of(t)));
  field("auto_choice", quoted(p.auto_choice));
  field("recomputed_values", std::to_string(p.recomputed_values));
  field("ranks", std::to_string(p.ranks));
  field("shard", quoted(shard_name(request.step.shard)));
  if (report.vary == Capacity::batch) {
    field("max_batch", std::to_string(report.max_batch));
  } else {
    field("batch", std::to_string(request.step.model.batch));
    field("max_seq_len", std::to_string(report.max_batch));
  }
  field("at_search_limit", report.at_search_limit ? "true" : "false");
  if (!report.larger_refused.empty()) field("larger_refused", quoted(report.larger_refused));
  field("arena_bytes", std::to_string(p.arena_bytes));
  field("host_bytes", std::to_string(p.host_bytes));
  field("swapped_values", std::to_string(p.swapped_values));
  if (t.swap == Swap::tflms) {
    field("tflms", quoted(tflms_options_text(request.step.tflms)));
    field("swap_ins", std::to_string(p.swap_ins));
    field("branch_swaps", std::to_string(p.branch_swaps));
  }
  field("recomputed_nodes", std::to_string(p.recomputed_nodes));
  field("predicted_step_seconds", seconds_text(p.predicted_step_seconds));
  field("plans", std::to_string(report.plans), true);
  return out + "}\n";
}

}  // namespace memfit
