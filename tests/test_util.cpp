#include "test_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

#include "autodiff/autodiff.h"
#include "core/check.h"
#include "core/random.h"
#include "memory/planner.h"
#include "ops/typed_graph.h"
#include "train/data_source.h"

namespace memfit::testing {

std::vector<OpKind> all_ops() {
  std::vector<OpKind> ops;
  for (int i = 0; i < kNumOps; ++i) ops.push_back(static_cast<OpKind>(i));
  return ops;
}

std::string op_test_name(const ::testing::TestParamInfo<OpKind>& info) {
  return std::string(op_name(info.param));
}

std::vector<float> random_normal(size_t count, uint64_t seed) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    // Box-Muller on two counter-based uniforms; 1 - u keeps the log finite.
    const double u1 = 1.0 - random_uniform(seed, 0, 1, i);
    const double u2 = random_uniform(seed, 0, 2, i);
    out[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  return out;
}

std::vector<Words> example_inputs(const OpExample& example, uint64_t seed) {
  std::vector<Words> out;
  for (size_t i = 0; i < example.inputs.size(); ++i) {
    const TensorType& type = example.inputs[i];
    const InputInit init = i < example.init.size() ? example.init[i] : InputInit{};
    const auto n = static_cast<size_t>(num_elements(type.shape));
    Words words(n);
    const auto normal = random_normal(n, seed * 131 + i);
    // distinct: rank k of a random key gets (k - n/2) * 0.1 + 0.05.
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return normal[a] < normal[b]; });
    std::vector<float> distinct(n);
    for (size_t k = 0; k < n; ++k) {
      distinct[order[k]] = (static_cast<float>(k) - static_cast<float>(n / 2)) * 0.1f + 0.05f;
    }
    for (size_t k = 0; k < n; ++k) {
      switch (init.kind) {
        case InputInit::normal:
          words[k] = as_word(normal[k]);
          break;
        case InputInit::positive:
          words[k] = as_word(0.5f + random_uniform(seed, 1, i, k));
          break;
        case InputInit::distinct:
          words[k] = as_word(distinct[k]);
          break;
        case InputInit::labels:
          words[k] = static_cast<uint32_t>(random_bits(seed, 2, i, k) % init.classes);
          break;
      }
    }
    out.push_back(std::move(words));
  }
  return out;
}

Graph single_node_graph(OpKind op, const OpExample& example) {
  Graph graph;
  std::vector<ValueId> inputs;
  for (size_t i = 0; i < example.inputs.size(); ++i) {
    inputs.push_back(graph.add_input("in" + std::to_string(i), example.inputs[i], Role::input));
  }
  auto node = add_node(graph, op, inputs, example.attrs, "node");
  MEMFIT_CHECK(node.is_ok());
  for (ValueId out : graph.node(*node).outputs) graph.mark_output(out);
  return graph;
}

Graph blocked_round_trip_graph() {
  Result<Graph> graph = parse_graph(
      "memfit-graph 1\n"
      "input %x f32[2,3,4,4] input\n"
      "node to_c8 = reorder(%x) -> %x.c8 f32[2,3,4,4]@c8 activation\n"
      "node to_plain = reorder(%x.c8) -> %y f32[2,3,4,4] activation\n"
      "output %y\n");
  MEMFIT_CHECK(graph.is_ok());
  return std::move(graph).value();
}

Feeds feeds_for(const std::vector<Words>& inputs) {
  Feeds feeds;
  for (size_t i = 0; i < inputs.size(); ++i) feeds["in" + std::to_string(i)] = inputs[i].data();
  return feeds;
}

std::vector<std::vector<float>> run_outputs(Executable& exe, const std::vector<Words>& inputs,
                                            const StepContext& step) {
  StateStore state;
  auto result = exe.run(state, feeds_for(inputs), step);
  if (!result) std::fprintf(stderr, "the step failed: %s\n", result.message().c_str());
  MEMFIT_CHECK(result.is_ok());
  std::vector<std::vector<float>> out;
  for (ValueId v : exe.graph().outputs())
    out.push_back(result->outputs.at(exe.graph().value(v).name));
  return out;
}

