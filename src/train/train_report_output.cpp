// The report of a training run as one JSON object (`memfit train --json`,
// and what memfit.train returns in Python), written by hand so that the
// library needs no JSON dependency.
#include <cstdio>

#include "core/text.h"
#include "memfit/train.h"

namespace memfit {
namespace {

// A JSON array of numbers, each printed with `number` (a printf format).
template <typename T>
std::string json_numbers(const std::vector<T>& values, const char* number) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += format(number, static_cast<double>(values[i]));
  }
  return out + "]";
}

}  // namespace

std::string train_report_json(const TrainOptions& options, const TrainReport& report) {
  const StepSpec& spec = options.step;
  std::string out = "{\n";
  out += "  \"model\": " + json_string(spec.model.name) + ",\n";
  out += format("  \"batch\": %lld,\n  \"accumulate\": %lld,\n  \"ranks\": %lld,\n",
                static_cast<long long>(spec.model.batch), static_cast<long long>(spec.accumulate),
                static_cast<long long>(report.ranks));
  out += "  \"optimizer\": " + json_string(name_of(spec.optimizer.kind)) + ",\n";
  out += "  \"backend\": " + json_string(std::string(name_of(spec.backend))) + ",\n";
  out += format("  \"epochs\": %lld,\n  \"seed\": %llu,\n", static_cast<long long>(options.epochs),
                static_cast<unsigned long long>(options.seed));
  out += "  \"data\": " + json_string(options.synthetic ? "synthetic" : "fashion-mnist") + ",\n";
  // %.9g: every float loss reads back as the same float.
  out += "  \"losses\": " + json_numbers(report.losses, "%.9g") + ",\n";
  out += "  \"test_accuracy\": " + json_numbers(report.test_accuracy, "%.17g") + ",\n";
  out += "  \"test_loss\": " + json_numbers(report.test_loss, "%.17g") + ",\n";
  out += format("  \"examples_per_second\": %.9g,\n", report.examples_per_second);
  out += format("  \"arena_bytes\": %zu,\n  \"high_water_bytes\": %zu,\n", report.arena_bytes,
                report.high_water_bytes);
  out += format("  \"optimizer_steps\": %lld,\n", static_cast<long long>(report.optimizer_steps));
  out += format("  \"stopped\": %s\n}\n", report.stopped ? "true" : "false");
  return out;
}

}  // namespace memfit
