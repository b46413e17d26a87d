// `memfit maxbatch`: the largest batch whose planned step fits a budget.
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "memfit/plan.h"

namespace memfit {
namespace {

// The plan of `request` at `batch` under its budget: a report when it fits,
// nothing when only the budget refused it, an error for any other failure.
Result<std::optional<PlanReport>> probe(const PlanRequest& request, int64_t batch) {
  PlanRequest at = request;
  at.model.batch = batch;
  Result<PlanReport> fitted = plan_training_step(at);
  if (fitted) return std::optional<PlanReport>(std::move(fitted).value());
  // The budget strategies need the budget to choose; without it, a plan that
  // still succeeds shows that only the budget failed.
  at.budget = 0;
  Result<PlanReport> unlimited = plan_training_step(at);
  if (!unlimited) return unlimited.status();
  return std::optional<PlanReport>();
}

std::string seconds_text(double seconds) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6f", seconds);
  return buffer;
}

}  // namespace

Result<MaxBatchReport> find_max_batch(const PlanRequest& request) {
  if (request.budget == 0) return Status::error("maxbatch needs a budget: give --budget");
  MaxBatchReport report;
  MEMFIT_ASSIGN_OR_RETURN(std::optional<PlanReport> one, probe(request, 1));
  ++report.plans;
  if (!one) {
    PlanRequest at = request;
    at.model.batch = 1;
    at.budget = 0;
    MEMFIT_ASSIGN_OR_RETURN(PlanReport smallest, plan_training_step(at));
    return Status::error("even batch 1 does not fit the budget of " + human_bytes(request.budget) +
                         ": its arena is " + std::to_string(smallest.arena_bytes) +
                         " bytes; give a budget of at least that, or allow more techniques");
  }
  int64_t good = 1;
  PlanReport good_plan = std::move(*one);
  constexpr int64_t kMaxBatch = int64_t{1} << 24;
  int64_t bad = 0;  // 0: none found yet
  for (int64_t b = 2; b <= kMaxBatch; b *= 2) {
    MEMFIT_ASSIGN_OR_RETURN(std::optional<PlanReport> plan, probe(request, b));
    ++report.plans;
    if (!plan) {
      bad = b;
      break;
    }
    good = b;
    good_plan = std::move(*plan);
  }
  while (bad > 0 && bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    MEMFIT_ASSIGN_OR_RETURN(std::optional<PlanReport> plan, probe(request, mid));
    ++report.plans;
    if (plan) {
      good = mid;
      good_plan = std::move(*plan);
    } else {
      bad = mid;
    }
  }
  report.max_batch = good;
  report.plan = std::move(good_plan);
  return report;
}

std::string max_batch_text(const PlanRequest& request, const MaxBatchReport& report) {
  const PlanReport& p = report.plan;
  std::string out = "memfit maxbatch: " + request.model.name + ", budget " +
                    human_bytes(request.budget) + ", sharing " + (request.share ? "on" : "off") +
                    ", recompute " + std::string(recompute_name(request.recompute)) + ", swap " +
                    std::string(swap_name(request.swap)) +
                    ", policy " + std::string(request_policy(request)) + "\n";
  out += "  max batch            " + std::to_string(report.max_batch) + "\n";
  out += "  arena                " + human_bytes(p.arena_bytes) + " (" +
         std::to_string(p.arena_bytes) + " bytes)\n";
  out += "  host pool            " + human_bytes(p.host_bytes) + " (" +
         std::to_string(p.host_bytes) + " bytes)\n";
  out += "  swapped              " + std::to_string(p.swapped_values) + " values\n";
  if (request.swap == Swap::tflms) {
    out += "  tflms                " + tflms_options_text(request.tflms) + "\n";
    out += "  swap-ins             " + std::to_string(p.swap_ins) + " (" +
           std::to_string(p.branch_swaps) + " branch swaps, " +
           std::to_string(p.trigger_fallbacks) + " chain_rule fallbacks)\n";
  }
  out += "  recomputed nodes     " + std::to_string(p.recomputed_nodes) + "\n";
  if (request.auto_policy) {
    out += "  auto's plan          " + p.auto_choice + " (" + std::to_string(p.recomputed_values) +
           " values recomputed, " + std::to_string(p.swapped_values) + " swapped)\n";
  }
  out += "  step time            " + seconds_text(p.predicted_step_seconds) +
         " s (predicted by the roofline cost model, not measured)\n";
  out += "  batches planned      " + std::to_string(report.plans) + "\n";
  return out;
}

std::string max_batch_json(const PlanRequest& request, const MaxBatchReport& report) {
  const PlanReport& p = report.plan;
  // One key per line, as plan_report_json writes them.
  std::string out = "{\n";
  auto field = [&](const char* key, const std::string& value, bool last = false) {
    out += std::string("  \"") + key + "\": " + value + (last ? "\n" : ",\n");
  };
  auto quoted = [](std::string_view text) { return "\"" + std::string(text) + "\""; };
  field("model", quoted(request.model.name));
  field("budget_bytes", std::to_string(request.budget));
  field("sharing", request.share ? "true" : "false");
  field("recompute", quoted(recompute_name(request.recompute)));
  field("swap", quoted(swap_name(request.swap)));
  field("policy", quoted(request_policy(request)));
  field("auto_choice", quoted(p.auto_choice));
  field("recomputed_values", std::to_string(p.recomputed_values));
  field("max_batch", std::to_string(report.max_batch));
  field("arena_bytes", std::to_string(p.arena_bytes));
  field("host_bytes", std::to_string(p.host_bytes));
  field("swapped_values", std::to_string(p.swapped_values));
  if (request.swap == Swap::tflms) {
    field("tflms", quoted(tflms_options_text(request.tflms)));
    field("swap_ins", std::to_string(p.swap_ins));
    field("branch_swaps", std::to_string(p.branch_swaps));
  }
  field("recomputed_nodes", std::to_string(p.recomputed_nodes));
  field("predicted_step_seconds", seconds_text(p.predicted_step_seconds));
  field("plans", std::to_string(report.plans), true);
  return out + "}\n";
}

}  // namespace memfit
