// Step time of GPT-2 small's layers with fused against naive attention,
// measured side by side: for each sequence length, rounds that alternate the
// two forms, each round a warm-up step and then `steps` timed steps of one
// training step (forward, backward, SGD update) at batch 1 on synthetic
// tokens. Also the seconds of the attention nodes alone (fused: attention and
// attention_grad; naive: the matmuls of (T, T) operands, scale, causal_mask,
// softmax, dropout and their gradients), from the executor's node times.
//
//   ./build/bench/attention_step_time T DEPTH [rounds] [steps] [vocab]
//   (defaults: 2 rounds, 3 steps, GPT-2's 50257 tokens)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>

#include "train/data_source.h"
#include "train/training_program.h"

using namespace memfit;

namespace {

struct Times {
  double step = 0;       // mean seconds of a step
  double attention = 0;  // of it, the attention nodes'
  size_t arena = 0;
};

// Whether node `n` of a naive step belongs to attention: it reads or writes
// a value whose last two dimensions are (T, T).
bool touches_scores(const Graph& g, const Node& node, int64_t t) {
  auto square = [&](ValueId v) {
    const Shape& s = g.value(v).type.shape;
    return s.size() >= 2 && s[s.size() - 1] == t && s[s.size() - 2] == t;
  };
  for (ValueId v : node.inputs) {
    if (square(v)) return true;
  }
  for (ValueId v : node.outputs) {
    if (square(v)) return true;
  }
  return false;
}

Times run(AttentionForm form, int64_t t, int64_t depth, int64_t vocab, int steps) {
  StepSpec spec;
  spec.model = ModelOptions{.name = "gpt", .batch = 1, .depth = depth, .seq_len = t, .vocab = vocab};
  spec.model.attention = form;
  spec.optimizer.lr = 0.01f;
  auto program = TrainingProgram::create(spec, 1).value();
  StateStore state;
  program->init_state(state, 1);
  if (!program->load_state(state).is_ok()) std::abort();
  if (!program->time_step_kernels().is_ok()) std::abort();
  auto data = synthetic_source(DataKind::tokens, program->model(), 1, 1, 3).value();
  Batch batch = Batch::for_model(program->model());
  std::vector<int64_t> examples = {0};
  if (!data->fill(false, examples, batch).is_ok()) std::abort();
  StepCounters counters;
  if (!program->micro_step(batch.feeds(), 1, 1.0f, counters).is_ok()) std::abort();  // warm-up
  const Executable& exe = program->step_executable();
  const std::vector<double> before = exe.node_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    if (!program->micro_step(batch.feeds(), 1, 1.0f, counters).is_ok()) std::abort();
  }
  Times times;
  times.step = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  const Graph& g = exe.graph();
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.nodes()[n];
    const bool attention = node.op == OpKind::attention || node.op == OpKind::attention_grad ||
                           touches_scores(g, node, t);
    if (attention) times.attention += (exe.node_seconds()[n] - before[n]) / steps;
  }
  times.arena = exe.plan().arena_bytes;
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s T DEPTH [rounds] [steps] [vocab]\n", argv[0]);
    return 2;
  }
  const int64_t t = std::atoll(argv[1]);
  const int64_t depth = std::atoll(argv[2]);
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 2;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 3;
  const int64_t vocab = argc > 5 ? std::atoll(argv[5]) : 50257;
  std::printf("gpt (width 768, 12 heads), batch 1, %lld positions, %lld layers, vocab %lld; "
              "%d rounds of %d steps\n",
              static_cast<long long>(t), static_cast<long long>(depth),
              static_cast<long long>(vocab), rounds, steps);
  std::printf("%5s %6s %10s %12s %10s\n", "round", "form", "step s", "attention s", "arena GiB");
  Times sum[2];
  for (int r = 0; r < rounds; ++r) {
    for (AttentionForm form : {AttentionForm::fused, AttentionForm::naive}) {
      const Times times = run(form, t, depth, vocab, steps);
      const int i = form == AttentionForm::fused ? 0 : 1;
      sum[i].step += times.step / rounds;
      sum[i].attention += times.attention / rounds;
      std::printf("%5d %6s %10.3f %12.3f %10.2f\n", r + 1, i == 0 ? "fused" : "naive", times.step,
                  times.attention, static_cast<double>(times.arena) / (1 << 30));
      std::fflush(stdout);
    }
  }
  std::printf("mean: fused %.3f s (attention %.3f s), naive %.3f s (attention %.3f s); "
              "fused / naive: step %.3f, attention %.3f\n",
              sum[0].step, sum[0].attention, sum[1].step, sum[1].attention,
              sum[0].step / sum[1].step, sum[0].attention / sum[1].attention);
  return 0;
}