DataKind data_kind(const std::string& model) {
  auto info = model_info(model);
  if (!info) ADD_FAILURE() << info.message();
  return info ? info->data : DataKind::images;
}

std::vector<float> run_synthetic_micro_batches(TrainingProgram& program, int64_t accumulate,
                                               StateStore& state) {
  std::vector<float> losses;
  const Model& model = program.model();
  const int64_t batch = program.batch();
  auto data = synthetic_source(data_kind(model.name), model, batch * accumulate, batch, 11);
  EXPECT_TRUE(data.is_ok()) << data.message();
  if (!data) return losses;
  Batch inputs = Batch::for_model(model);
  std::vector<int64_t> examples(static_cast<size_t>(batch));
  StepCounters counters;
  const Status loaded = program.load_state(state);
  EXPECT_TRUE(loaded.is_ok()) << loaded.message();
  for (int64_t m = 0; m < accumulate; ++m) {
    std::iota(examples.begin(), examples.end(), m * batch);
    EXPECT_TRUE((*data)->fill(false, examples, inputs).is_ok());
    auto loss = program.micro_step(inputs.feeds(), 3, 1.0f, counters);
    EXPECT_TRUE(loss.is_ok()) << loss.message();
    if (loss) losses.push_back(*loss);
  }
  MEMFIT_CHECK(program.store_state(state).is_ok());
  return losses;
}

OptimizerConfig sgd() {
  OptimizerConfig o;
  o.lr = 0.1f;
  return o;
}

StepSpec test_spec(const ModelOptions& model, int64_t accumulate) {
  StepSpec spec;
  spec.model = model;
  spec.accumulate = accumulate;
  spec.optimizer = sgd();
  return spec;
}

StepRun run_step(TrainingProgram& program, int64_t accumulate, bool verify) {
  StepRun run;
  const Executable& exe = program.step_executable();
  if (verify) {
    EXPECT_TRUE(verify_graph(exe.graph()).is_ok());
    const Status plan_ok = verify_plan(exe.graph(), exe.sizes(), exe.plan());
    EXPECT_TRUE(plan_ok.is_ok()) << plan_ok.message();
  }
  run.recompute = program.recompute_summary();
  run.swap = program.swap_summary();
  run.arena = exe.plan().arena_bytes;
  run.lower_bound = exe.plan().lower_bound_bytes;
  run.host = exe.plan().host_bytes;
  program.init_state(run.state, 7);
  run.losses = run_synthetic_micro_batches(program, accumulate, run.state);
  return run;
}

StepRun run_verified_step(const StepSpec& spec, bool poison) {
  Result<StepRun> run = try_verified_step(spec, poison);
  EXPECT_TRUE(run.is_ok()) << run.message();
  return run ? std::move(run).value() : StepRun{};
}

Result<StepRun> try_verified_step(const StepSpec& spec, bool poison) {
  auto program = TrainingProgram::create(spec, 2, poison);
  if (!program) return program.status();
  return run_step(**program, spec.accumulate, true);
}

void expect_identical_steps(const StepRun& expected, const StepRun& actual,
                            const std::string& what) {
  ASSERT_EQ(expected.losses.size(), actual.losses.size()) << what;
  for (size_t i = 0; i < actual.losses.size(); ++i) {
    EXPECT_EQ(as_word(expected.losses[i]), as_word(actual.losses[i])) << what;
    EXPECT_TRUE(std::isfinite(actual.losses[i])) << what;
  }
  ASSERT_EQ(expected.state.tensors().size(), actual.state.tensors().size()) << what;
  for (const auto& [name, data] : expected.state.tensors()) {
    const std::vector<float>* other = actual.state.find(name);
    ASSERT_NE(other, nullptr) << what << ": " << name;
    ASSERT_EQ(data.size(), other->size()) << what << ": " << name;
    size_t differing = 0;
    for (size_t i = 0; i < data.size(); ++i) differing += as_word(data[i]) != as_word((*other)[i]);
    EXPECT_EQ(differing, 0u) << what << ": " << name;
  }
}

