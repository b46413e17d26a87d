// The step-time overhead of swapping with a limited host link, measured and
// predicted side by side. One model (resnet-cifar, depth 20, width 16, 32x32
// images, batch 32, SGD) trains a few steps on synthetic data without swapping
// and then with every swap candidate swapped (--swap budget without a memory
// budget) at several link bandwidths. The prediction is the two-stream model
// of src/passes/step_time.h fed with this run's measured mean kernel seconds
// of every compute node and bytes / link for every copy.
//
//   ./build/bench/swap_overhead [steps] [threads]   (defaults: 5 steps, 1 thread)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "passes/step_time.h"
#include "train/data_source.h"
#include "train/training_program.h"

using namespace memfit;

namespace {

struct Row {
  double measured = 0;   // mean seconds of a step
  double predicted = 0;  // the model's seconds of a step
  double compute = 0;    // mean kernel seconds of a step (compute nodes only)
  size_t host = 0;
  size_t swapped = 0;
};

Row run(Swap swap, double link_gbps, int steps, int threads) {
  const ModelOptions model{
      .name = "resnet-cifar", .batch = 32, .image_size = 32, .depth = 20, .width = 16};
  OptimizerConfig sgd;
  sgd.lr = 0.01f;
  StepSpec spec;
  spec.model = model;
  spec.optimizer = sgd;
  spec.threads = threads;
  spec.swap = swap;
  spec.link_gbps = link_gbps;
  auto program = TrainingProgram::create(spec, 32).value();
  StateStore state;
  program->init_state(state, 1);
  if (!program->load_state(state).is_ok()) std::abort();
  if (!program->time_step_kernels().is_ok()) std::abort();
  auto data =
      synthetic_source(DataKind::images, program->model(), model.batch, model.batch, 3).value();
  Batch batch = Batch::for_model(program->model());
  std::vector<int64_t> examples(static_cast<size_t>(model.batch));
  std::iota(examples.begin(), examples.end(), 0);
  if (!data->fill(false, examples, batch).is_ok()) std::abort();
  StepCounters counters;
  // One step to warm up: oneDNN primitives, page faults of the arena and pool.
  if (!program->micro_step(batch.feeds(), 1, 1.0f, counters).is_ok()) std::abort();
  const Executable& exe = program->step_executable();
  const std::vector<double> before = exe.node_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    if (!program->micro_step(batch.feeds(), 1, 1.0f, counters).is_ok()) std::abort();
  }
  Row row;
  row.measured =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  const Graph& g = exe.graph();
  const StepMachine machine = step_machine({}, link_gbps);
  std::vector<double> seconds = predicted_node_seconds(g, machine);  // copies: bytes / link
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const OpKind op = g.nodes()[n].op;
    if (op == OpKind::to_host || op == OpKind::to_device || op == OpKind::swap_wait) continue;
    seconds[n] = (exe.node_seconds()[n] - before[n]) / steps;
    row.compute += seconds[n];
  }
  row.predicted = predicted_step_seconds(g, seconds);
  row.host = exe.plan().host_bytes;
  row.swapped = program->swap_summary().swapped_values;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 5;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  const Row none = run(Swap::none, 0, steps, threads);
  // compute: this run's mean kernel seconds of a step, the model's input.
  // Overheads over that compute: measured (the step's wall time) and
  // predicted (the model's step); vs none: the step over the step without swapping.
  std::printf("%-10s %7s %8s %9s %9s %9s %9s %10s %10s %8s\n", "link GB/s", "swapped", "host MiB",
              "compute", "measured", "predicted", "pred/meas", "overhead m", "overhead p",
              "vs none");
  auto print = [&](const char* label, const Row& r) {
    std::printf("%-10s %7zu %8.1f %8.3fs %8.3fs %8.3fs %9.3f %9.1f%% %9.1f%% %8.3f\n", label,
                r.swapped, static_cast<double>(r.host) / (1 << 20), r.compute, r.measured,
                r.predicted, r.predicted / r.measured, 100.0 * (r.measured / r.compute - 1.0),
                100.0 * (r.predicted / r.compute - 1.0), r.measured / none.measured);
  };
  print("no swap", none);
  for (double link : {0.0, 2.0, 0.5, 0.25, 0.125}) {
    char label[32];
    std::snprintf(label, sizeof label, link > 0 ? "%g" : "unlimited", link);
    print(label, run(Swap::budget, link, steps, threads));
  }
  return 0;
}
