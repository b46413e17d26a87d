// The policies side by side under one memory budget and one host link:
// planned arena, host pool, the planner's predicted step (roofline cost
// model) and the measured step, for sharing alone (no budget: the baseline),
// --policy recompute, --policy swap and --policy auto. The rows run in
// interleaved rounds (one step of each per round) so that a shared machine's
// load moves them alike; each step's time is the median over the rounds.
//
//   ./build/bench/policy_overhead [depth] [batch] [budget fraction] [link GB/s] [rounds] [threads]
//   (defaults: resnet-cifar depth 56, batch 100, 0.3 of sharing alone's arena, 0.5 GB/s,
//    3 rounds, 2 threads)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "memfit/plan.h"
#include "train/data_source.h"
#include "train/training_program.h"

using namespace memfit;

namespace {

struct Row {
  std::string name;
  size_t arena = 0, host = 0, recomputed = 0, swapped = 0;
  double predicted = 0;
  std::vector<double> seconds;
  std::unique_ptr<TrainingProgram> program;
  StateStore state;
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "policy_overhead: %s\n", message.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t depth = argc > 1 ? std::atoll(argv[1]) : 56;
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 100;
  const double fraction = argc > 3 ? std::atof(argv[3]) : 0.3;
  const double link = argc > 4 ? std::atof(argv[4]) : 0.5;
  const int rounds = argc > 5 ? std::atoi(argv[5]) : 3;
  const int threads = argc > 6 ? std::atoi(argv[6]) : 2;
  const ModelOptions model{.name = "resnet-cifar", .batch = batch, .depth = depth};
  OptimizerConfig sgd;
  sgd.lr = 0.01f;

  PlanRequest request;
  request.step.model = model;
  request.step.optimizer = sgd;
  request.step.link_gbps = link;
  request.step.threads = threads;
  const PlanReport shared = plan_training_step(request).value();
  const auto budget =
      static_cast<size_t>(fraction * static_cast<double>(shared.arena_bytes));
  std::printf(
      "resnet-cifar depth %lld, batch %lld, SGD; budget %.2f of sharing alone's %.1f MiB = "
      "%.1f MiB; link %g GB/s; %d threads; median of %d interleaved rounds after a warm-up\n",
      static_cast<long long>(depth), static_cast<long long>(batch), fraction,
      static_cast<double>(shared.arena_bytes) / (1 << 20),
      static_cast<double>(budget) / (1 << 20), link, threads, rounds);

  struct Config {
    const char* name;
    Policy policy;
    bool budgeted;
  };
  std::vector<Row> rows;
  for (const Config& c : {Config{"share (no budget)", Policy::share, false},
                          Config{"recompute", Policy::recompute, true},
                          Config{"swap", Policy::swap, true},
                          Config{"auto", Policy::automatic, true}}) {
    PlanRequest r = request;
    r.step.budget = c.budgeted ? budget : 0;
    r.step.policy = c.policy;
    auto report = plan_training_step(r);
    if (!report) {
      std::printf("%-18s does not fit: %s\n", c.name, report.message().c_str());
      continue;
    }
    Row row;
    row.name = c.name;
    row.arena = report->arena_bytes;
    row.host = report->host_bytes;
    row.recomputed = report->recomputed_nodes;
    row.swapped = report->swapped_values;
    row.predicted = report->predicted_step_seconds;
    auto program = TrainingProgram::create(r.step, batch);
    if (!program) die(program.message());
    row.program = std::move(program).value();
    if (row.program->step_executable().plan().arena_bytes != row.arena) {
      die(std::string(c.name) + ": the trainer's arena differs from the plan's");
    }
    row.program->init_state(row.state, 1);
    if (!row.program->load_state(row.state).is_ok()) std::abort();
    rows.push_back(std::move(row));
  }
  auto data = synthetic_source(DataKind::images, rows.front().program->model(), batch, batch, 3);
  if (!data) die(data.message());
  Batch feed = Batch::for_model(rows.front().program->model());
  std::vector<int64_t> examples(static_cast<size_t>(batch));
  std::iota(examples.begin(), examples.end(), 0);
  if (!(*data)->fill(false, examples, feed).is_ok()) die("no data");
  for (int round = 0; round <= rounds; ++round) {  // round 0 warms up
    for (Row& row : rows) {
      StepCounters counters;
      const auto start = std::chrono::steady_clock::now();
      auto loss = row.program->micro_step(feed.feeds(), 1, 1.0f, counters);
      if (!loss) die(loss.message());
      const double t =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (round > 0) row.seconds.push_back(t);
    }
  }
  std::printf(
      "\n| policy | arena MiB | host MiB | recomputed nodes | swapped values | predicted s | "
      "measured s | measured / share |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  double base = 0;
  for (Row& row : rows) {
    std::sort(row.seconds.begin(), row.seconds.end());
    const double median = row.seconds[row.seconds.size() / 2];
    if (base == 0) base = median;
    std::printf("| %s | %.1f | %.1f | %zu | %zu | %.3f | %.3f | %.2f |\n", row.name.c_str(),
                static_cast<double>(row.arena) / (1 << 20),
                static_cast<double>(row.host) / (1 << 20), row.recomputed, row.swapped,
                row.predicted, median, median / base);
  }
  return 0;
}