ArenaOf backend_arena_of(const Backend& backend) {
  return [&backend](const Graph& graph) -> Result<size_t> {
    MEMFIT_ASSIGN_OR_RETURN(auto prepared, Executable::prepare(graph, backend, ExecOptions{}));
    return prepared->plan().arena_bytes;
  };
}

std::string model_test_name(const ModelOptions& model) {
  std::string name = model.name;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::string model_param_name(const ::testing::TestParamInfo<ModelOptions>& info) {
  return model_test_name(info.param);
}

std::vector<ModelOptions> tiny_zoo() {
  return {
      {.name = "lenet", .batch = 4},
      {.name = "mlp", .batch = 4},
      {.name = "resnet18", .batch = 2, .image_size = 16, .classes = 4, .width = 4},
      {.name = "resnet34", .batch = 2, .image_size = 16, .classes = 4, .width = 4},
      {.name = "resnet50", .batch = 2, .image_size = 16, .classes = 4, .width = 4},
      {.name = "resnet101", .batch = 2, .image_size = 16, .classes = 4, .width = 4},
      {.name = "resnet152", .batch = 2, .image_size = 16, .classes = 4, .width = 4},
      {.name = "resnet-cifar", .batch = 2, .image_size = 8, .depth = 11, .width = 4},
      {.name = "vgg16", .batch = 2, .image_size = 32, .classes = 4, .width = 4},
      {.name = "lstm-lm", .batch = 2, .depth = 2, .width = 16, .seq_len = 4, .vocab = 16},
      {.name = "seq2seq", .batch = 2, .depth = 1, .width = 16, .seq_len = 4, .vocab = 16},
      {.name = "gpt", .batch = 2, .depth = 2, .width = 16, .seq_len = 4, .vocab = 16},
      {.name = "transformer", .batch = 2, .depth = 1, .width = 16, .seq_len = 4, .vocab = 16},
      {.name = "unet3d", .batch = 1, .classes = 3, .width = 2, .volume = 16},
  };
}

void PrintTo(const ModelCase& c, std::ostream* os) {
  *os << c.model.name << " batch " << c.model.batch << " accumulate " << c.accumulate;
}

void PrintTo(const StepCase& c, std::ostream* os) {
  *os << c.model.name << " accumulate " << c.accumulate << " " << name_of(c.recompute);
}

Graph tanh_chain(int n, int width) {
  const std::string type = "f32[" + std::to_string(width) + "]";
  std::string text = "memfit-graph 1\ninput %w " + type + " parameter\n";
  std::string previous = "w";
  for (int i = 1; i <= n; ++i) {
    const std::string t = "t" + std::to_string(i);
    text += "node " + t + " = tanh(%" + previous + ") -> %" + t + " " + type + " activation\n";
    previous = t;
  }
  text += "node loss = reduce_sum(%" + previous +
          ") {axes=[0] keepdims=false} -> %loss f32[] activation\noutput %loss\n";
  Graph g = parse_graph(text).value();
  EXPECT_TRUE(append_gradients(g, g.find_value("loss"), {g.find_value("w")}).is_ok());
  return g;
}

size_t smallest_arena_in(const std::string& message) {
  const std::string lead = "the smallest arena this plan reaches is ";
  const size_t at = message.find(lead);
  if (at == std::string::npos) return 0;
  std::string digits;
  for (size_t i = at + lead.size();
       i < message.size() && std::isdigit(static_cast<unsigned char>(message[i])); ++i) {
    digits += message[i];
  }
  return digits.empty() ? 0 : std::stoull(digits);
}

}  // namespace memfit::testing

namespace memfit {
void PrintTo(const ModelOptions& model, std::ostream* os) {
  *os << model.name << " batch " << model.batch;
}
}  // namespace memfit
